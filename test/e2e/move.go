package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/test/simulator"
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
	waitRunsOnlyOn(t, in, fvm, to)
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
	// The move stays for its TTL; the spec's own goes with it, so the
	// spec runs again on the same fleet.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), in.Timeout)
		defer cancel()
		if err := in.Hub.Delete(ctx, m); client.IgnoreNotFound(err) != nil {
			t.Errorf("delete move %s: %v", m.Name, err)
		}
	})
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

// ColdMoveSpec: a FleetVirtualMachine whose VM keeps a data disk of its
// own (a blank DataVolume) is moved Cold. The data written on the source's
// disk arrives on the target's, imported from the source's
// VirtualMachineExport through the dataVolumeTemplates real Argo CD
// renders with the fleetvm-vm chart; the VM runs on the target only,
// synced, with its own definition again once the move ended.
func ColdMoveSpec(t *testing.T, in LifecycleInput) {
	dataMoveSpec(t, in, fleetv1alpha1.MoveMethodCold)
}

// LiveMoveSpec: the same VM, the prod clusters labelled as offering
// decentralized live migration, moves Live: real Argo CD renders the
// target as the receiver (WaitAsReceiver, a blank disk) and the source
// held Manual, the two clusters' migrations run, the data arrives, and the
// VM runs on the target only, synced, with its own definition again.
func LiveMoveSpec(t *testing.T, in LifecycleInput) {
	for c := range in.Spokes {
		mc := &clusterv1.ManagedCluster{}
		if err := in.Hub.Get(t.Context(), client.ObjectKey{Name: c}, mc); err != nil {
			t.Fatal(err)
		}
		before := mc.DeepCopy()
		mc.Labels[fleetv1alpha1.LabelLiveMigration] = "true"
		if err := in.Hub.Patch(t.Context(), mc, client.MergeFrom(before)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			mc := &clusterv1.ManagedCluster{}
			if err := in.Hub.Get(context.Background(), client.ObjectKey{Name: c}, mc); err != nil {
				t.Error(err)
				return
			}
			before := mc.DeepCopy()
			delete(mc.Labels, fleetv1alpha1.LabelLiveMigration)
			if err := in.Hub.Patch(context.Background(), mc, client.MergeFrom(before)); err != nil {
				t.Error(err)
			}
		})
	}
	dataMoveSpec(t, in, fleetv1alpha1.MoveMethodLive)
}

// dataMoveSpec moves a VM with a data disk of its own, expecting method.
func dataMoveSpec(t *testing.T, in LifecycleInput, method fleetv1alpha1.MoveMethod) {
	in.Clusters = 1
	fvm := newTestFVM(in, strings.ToLower(string(method)), fleetv1alpha1.DeletionPolicyDelete)
	fvm.Spec.Template.Raw = []byte(fmt.Sprintf(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"labels":{"app":%q}},
"spec":{"dataVolumeTemplates":[{"metadata":{"name":"%s-data"},"spec":{"source":{"blank":{}},"storage":{"resources":{"requests":{"storage":"1Gi"}}}}}],
"template":{"spec":{"domain":{"cpu":{"cores":1},"memory":{"guest":"1Gi"},
"devices":{"disks":[{"name":"cloudinitdisk","disk":{"bus":"virtio"}},{"name":"data","disk":{"bus":"virtio"}}]}},
"volumes":[{"name":"cloudinitdisk","cloudInitNoCloud":{"userData":%q}},{"name":"data","dataVolume":{"name":"%s-data"}}]}}}}`,
		fvm.Name, fvm.Name, cloudInit, fvm.Name))
	from := applyAndWaitRunning(t, in, fvm)[0]
	claim := client.ObjectKey{Namespace: in.Namespace, Name: fvm.Name + "-data"}
	data := "written on " + from
	waitSpoke(t, in, from, "the data written on the VM's disk", func(ctx context.Context, c client.Client) error {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := c.Get(ctx, claim, pvc); err != nil {
			return err
		}
		before := pvc.DeepCopy()
		pvc.Annotations = map[string]string{simulator.DataAnnotation: data}
		return c.Patch(ctx, pvc, client.MergeFrom(before))
	})

	m, phases := moveAndWait(t, in, fvm, from)
	to := m.Status.To
	if m.Status.Method != method || !slices.Contains(phases, fleetv1alpha1.MoveSucceeded) {
		t.Fatalf("moved by %q; phases %v", m.Status.Method, phases)
	}
	waitSpoke(t, in, to, "the data carried", func(ctx context.Context, c client.Client) error {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := c.Get(ctx, claim, pvc); err != nil {
			return err
		}
		if got := pvc.Annotations[simulator.DataAnnotation]; got != data {
			return stopped{fmt.Errorf("the disk holds %q, want %q", got, data)}
		}
		return nil
	})
	waitRunsOnlyOn(t, in, fvm, to)
	waitSpoke(t, in, to, "the VM's own definition again", func(ctx context.Context, c client.Client) error {
		vm := getVM(t, in, to, fvm)
		if vm == nil || len(vm.Spec.DataVolumeTemplates) != 1 || vm.Spec.DataVolumeTemplates[0].Spec.Source == nil ||
			vm.Spec.DataVolumeTemplates[0].Spec.Source.Blank == nil {
			return fmt.Errorf("dataVolumeTemplates %+v", vm)
		}
		return nil
	})
	waitSpoke(t, in, from, "the source's copy deleted", func(ctx context.Context, c client.Client) error {
		if vm := getVM(t, in, from, fvm); vm != nil {
			return fmt.Errorf("VM still there")
		}
		return nil
	})
	s := m.Status
	t.Logf("%s move %s -> %s with Argo CD: %s in all, hand-over (stopped on %s until ready on %s) %s; phases seen %v",
		method, from, to, s.CompletionTime.Sub(s.StartTime.Time).Round(time.Second), from, to,
		s.ReadyTime.Sub(s.StoppedTime.Time).Round(time.Second), phases)
	deleteFVM(t, in, fvm)
}

// waitRunsOnlyOn waits until the FleetVirtualMachine is Ready on cluster
// to only, synced and healthy there.
func waitRunsOnlyOn(t *testing.T, in LifecycleInput, fvm *fleetv1alpha1.FleetVirtualMachine, to string) {
	t.Helper()
	waitFVM(t, in, fvm, "running on "+to+" only, synced", func(f *fleetv1alpha1.FleetVirtualMachine) error {
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
}
