package fleetvirtualmachine

import (
	"slices"
	"testing"

	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/capacity"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/delivery"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

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
		"shape": r.candidatePlacement(func() *fleetv1alpha1.FleetVirtualMachine {
			f := base("team-a", "x").VM(4, "4Gi").Obj()
			f.Generation++ // as the API server counts a spec change
			return f
		}(), sets),
		"sets": r.candidatePlacement(base("team-a", "x").Obj(), []string{"default", "edge"}),
	}
	for what, p := range other {
		if p.Name == a.Name {
			t.Errorf("another %s shares candidate Placement %s", what, a.Name)
		}
	}
	if a.Spec.NumberOfClusters != nil {
		t.Errorf("numberOfClusters %d: a candidate Placement decides every cluster", *a.Spec.NumberOfClusters)
	}
	if !isCandidatePlacement(a) || len(a.Name) > delivery.MaxNameLength {
		t.Errorf("candidate Placement %s (labels %v) not recognised, or longer than %d", a.Name, a.Labels, delivery.MaxNameLength)
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
