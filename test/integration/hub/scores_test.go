package hub

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/capacity"
	"github.com/fleetvm/fleetvm/pkg/explain"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

// publishScoresUntil writes a cluster's fleetvm-capacity score in one
// write, as the agent does, valid until the time given (in the past: the
// agent stopped renewing it).
func publishScoresUntil(t *testing.T, cluster string, fits map[string]int32, until time.Time) {
	t.Helper()
	ctx := t.Context()
	score := &clusterv1alpha1.AddOnPlacementScore{ObjectMeta: metav1.ObjectMeta{Name: fleetv1alpha1.CapacityScoreName, Namespace: cluster}}
	if err := fleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(score), score); err != nil {
		if err := fleet.Hub.Client.Create(ctx, score); err != nil {
			t.Fatal(err)
		}
	}
	score.Status.Scores = []clusterv1alpha1.AddOnPlacementScoreItem{
		{Name: capacity.ScoreCPUFree, Value: 10}, {Name: capacity.ScoreMemoryFree, Value: 10},
	}
	for name, n := range fits {
		score.Status.Scores = append(score.Status.Scores, clusterv1alpha1.AddOnPlacementScoreItem{Name: name, Value: n})
	}
	valid := metav1.NewTime(until)
	score.Status.ValidUntil = &valid
	if err := fleet.Hub.Client.Status().Update(ctx, score); err != nil {
		t.Fatal(err)
	}
}

// TestExpiredScoreAttractsNoCopy: OCM's fit predicate reads a score
// whatever its validUntil, so a cluster whose agent stopped stays in the
// candidate Placement's decision; fleetvm-hub places no new copy there,
// and says why. A copy already placed stays when its cluster's score
// expires. The hub runs on the real clock: validUntil an hour ago has
// passed by it.
func TestExpiredScoreAttractsNoCopy(t *testing.T) {
	ctx := t.Context()
	s := shape("5", "5Gi")
	expired, valid := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	// prod-b's agent stopped an hour ago, its last score said the VM fits;
	// prod-a has no room yet.
	publishScoresUntil(t, "prod-b", map[string]int32{s.Name(): 4}, expired)
	publishScoresUntil(t, "prod-a", map[string]int32{s.Name(): 0}, valid)

	fvm := utiltesting.MakeFleetVM("expired", "x").Env("prod").VM(5, "5Gi").VMRunning().DeletionPolicy(fleetv1alpha1.DeletionPolicyOrphan).Obj()
	createFVM(t, fvm)
	key := client.ObjectKeyFromObject(fvm)
	placement := placementKey(t, fvm)
	// OCM's decision admits prod-b by its expired score.
	candidates := func() []string {
		var list clusterv1beta1.PlacementDecisionList
		if err := fleet.Hub.Client.List(ctx, &list, client.InNamespace(placement.Namespace),
			client.MatchingLabels{clusterv1beta1.PlacementLabel: placement.Name}); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, d := range list.Items {
			for _, c := range d.Status.Decisions {
				out = append(out, c.ClusterName)
			}
		}
		slices.Sort(out)
		return out
	}
	if err := fleetenv.Eventually(ctx, wait, func() (bool, error) {
		return slices.Contains(candidates(), "prod-b"), nil
	}); err != nil {
		t.Fatalf("OCM's decision does not admit prod-b by its expired score (%v): %v", candidates(), err)
	}

	// prod-a gets room: OCM decides prod-a and prod-b; the hub's pick for
	// every qualifying cluster, made on that decision, is prod-a alone.
	publishScoresUntil(t, "prod-a", map[string]int32{s.Name(): 4}, valid)
	got := waitFor(t, key, "placed", func(f *fleetv1alpha1.FleetVirtualMachine) bool { return len(decided(f)) > 0 })
	if diff := cmp.Diff([]string{"prod-a"}, decided(got)); diff != "" {
		t.Errorf("placed on (-want,+got):\n%s", diff)
	}
	if c := candidates(); !slices.Contains(c, "prod-a") || !slices.Contains(c, "prod-b") {
		t.Errorf("OCM's decision %v, want prod-a and prod-b", c)
	}
	if _, ok := applications(t, got)["prod-b"]; ok {
		t.Errorf("an Application delivers the VM to prod-b, whose score expired")
	}
	// The status says why prod-b was left out.
	var why *fleetv1alpha1.ExclusionCount
	for i, e := range got.Status.Placement.Excluded {
		if e.Reason == string(explain.NoAgent) {
			why = &got.Status.Placement.Excluded[i]
		}
	}
	if why == nil || !slices.Contains(why.Clusters, "prod-b") || !strings.Contains(why.Detail, "score expired") {
		t.Errorf("excluded %+v, want prod-b as %s saying its score expired", got.Status.Placement.Excluded, explain.NoAgent)
	}

	// prod-a's agent stops too; then prod-b's comes back. The copy on
	// prod-a stays, and prod-b, valid again, gets one.
	publishScoresUntil(t, "prod-a", map[string]int32{s.Name(): 3}, expired)
	publishScoresUntil(t, "prod-b", map[string]int32{s.Name(): 5}, valid)
	got = waitFor(t, key, "placed on prod-b too", func(f *fleetv1alpha1.FleetVirtualMachine) bool { return slices.Contains(decided(f), "prod-b") })
	if diff := cmp.Diff([]string{"prod-a", "prod-b"}, decided(got)); diff != "" {
		t.Errorf("placed on (-want,+got):\n%s", diff)
	}
	for _, c := range got.Status.Clusters {
		if c.LeavingSince != nil || c.RemovingSince != nil {
			t.Errorf("%s leaves (%+v) after its score expired", c.Cluster, c)
		}
	}
}
