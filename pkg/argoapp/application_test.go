package argoapp_test

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/argoapp"
	"github.com/fleetvm/fleetvm/pkg/argoapp/argoapptest"
)

// TestTrimHoldsLabels: a cached Application keeps the labels FleetVM sets,
// readable as labels, without its label map; the others are gone, and a
// cached copy written back (a merge patch is computed from its JSON)
// carries no labels at all.
func TestTrimHoldsLabels(t *testing.T) {
	owner := map[string]string{
		fleetv1alpha1.LabelFleetVMName:      "vm",
		fleetv1alpha1.LabelFleetVMNamespace: "team-a",
		fleetv1alpha1.LabelCluster:          "prod-a",
		fleetv1alpha1.LabelPartOf:           fleetv1alpha1.PartOfValue,
	}
	labels := maps.Clone(owner)
	labels["team"] = "a"
	app, err := argoapptest.FromArgo(&argov1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "argocd", Labels: labels}})
	if err != nil {
		t.Fatal(err)
	}
	if app.Labels != nil {
		t.Errorf("cached copy keeps its label map %v", app.Labels)
	}
	for key, want := range owner {
		if got := app.Label(key); got != want {
			t.Errorf("Label(%s) = %q, want %q", key, got, want)
		}
	}
	if got := app.Label("team"); got != "" {
		t.Errorf("Label(team) = %q, want none: the hub reads no other label", got)
	}
	if got := app.GetLabels(); !maps.Equal(got, owner) {
		t.Errorf("GetLabels() = %v, want %v", got, owner)
	}
	copied := app.DeepCopy()
	if got := copied.GetLabels(); !maps.Equal(got, owner) {
		t.Errorf("a deep copy's labels = %v, want %v", got, owner)
	}
	data, err := json.Marshal(copied)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), `"labels"`) {
		t.Errorf("a cached copy encodes labels: %s", data)
	}

	// Changed through the accessors, as a caller of client.Object would.
	l := copied.GetLabels()
	l[fleetv1alpha1.LabelCluster] = "prod-b"
	copied.SetLabels(l)
	if got := copied.Label(fleetv1alpha1.LabelCluster); got != "prod-b" {
		t.Errorf("after SetLabels, Label(cluster) = %q, want prod-b", got)
	}
	if got := app.Label(fleetv1alpha1.LabelCluster); got != "prod-a" {
		t.Errorf("the copy's change reached the original: %q", got)
	}

	// Held again through the hub's string table.
	shared := map[string]string{}
	share := func(s string) string {
		if v, ok := shared[s]; ok {
			return v
		}
		shared[s] = s
		return s
	}
	app.HoldLabels(share)
	if len(shared) != len(owner) {
		t.Errorf("HoldLabels shared %d strings, want the %d held: %v", len(shared), len(owner), shared)
	}
	if got := app.GetLabels(); !maps.Equal(got, owner) {
		t.Errorf("after HoldLabels again, GetLabels() = %v, want %v", got, owner)
	}
}

// TestLabelsOfADecodedApplication: an Application not trimmed (read from
// the API server, not the cache) reads its labels from its map.
func TestLabelsOfADecodedApplication(t *testing.T) {
	app := &argoapp.Application{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{fleetv1alpha1.LabelCluster: "prod-a", "team": "a"}}}
	if got := app.Label(fleetv1alpha1.LabelCluster); got != "prod-a" {
		t.Errorf("Label(cluster) = %q, want prod-a", got)
	}
	if got := app.GetLabels(); len(got) != 2 {
		t.Errorf("GetLabels() = %v, want both labels", got)
	}
	if got := (&argoapp.Application{}).GetLabels(); got != nil {
		t.Errorf("no labels: GetLabels() = %v, want nil", got)
	}
}
