package safety

import (
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/vmclaim"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

// TestRolloutAndMovesOneChangeAtATime: a FleetVM on two clusters rolls
// out a change one cluster at a time while its copies are moved. One
// change at a time reaches a copy:
//
//   - a copy still waiting for the revision moves with the revision it
//     runs: the new copy on the third cluster carries revision 1 while
//     the first cluster soaks on revision 2, and takes revision 2 in its
//     turn after the move;
//   - a move of the copy that is soaking on the new revision waits,
//     Pending and saying so, until that cluster's step ended, then moves
//     it.
//
// Each move ends Succeeded, and the rollout too, with revision 2 on
// both copies: the moved copy soaks again on its new cluster, as any new
// copy does.
func TestRolloutAndMovesOneChangeAtATime(t *testing.T) {
	const ns = "rollout-move"
	// The soak is shorter than the agents' score validity (20 s): the
	// move that waits for it chooses its target from valid scores once
	// the clock passed it.
	const soak = 15 * time.Second
	build := func(memory string) *fleetv1alpha1.FleetVirtualMachine {
		return utiltesting.MakeFleetVM(ns, "web").Clusters(2).VM(1, memory).ContainerDisk("quay.io/containerdisks/fedora:41").
			Rollout(clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.Progressive, Progressive: &clusterv1alpha1.RolloutProgressive{
				MaxConcurrency: intstr.FromInt32(1),
				RolloutConfig:  clusterv1alpha1.RolloutConfig{MinSuccessTime: metav1.Duration{Duration: soak}},
			}}).Obj()
	}
	fvm := build("1Gi")
	vm := vmclaim.Identity(fvm)
	createLimited(t, fvm, 3)
	key := client.ObjectKeyFromObject(fvm)
	on := firstRevisionSoaked(t, key, 2, soak)
	third := otherSpoke(on...)
	scoresCurrent(t)

	// Revision 2 reaches the first cluster; the second waits its turn.
	cur := &fleetv1alpha1.FleetVirtualMachine{}
	if err := fleet.Hub.Client.Get(t.Context(), key, cur); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.Template = build("2Gi").Spec.Template
	if err := fleet.Hub.Client.Patch(t.Context(), cur, patch); err != nil {
		t.Fatal(err)
	}
	waitRevisions(t, vm, on, map[string]string{on[0]: "2", on[1]: "1"})
	waitFVM(t, key, on[0]+" soaking revision 2", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		r := rolloutOf(f, on[0])
		return r != nil && r.Revision == 2 && r.State == "Soaking" && r.ReadySince != nil
	})

	// The waiting copy moves with revision 1.
	waiting := newMove(ns, "waiting-copy", "web", on[1], third)
	if err := fleet.Hub.Client.Create(t.Context(), waiting); err != nil {
		t.Fatal(err)
	}
	m := waitMove(t, client.ObjectKeyFromObject(waiting), "ended", ended)
	if m.Status.Phase != fleetv1alpha1.MoveSucceeded {
		t.Fatalf("the move of the waiting copy ended %s: %s", m.Status.Phase, m.Status.Message)
	}
	now := []string{on[0], third}
	waitRevisions(t, vm, now, map[string]string{on[0]: "2", third: "1"})
	f := waitFVM(t, key, "running on "+on[0]+" and "+third, runningOn(now...))
	if r := rolloutOf(f, third); r == nil || r.Revision != 1 || r.State != "ToApply" {
		t.Errorf("%s's part of the rollout is %+v, want revision 1 ToApply (it waits its turn)", third, r)
	}

	// The soaking copy's move waits for its step to end.
	soaking := newMove(ns, "soaking-copy", "web", on[0], "")
	if err := fleet.Hub.Client.Create(t.Context(), soaking); err != nil {
		t.Fatal(err)
	}
	waitMove(t, client.ObjectKeyFromObject(soaking), "pending on the rollout", func(m *fleetv1alpha1.FleetVirtualMachineMove) bool {
		return m.Status.Phase == fleetv1alpha1.MovePending && strings.Contains(m.Status.Message, "rollout's step on cluster "+on[0])
	})
	settle(t, key)
	if got := spokeRevisions(t, vm, now); got[on[0]] != "2" || got[third] != "1" {
		t.Fatalf("while the move waits: revisions %v, want 2 on %s and 1 on %s", got, on[0], third)
	}

	// The soak ends: the move goes, and the third cluster takes revision 2.
	scoresCurrent(t)
	clock.Step(soak + time.Second)
	settle(t, key)
	m = waitMove(t, client.ObjectKeyFromObject(soaking), "ended", ended)
	if m.Status.Phase != fleetv1alpha1.MoveSucceeded {
		t.Fatalf("the move of the soaking copy ended %s: %s", m.Status.Phase, m.Status.Message)
	}
	// The moved copy is new on its cluster, and the third cluster took
	// revision 2 as the soak ended: both soak on it from when the hub
	// first saw them ready.
	final := []string{m.Status.To, third}
	waitFVM(t, key, "both copies soaking revision 2", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		for _, c := range final {
			if r := rolloutOf(f, c); r != nil && (r.Revision != 2 || r.State != "Soaking" || r.ReadySince == nil) {
				return false
			}
		}
		return running(2)(f) && slices.Equal(names(f), slices.Sorted(slices.Values(final)))
	})
	clock.Step(soak + time.Second)
	settle(t, key)
	f = succeededAfterSoak(t, key, "2", soak)
	waitRevisions(t, vm, final, map[string]string{m.Status.To: "2", third: "2"})
	if got := names(f); len(got) != 2 {
		t.Errorf("the VM runs on %v after both moves, want two clusters", got)
	}
}
