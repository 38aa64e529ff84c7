package capacity

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// TestScoresParsedOncePerVersion: a cluster's score is parsed once per
// resourceVersion (the same map is returned while the score is
// unchanged), a changed score is read anew, an expired one is valid no
// more, and a deleted one is not found; a nil Scores reads the same
// values without keeping them.
func TestScoresParsedOncePerVersion(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := clusterv1alpha1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	obj := &clusterv1alpha1.AddOnPlacementScore{
		ObjectMeta: metav1.ObjectMeta{Namespace: "c1", Name: fleetv1alpha1.CapacityScoreName},
		Status: clusterv1alpha1.AddOnPlacementScoreStatus{
			Scores:     []clusterv1alpha1.AddOnPlacementScoreItem{{Name: "fit-1000m-1024mi", Value: 3}, {Name: ScoreCPUFree, Value: 7}},
			ValidUntil: &metav1.Time{Time: now.Add(time.Minute)},
		},
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(obj).WithStatusSubresource(obj).Build()
	var scores Scores

	first, err := scores.Read(ctx, c, "c1")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int32{"fit-1000m-1024mi": 3, ScoreCPUFree: 7}
	if !first.Found || !cmp.Equal(first.Values, want) || !first.ValidUntil.Equal(now.Add(time.Minute)) {
		t.Fatalf("first read: %+v, want found, values %v, validUntil %s", first, want, now.Add(time.Minute))
	}
	again, err := scores.Read(ctx, c, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if reflect.ValueOf(again.Values).Pointer() != reflect.ValueOf(first.Values).Pointer() {
		t.Error("the unchanged score was parsed again: want the map kept for its resourceVersion")
	}
	if got := first.Valid(now); !cmp.Equal(got, want) {
		t.Errorf("Valid before validUntil = %v, want %v", got, want)
	}
	if got := first.Valid(now.Add(time.Minute)); got != nil {
		t.Errorf("Valid at validUntil = %v, want nil (expired)", got)
	}

	obj.Status.Scores[0].Value = 1
	if err := c.Status().Update(ctx, obj); err != nil {
		t.Fatal(err)
	}
	changed, err := scores.Read(ctx, c, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if got := changed.Values["fit-1000m-1024mi"]; got != 1 {
		t.Errorf("after the agent's update the fit value is %d, want 1 (the new version)", got)
	}
	if first.Values["fit-1000m-1024mi"] != 3 {
		t.Error("the update changed the map an earlier reader holds")
	}
	var none *Scores
	if direct, err := none.Read(ctx, c, "c1"); err != nil || !cmp.Equal(direct, changed) {
		t.Errorf("nil Scores read %+v, %v; want %+v", direct, err, changed)
	}

	if err := c.Delete(ctx, obj); err != nil {
		t.Fatal(err)
	}
	gone, err := scores.Read(ctx, c, "c1")
	if err != nil || gone.Found || gone.Valid(now) != nil {
		t.Errorf("deleted score: %+v, %v; want not found, no error", gone, err)
	}
	if missing, err := scores.Read(ctx, c, "c2"); err != nil || missing.Found {
		t.Errorf("cluster without a score: %+v, %v; want not found, no error", missing, err)
	}
	if no := (Score{}).Valid(now); no != nil {
		t.Errorf("no score is valid: %v", no)
	}
}
