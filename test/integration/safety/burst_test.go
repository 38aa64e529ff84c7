package safety

import (
	"fmt"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/capacity"
	"github.com/fleetvm/fleetvm/pkg/vmclaim"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

// burstFleetVMs is how many FleetVirtualMachines the burst test creates
// at once: more than the one cluster of the stale decision has room for.
const burstFleetVMs = 30

// TestBurstOntoAStaleDecision: a burst of FleetVirtualMachines whose
// shared candidate decision holds one cluster, made while the others were
// full; they have room now, and OCM does not decide again on a score its
// CEL predicate reads. The cluster in the decision has room for 15 more;
// its agent's score, until it scores again, says 15 fit whatever the hub
// placed there since. The hub counts the copies still arriving against
// that score, each from the moment a reconcile picks it, and those that
// ran until the score shows them: at most 15 go there (fewer when a copy
// is counted both in a new score and as arriving), the others wait, the
// hub asks the scheduler to look again, and they run on the clusters that
// have room. None is left Unschedulable where the score had no room left
// for it, and no VM runs twice (the invariant checker watches every
// spoke).
func TestBurstOntoAStaleDecision(t *testing.T) {
	const ns = "burst"
	ctx := t.Context()
	open := spokes[0]
	// One CPU and 1.5 GiB: a shape of this test's own, so its candidate
	// Placement is scheduled here, not by a test before.
	shape := capacity.Shape{CPU: resource.MustParse("1"), Memory: resource.MustParse("1536Mi")}
	var release []func()
	for _, c := range spokes[1:] {
		release = append(release, fill(t, c, nodeCPU))
	}
	if err := fleet.Hub.Tenant(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeAll(t, ns) })
	mark := vms.mark()
	var checks []func() []string
	t.Cleanup(func() {
		for _, check := range checks {
			for _, v := range check() {
				t.Errorf("invariant: %s", v)
			}
		}
	})
	create := func(name string) *fleetv1alpha1.FleetVirtualMachine {
		t.Helper()
		fvm := utiltesting.MakeFleetVM(ns, name).Clusters(1).VM(1, "1536Mi").
			DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
		checks = append(checks, vms.limit(vmclaim.Identity(fvm), 1))
		if err := fleet.Hub.Client.Create(ctx, fvm); err != nil {
			t.Fatal(err)
		}
		return fvm
	}

	// The first one is placed while only one cluster has room: the
	// candidate decision holds that one.
	first := create("first")
	f := waitFVM(t, client.ObjectKeyFromObject(first), "running", running(1))
	if got := names(f); !slices.Equal(got, []string{open}) {
		t.Fatalf("%s runs on %v, though only %s has room", first.Name, got, open)
	}
	if d := decided(t, f.Status.Placement); !slices.Equal(d, []string{open}) {
		t.Fatalf("the decision of %s holds %v, want only %s", f.Status.Placement.Name, d, open)
	}
	for _, r := range release {
		r()
	}
	for _, c := range spokes[1:] {
		waitScore(t, c, shape, "showed room for the burst", func(n int32, _ bool) bool { return n >= burstFleetVMs/2 })
	}
	// The open cluster's node has 16 CPUs: room for 15 more, fewer than
	// the burst.
	var room int32
	waitScore(t, open, shape, "showed room for fewer than the burst", func(n int32, _ bool) bool {
		room = n
		return n >= 1 && n < burstFleetVMs
	})

	var burst []*fleetv1alpha1.FleetVirtualMachine
	for i := range burstFleetVMs {
		burst = append(burst, create(fmt.Sprintf("vm-%02d", i)))
	}
	on := map[string]int{}
	for _, fvm := range burst {
		f := waitFVM(t, client.ObjectKeyFromObject(fvm), "running", running(1))
		on[names(f)[0]]++
	}
	t.Logf("the burst of %d runs on %v", burstFleetVMs, on)
	if on[open] > int(room) {
		t.Errorf("%d of the burst placed on %s, which had room for %d", on[open], open, room)
	}
	expectDeletions(t, mark, ns)
}
