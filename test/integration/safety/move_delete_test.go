package safety

import (
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/vmclaim"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

// TestMoveDeletedWhilePreparingRollsBack: a Restart move is deleted while
// it prepares the VM on a target whose KubeVirt is slow to answer (its
// agent and simulator stopped). The move's finalizer holds it: it rolls
// back, the target's copy is removed, and only then does the object go.
// When the target's KubeVirt answers again there is nothing left for it
// to start: the VM runs on the source only, and never had two servers.
// (Without the finalizer both copies stayed, each with the fleet's run
// strategy, and the target started the VM beside the source.)
func TestMoveDeletedWhilePreparingRollsBack(t *testing.T) {
	const ns = "move-deleted"
	srv, fvm, from := runningToMove(t, ns)
	key := client.ObjectKeyFromObject(fvm)
	to := otherSpoke(from)
	vm := vmclaim.Identity(fvm)
	mark := vms.mark()

	scoredOn(t, to, fvm)
	startAgent := stopAgent(t, to)
	m := newMove(ns, "deleted", "web", from, to)
	m.Spec.Timeout = &metav1.Duration{Duration: 10 * time.Minute}
	if err := fleet.Hub.Client.Create(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	mkey := client.ObjectKeyFromObject(m)
	got := waitMove(t, mkey, "preparing on "+to, inPhase(fleetv1alpha1.MovePreparing))
	if !controllerutil.ContainsFinalizer(got, fleetv1alpha1.MoveFinalizer) {
		t.Fatalf("a started move without the finalizer %s: %v", fleetv1alpha1.MoveFinalizer, got.Finalizers)
	}
	if err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) { return vmOn(t, to, vm), nil }); err != nil {
		t.Fatalf("the VM was never delivered to %s: %v", to, err)
	}

	// Every watch of the move sees its last status before it goes.
	var last fleetv1alpha1.FleetVirtualMachineMoveStatus
	if err := fleet.Hub.Client.Delete(t.Context(), got); err != nil {
		t.Fatal(err)
	}
	err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		cur := &fleetv1alpha1.FleetVirtualMachineMove{}
		if err := fleet.Hub.Client.Get(t.Context(), mkey, cur); err != nil {
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		}
		last = cur.Status
		return false, nil
	})
	if err != nil {
		t.Fatalf("the deleted move never went (last %s: %s): %v", last.Phase, last.Message, err)
	}
	// The rollback removes the target's copy, whose KubeVirt is still
	// not answering.
	if err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) { return !vmOn(t, to, vm), nil }); err != nil {
		t.Fatalf("the deleted move's copy on %s was never removed (last %s: %s): %v", to, last.Phase, last.Message, err)
	}

	// The target answers again: nothing starts there.
	startAgent()
	settle(t, key)
	waitFVM(t, key, "running on "+from+" only", runningOn(from))
	if vmOn(t, to, vm) {
		t.Errorf("the VM is on %s again", to)
	}
	if srv.wentAway(vm.Name, from) {
		t.Errorf("the VM stopped on %s, though the move never got past preparing", from)
	}
	expectDeletions(t, mark, ns, deletion{Cluster: to, VM: vm})
	srv.check(t)
}

// TestOrphanedMidMoveCreatedAgain: a FleetVirtualMachine with
// deletionPolicy Orphan is deleted while a Cold move copies its disks (the
// target's KubeVirt slow to answer), and created again. The move ends
// with its FleetVirtualMachine; the clusters keep what the move left: the
// source stopped, the target delivered stopped, importing. The new
// FleetVirtualMachine adopts both, but never starts the target that the
// lost move held stopped: the VM runs on the source (the one copy whose
// disks are whole), and never on two servers. (Adopted with the fleet's
// run strategy, the target started beside the source.)
func TestOrphanedMidMoveCreatedAgain(t *testing.T) {
	const ns = "move-orphaned"
	srv := watchServers(t, ns)
	build := func(p fleetv1alpha1.DeletionPolicy) *fleetv1alpha1.FleetVirtualMachine {
		return utiltesting.MakeFleetVM(ns, "db").Clusters(1).Template(ownData("db")).DeletionPolicy(p).Obj()
	}
	fvm := build(fleetv1alpha1.DeletionPolicyOrphan)
	createLimited(t, fvm, 2)
	key := client.ObjectKeyFromObject(fvm)
	vm := vmclaim.Identity(fvm)
	from := names(waitFVM(t, key, "running on one cluster", running(1)))[0]
	scoresCurrent(t)
	to := otherSpoke(from)

	scoredOn(t, to, fvm)
	startAgent := stopAgent(t, to)
	m := newMove(ns, "cold", "db", from, to)
	if err := fleet.Hub.Client.Create(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	mkey := client.ObjectKeyFromObject(m)
	waitMove(t, mkey, "copying to "+to, func(m *fleetv1alpha1.FleetVirtualMachineMove) bool {
		return m.Status.Phase == fleetv1alpha1.MoveCopying && strings.HasPrefix(m.Status.Message, "importing")
	})
	if err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) { return vmOn(t, to, vm), nil }); err != nil {
		t.Fatalf("the VM was never delivered to %s: %v", to, err)
	}

	if err := fleet.Hub.Client.Delete(t.Context(), fvm); err != nil {
		t.Fatal(err)
	}
	if err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		err := fleet.Hub.Client.Get(t.Context(), key, &fleetv1alpha1.FleetVirtualMachine{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}); err != nil {
		t.Fatalf("%s not gone: %v", key, err)
	}
	if got := waitMove(t, mkey, "ended", ended); got.Status.Phase != fleetv1alpha1.MoveFailed {
		t.Fatalf("the move of a deleted FleetVirtualMachine ended %s: %s", got.Status.Phase, got.Status.Message)
	}
	if !vmOn(t, from, vm) || !vmOn(t, to, vm) {
		t.Fatalf("deleted with Orphan mid-move: VM on %s %v, on %s %v; want both kept", from, vmOn(t, from, vm), to, vmOn(t, to, vm))
	}

	// Created again, then the target's KubeVirt answers.
	createLimited(t, build(fleetv1alpha1.DeletionPolicyDelete), 2)
	waitFVM(t, key, "running on "+from, runningOn(from))
	startAgent()
	got := waitFVM(t, key, "adopting the copy on "+to+" held", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		for _, c := range f.Status.Clusters {
			if c.Cluster == to && strings.Contains(c.Message, "a move that no longer exists held it") {
				return true
			}
		}
		return false
	})
	settle(t, key)
	spokeVM := &kubevirtv1.VirtualMachine{}
	if err := fleet.Spoke(to).Client.Get(t.Context(), vm, spokeVM); err != nil {
		t.Fatal(err)
	}
	if rs, _ := spokeVM.RunStrategy(); rs != kubevirtv1.RunStrategyHalted {
		t.Errorf("the adopted copy on %s has runStrategy %s, want Halted (status: %+v)", to, rs, got.Status.Clusters)
	}
	srv.check(t)
}

// stopAgent stops the cluster's agent and its simulator (its KubeVirt
// stops answering) and returns what starts them again; the test's
// cleanup starts them if the test did not.
func stopAgent(t *testing.T, cluster string) (start func()) {
	t.Helper()
	fleetVM.StopAgent(cluster)
	stopped := true
	start = func() {
		t.Helper()
		if !stopped {
			return
		}
		stopped = false
		if err := fleetVM.StartAgent(cluster); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if stopped {
			stopped = false
			if err := fleetVM.StartAgent(cluster); err != nil {
				t.Error(err)
			}
		}
	})
	return start
}
