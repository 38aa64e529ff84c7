package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// MoveSpec: a FleetVirtualMachine running on one cluster is moved to
// another with a FleetVirtualMachineMove (Restart: the VM boots from
// cloud-init only). Real Argo CD delivers the VM to the target held
// stopped, stops it on the source, starts it on the target, and deletes
// the source's copy; the move succeeds, the VM runs on the target only,
// as the fleet asks (Always, not the hold), and Argo CD is synced there.
func MoveSpec(t *testing.T, in LifecycleInput) {
	in.Clusters = 1
	fvm := newTestFVM(in, "moved", fleetv1alpha1.DeletionPolicyDelete)
	decided := applyAndWaitRunning(t, in, fvm)
	from := decided[0]

	m, phases := moveAndWait(t, in, fvm, from)
	to := m.Status.To
	if to == from {
		t.Fatalf("moved from %s to itself", from)
	}
	waitFVM(t, in, fvm, "running on "+to+" only", func(f *fleetv1alpha1.FleetVirtualMachine) error {
		if err := readyWithReason(f, fleetv1alpha1.ReasonAllReady); err != nil {
			return err
		}
		if len(f.Status.Clusters) != 1 || f.Status.Clusters[0].Cluster != to {
			return fmt.Errorf("clusters %s, want %s only", describeClusters(f), to)
		}
		if c := f.Status.Clusters[0]; c.SyncStatus != string(argov1alpha1.SyncStatusCodeSynced) || c.Health != "Healthy" {
			return fmt.Errorf("on %s Argo CD is %s/%s", to, c.SyncStatus, c.Health)
		}
		return nil
	})
	waitSpoke(t, in, from, "the source's copy deleted", func(ctx context.Context, c client.Client) error {
		if vm := getVM(t, in, from, fvm); vm != nil {
			return fmt.Errorf("VM still there (deleting: %v)", vm.DeletionTimestamp != nil)
		}
		return nil
	})
	vm := getVM(t, in, to, fvm)
	if vm == nil || vm.Spec.RunStrategy == nil || *vm.Spec.RunStrategy != kubevirtv1.RunStrategyAlways {
		t.Fatalf("VM on %s: %+v, want runStrategy Always", to, vm)
	}
	if !slices.Contains(phases, fleetv1alpha1.MoveSucceeded) || m.Status.Method != fleetv1alpha1.MoveMethodRestart {
		t.Fatalf("moved by %q; phases %v", m.Status.Method, phases)
	}
	s := m.Status
	t.Logf("Restart move %s -> %s with Argo CD: %s in all, hand-over (stopped on %s until ready on %s) %s; phases seen %v",
		from, to, s.CompletionTime.Sub(s.StartTime.Time).Round(time.Second), from, to,
		s.ReadyTime.Sub(s.StoppedTime.Time).Round(time.Second), phases)
	deleteFVM(t, in, fvm)
}

// moveAndWait moves the FleetVirtualMachine's copy off from, the target
// left for FleetVM to pick, and waits until the move succeeded; it
// returns the move and the phases seen.
func moveAndWait(t *testing.T, in LifecycleInput, fvm *fleetv1alpha1.FleetVirtualMachine, from string) (*fleetv1alpha1.FleetVirtualMachineMove, []fleetv1alpha1.MovePhase) {
	t.Helper()
	m := &fleetv1alpha1.FleetVirtualMachineMove{
		ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace, Name: fvm.Name + "-off-" + from},
		Spec:       fleetv1alpha1.FleetVirtualMachineMoveSpec{FleetVirtualMachine: fvm.Name, From: from},
	}
	if err := in.Hub.Create(t.Context(), m); err != nil {
		t.Fatalf("create move: %v", err)
	}
	var phases []fleetv1alpha1.MovePhase
	err := poll(t.Context(), in.Timeout, func(ctx context.Context) error {
		if err := in.Hub.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			return err
		}
		if p := m.Status.Phase; len(phases) == 0 || phases[len(phases)-1] != p {
			phases = append(phases, p)
		}
		if !m.Status.Phase.Terminal() {
			return fmt.Errorf("%s: %s", m.Status.Phase, m.Status.Message)
		}
		return nil
	})
	if err != nil || m.Status.Phase != fleetv1alpha1.MoveSucceeded {
		t.Fatalf("move ended %s (%v): %s; phases seen %v", m.Status.Phase, err, m.Status.Message, phases)
	}
	if m.Status.To == from {
		t.Fatalf("moved from %s to itself", from)
	}
	return m, phases
}
