package fleetvirtualmachine

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/capacity"
	"github.com/fleetvm/fleetvm/test/utiltesting"
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
			in := pickInput{Key: types.NamespacedName{Namespace: "ns", Name: "vm"}, Desired: tc.desired, Candidates: tc.candidates, Placed: tc.placed,
				Load: func(c string) int { return load[c] }, Fits: fits}
			if tc.free != nil {
				in.Free = func(c string) int32 { return tc.free[c] }
			}
			if diff := cmp.Diff(tc.want, pickClusters(in)); diff != "" {
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
		got := pickClusters(pickInput{
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

// TestClusterLoad: a FleetVirtualMachine counts once per cluster it is
// on; moving or deleting it moves its count.
func TestClusterLoad(t *testing.T) {
	l := newClusterLoad()
	a, b := types.NamespacedName{Namespace: "x", Name: "a"}, types.NamespacedName{Namespace: "x", Name: "b"}
	l.set(a, []string{"c1", "c2"})
	l.set(b, []string{"c1"})
	l.set(a, []string{"c1", "c2"}) // seen again: no double count
	if l.of("c1") != 2 || l.of("c2") != 1 {
		t.Fatalf("c1 %d, c2 %d; want 2, 1", l.of("c1"), l.of("c2"))
	}
	l.set(a, []string{"c3"})
	l.set(b, nil)
	if l.of("c1") != 0 || l.of("c2") != 0 || l.of("c3") != 1 {
		t.Errorf("after moves: c1 %d, c2 %d, c3 %d; want 0, 0, 1", l.of("c1"), l.of("c2"), l.of("c3"))
	}
}

// TestCandidatePlacement: FleetVirtualMachines with the same intent, in
// any namespace, build the same candidate Placement; any difference in
// what the scheduler filters by gives another. It decides every cluster
// (no numberOfClusters) and admits by fit, without any cluster the VM runs
// on.
func TestCandidatePlacement(t *testing.T) {
	r := &Reconciler{Config: DefaultConfig()}
	sets := []string{"default"}
	base := func(ns, name string) *utiltesting.FleetVMWrapper {
		return utiltesting.MakeFleetVM(ns, name).Env("prod").Clusters(2).VM(2, "4Gi")
	}
	a := r.candidatePlacement(base("team-a", "x").Obj(), sets)
	same := map[string]*fleetv1alpha1.FleetVirtualMachine{
		"colliding key": base("team", "a-x").Obj(),
		"another count": base("other", "y").Clusters(5).Obj(),
		"prioritizer": func() *fleetv1alpha1.FleetVirtualMachine {
			f := base("other", "z").Obj()
			f.Spec.Placement.Prioritizer = fleetv1alpha1.PrioritizerFreeCapacity
			return f
		}(),
	}
	for what, fvm := range same {
		if got := r.candidatePlacement(fvm, sets); got.Name != a.Name {
			t.Errorf("%s: candidate Placement %s, want %s", what, got.Name, a.Name)
		}
	}
	other := map[string]*clusterv1beta1.Placement{
		"environment": r.candidatePlacement(base("team-a", "x").Env("dev").Obj(), sets),
		"shape":       r.candidatePlacement(base("team-a", "x").VM(4, "4Gi").Obj(), sets),
		"sets":        r.candidatePlacement(base("team-a", "x").Obj(), []string{"default", "edge"}),
	}
	for what, p := range other {
		if p.Name == a.Name {
			t.Errorf("another %s shares candidate Placement %s", what, a.Name)
		}
	}
	if a.Spec.NumberOfClusters != nil {
		t.Errorf("numberOfClusters %d: a candidate Placement decides every cluster", *a.Spec.NumberOfClusters)
	}
	if !isCandidatePlacement(a) || len(a.Name) > maxNameLength {
		t.Errorf("candidate Placement %s (labels %v) not recognised, or longer than %d", a.Name, a.Labels, maxNameLength)
	}
	cel := a.Spec.Predicates[0].RequiredClusterSelector.CelSelector.CelExpressions
	if len(cel) != 1 || !slices.Equal(cel, []string{fitExpression(mustShape(t, base("team-a", "x").Obj()))}) {
		t.Errorf("CEL predicates %q, want the fit alone", cel)
	}
	if withToken := withReschedule(a, "abcd"); withToken.Name != a.Name || withToken.Annotations[rescheduleAnnotation] != "abcd" || a.Annotations != nil {
		t.Errorf("with a reschedule token: %s %v (the original: %v)", withToken.Name, withToken.Annotations, a.Annotations)
	}
}

func mustShape(t *testing.T, fvm *fleetv1alpha1.FleetVirtualMachine) capacity.Shape {
	t.Helper()
	s, ok := capacity.ShapeOf(fvm)
	if !ok {
		t.Fatalf("%s has no shape", fvm.Name)
	}
	return s
}
