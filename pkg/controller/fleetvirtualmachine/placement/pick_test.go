package placement

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/capacity"
)

// TestPickClusters: the clusters a FleetVirtualMachine is on stay in its
// pick whatever the candidates say; new ones are the candidates it fits on
// with the fewest FleetVirtualMachines, up to what it asks for.
func TestPickClusters(t *testing.T) {
	load := map[string]int{"a": 3, "b": 1, "c": 0, "d": 2, "full": 0}
	fits := func(c string) bool { return c != "full" }
	cases := map[string]struct {
		desired    *int32
		candidates []string
		placed     []string
		free       map[string]int32
		want       []string
	}{
		"least loaded first":                        {desired: ptr.To[int32](2), candidates: []string{"a", "b", "c", "d"}, want: []string{"b", "c"}},
		"a cluster it no longer fits on is skipped": {desired: ptr.To[int32](2), candidates: []string{"a", "full", "c"}, want: []string{"a", "c"}},
		"placed clusters stay, even not candidates": {desired: ptr.To[int32](2), candidates: []string{"c", "d"}, placed: []string{"a"}, want: []string{"a", "c"}},
		"enough placed: nothing new":                {desired: ptr.To[int32](1), candidates: []string{"c"}, placed: []string{"a"}, want: []string{"a"}},
		"more placed than asked: all kept":          {desired: ptr.To[int32](1), candidates: []string{"c"}, placed: []string{"a", "b"}, want: []string{"a", "b"}},
		"every cluster: every candidate that fits":  {candidates: []string{"a", "b", "full"}, placed: []string{"d"}, want: []string{"a", "b", "d"}},
		"free capacity first":                       {desired: ptr.To[int32](1), candidates: []string{"a", "c"}, free: map[string]int32{"a": 50, "c": 10}, want: []string{"a"}},
		"no candidates":                             {desired: ptr.To[int32](2), placed: []string{"b"}, want: []string{"b"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := PickInput{Key: types.NamespacedName{Namespace: "ns", Name: "vm"}, Desired: tc.desired, Candidates: tc.candidates, Placed: tc.placed,
				Load: func(c string) int { return load[c] }, Fits: fits}
			if tc.free != nil {
				in.Free = func(c string) int32 { return tc.free[c] }
			}
			if diff := cmp.Diff(tc.want, Pick(in)); diff != "" {
				t.Errorf("pick (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestPickClustersSpreadsTies: FleetVirtualMachines created together see
// the same loads; their picks spread over the equally loaded clusters
// instead of all landing on the first.
func TestPickClustersSpreadsTies(t *testing.T) {
	var candidates []string
	for i := range 10 {
		candidates = append(candidates, fmt.Sprintf("prod-%02d", i))
	}
	count := map[string]int{}
	for i := range 100 {
		got := Pick(PickInput{
			Key: types.NamespacedName{Namespace: "burst", Name: fmt.Sprintf("vm-%03d", i)}, Desired: ptr.To[int32](1), Candidates: candidates,
			Load: func(string) int { return 0 }, Fits: func(string) bool { return true },
		})
		count[got[0]]++
	}
	if len(count) < 8 {
		t.Errorf("100 picks over 10 equal clusters landed on %d of them: %v", len(count), count)
	}
	for c, n := range count {
		if n > 25 {
			t.Errorf("cluster %s picked %d times of 100", c, n)
		}
	}
}

// TestFreeCapacity: the FreeCapacity prioritizer ranks a cluster by its
// free CPU plus free memory, a cluster without a valid score by 0; the
// others leave Free unset, so Pick ranks by load.
func TestFreeCapacity(t *testing.T) {
	scores := map[string]map[string]int32{
		"roomy":   {capacity.ScoreCPUFree: 30, capacity.ScoreMemoryFree: 25, "other": 99},
		"cpuOnly": {capacity.ScoreCPUFree: 40},
	}
	score := func(c string) map[string]int32 { return scores[c] }
	free := FreeCapacity(fleetv1alpha1.PrioritizerFreeCapacity, score)
	if free == nil {
		t.Fatal("FreeCapacity: Free is nil")
	}
	got := map[string]int32{}
	for _, c := range []string{"roomy", "cpuOnly", "unscored"} {
		got[c] = free(c)
	}
	if diff := cmp.Diff(map[string]int32{"roomy": 55, "cpuOnly": 40, "unscored": 0}, got); diff != "" {
		t.Errorf("free (-want,+got):\n%s", diff)
	}
	for _, p := range []fleetv1alpha1.Prioritizer{"", fleetv1alpha1.PrioritizerBalance, fleetv1alpha1.PrioritizerSteady} {
		if FreeCapacity(p, score) != nil {
			t.Errorf("prioritizer %q: Free is set, want nil (load only)", p)
		}
	}
}

// TestClusterLoad: a FleetVirtualMachine counts once per cluster it is
// on; moving or deleting it moves its count.
func TestClusterLoad(t *testing.T) {
	l := NewClusterLoad()
	a, b := types.NamespacedName{Namespace: "x", Name: "a"}, types.NamespacedName{Namespace: "x", Name: "b"}
	l.Set(a, []string{"c1", "c2"})
	l.Set(b, []string{"c1"})
	l.Set(a, []string{"c1", "c2"}) // seen again: no double count
	if l.Of("c1") != 2 || l.Of("c2") != 1 {
		t.Fatalf("c1 %d, c2 %d; want 2, 1", l.Of("c1"), l.Of("c2"))
	}
	l.Set(a, []string{"c3"})
	l.Set(b, nil)
	if l.Of("c1") != 0 || l.Of("c2") != 0 || l.Of("c3") != 1 {
		t.Errorf("after moves: c1 %d, c2 %d, c3 %d; want 0, 0, 1", l.Of("c1"), l.Of("c2"), l.Of("c3"))
	}
}
