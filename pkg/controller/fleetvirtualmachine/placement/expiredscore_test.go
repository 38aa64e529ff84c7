package placement

import (
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"

	"github.com/fleetvm/fleetvm/pkg/capacity"
)

// TestExpiredScoreAttractsNoCopy: the hub's pick and decision read the
// agents' scores as observeCandidates does (capacity.ValidScoreValues at
// the hub's now). A cluster whose score expired is in OCM's candidate
// decision (its CEL scores() ignores validUntil) but gets no new copy; a
// cluster the VM is placed on keeps its copy whatever its score says,
// expired or not.
func TestExpiredScoreAttractsNoCopy(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	const fit = "fit-1000m-1024mi"
	score := func(fits int32, validFor time.Duration) *clusterv1alpha1.AddOnPlacementScore {
		until := metav1.NewTime(now.Add(validFor))
		return &clusterv1alpha1.AddOnPlacementScore{Status: clusterv1alpha1.AddOnPlacementScoreStatus{
			Scores:     []clusterv1alpha1.AddOnPlacementScoreItem{{Name: fit, Value: fits}, {Name: capacity.ScoreCPUFree, Value: fits}},
			ValidUntil: &until,
		}}
	}
	cases := map[string]struct {
		desired *int32
		scores  map[string]*clusterv1alpha1.AddOnPlacementScore
		placed  []string
		// wantPlaced: every cluster placed afterwards; wantAdded: the new ones.
		wantPlaced, wantAdded []string
	}{
		"every cluster: the expired one gets none": {
			scores:     map[string]*clusterv1alpha1.AddOnPlacementScore{"a": score(4, time.Hour), "b": score(4, -time.Second)},
			wantPlaced: []string{"a"}, wantAdded: []string{"a"},
		},
		"expired at this very instant: none": {
			desired:    ptr.To[int32](2),
			scores:     map[string]*clusterv1alpha1.AddOnPlacementScore{"a": score(4, time.Hour), "b": score(4, 0)},
			wantPlaced: []string{"a"}, wantAdded: []string{"a"},
		},
		"the only candidate expired: nothing placed": {
			desired: ptr.To[int32](1),
			scores:  map[string]*clusterv1alpha1.AddOnPlacementScore{"b": score(90, -time.Hour)},
		},
		"a second copy goes to the valid cluster, the emptier one expired": {
			desired: ptr.To[int32](2), placed: []string{"a"},
			scores:     map[string]*clusterv1alpha1.AddOnPlacementScore{"a": score(1, time.Hour), "b": score(90, -time.Minute), "c": score(2, time.Minute)},
			wantPlaced: []string{"a", "c"}, wantAdded: []string{"c"},
		},
		"placed on a cluster whose score expired: kept, nothing new": {
			desired: ptr.To[int32](1), placed: []string{"b"},
			scores:     map[string]*clusterv1alpha1.AddOnPlacementScore{"a": score(4, time.Hour), "b": score(4, -time.Hour)},
			wantPlaced: []string{"b"},
		},
		"every copy on expired scores: all kept": {
			placed:     []string{"a", "b"},
			scores:     map[string]*clusterv1alpha1.AddOnPlacementScore{"a": score(0, -time.Hour), "b": score(4, -time.Hour)},
			wantPlaced: []string{"a", "b"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			candidates := slices.Sorted(maps.Keys(tc.scores))
			values := func(c string) map[string]int32 { return capacity.ValidScoreValues(tc.scores[c], now) }
			picked := Pick(PickInput{
				Key: types.NamespacedName{Namespace: "ns", Name: "vm"}, Desired: tc.desired, Candidates: candidates, Placed: tc.placed,
				Load: func(string) int { return 0 },
				Fits: func(c string) bool { return values(c)[fit] >= 1 },
				Free: func(c string) int32 { return values(c)[capacity.ScoreCPUFree] },
			})
			in := Input{Now: now, GracePeriod: time.Minute, Desired: tc.desired, Scheduled: true, Decision: picked,
				Clusters: map[string]Presence{}, Intent: map[string]Intent{}}
			for _, c := range candidates {
				in.Intent[c] = Intent{Kind: IntentIncluded}
			}
			for _, c := range tc.placed {
				in.Clusters[c] = Presence{Recorded: true, App: AppLive}
			}
			out := Decide(in)
			var added []string
			for c, p := range out.Clusters {
				if p.Added {
					added = append(added, c)
				}
			}
			slices.Sort(added)
			if diff := cmp.Diff(tc.wantPlaced, out.InState(Placed)); diff != "" {
				t.Errorf("placed (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantAdded, added); diff != "" {
				t.Errorf("added (-want,+got):\n%s", diff)
			}
			if len(out.Remove)+len(out.Release)+len(out.Dropped) > 0 || len(out.InState(Leaving)) > 0 {
				t.Errorf("a copy leaves because of a score: remove %v release %v dropped %v leaving %v",
					out.Remove, out.Release, out.Dropped, out.InState(Leaving))
			}
		})
	}
}
