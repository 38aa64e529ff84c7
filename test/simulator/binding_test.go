package simulator_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetvm/fleetvm/test/agenttest"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/simulator"
)

// onStorage is a DataVolume spec importing url onto the named
// StorageClass.
func onStorage(class, url string) cdiv1beta1.DataVolumeSpec {
	spec := agenttest.HTTPSource(url)
	spec.Storage = &cdiv1beta1.StorageSpec{StorageClassName: ptr.To(class)}
	return spec
}

func claimOf(t *testing.T, c client.Client, ns, name string) *corev1.PersistentVolumeClaim {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{}
	if err := get(t.Context(), c, ns, name, pvc); err != nil {
		t.Fatalf("claim %s/%s: %v", ns, name, err)
	}
	return pvc
}

// TestWaitForFirstConsumer: on WaitForFirstConsumer storage a halted VM's
// DataVolume waits with a Pending claim and nothing imported, and KubeVirt
// shows the VM Stopped, while a DataVolume asking for immediate binding,
// created beside it, imports to the end; once the VM starts, it is the
// first consumer: the claim binds, the import runs and the VM runs.
func TestWaitForFirstConsumer(t *testing.T) {
	ctx := t.Context()
	ns := fresh("wffc")
	s := spoke(t, ns)
	createNode(t, s, fleetenv.Node{Name: "n-" + ns, CPU: "8", Memory: "16Gi"})
	class := "local-" + ns
	sc, err := s.CreateStorageClass(ctx, fleetenv.StorageClass{Name: class, Mode: storagev1.VolumeBindingWaitForFirstConsumer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Client.Delete(context.Background(), sc); client.IgnoreNotFound(err) != nil {
			t.Error(err)
		}
	})

	cold := agenttest.VM(ns, "cold", agenttest.RunStrategy(kubevirtv1.RunStrategyHalted),
		agenttest.DataVolumeTemplate("cold-root", onStorage(class, "https://images.example/rhel9.qcow2")))
	eager := agenttest.VM(ns, "eager", agenttest.RunStrategy(kubevirtv1.RunStrategyHalted),
		agenttest.DataVolumeTemplate("eager-root", onStorage(class, "https://images.example/rhel9.qcow2")))
	eager.Spec.DataVolumeTemplates[0].Annotations = map[string]string{simulator.AnnImmediateBinding: "true"}
	for _, vm := range []*kubevirtv1.VirtualMachine{cold, eager} {
		if err := s.Client.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
	}

	// The one asking for immediate binding imports although nothing uses it.
	waitDataVolume(t, s.Client, ns, "eager-root", cdiv1beta1.Succeeded)
	if pvc := claimOf(t, s.Client, ns, "eager-root"); pvc.Status.Phase != corev1.ClaimBound {
		t.Errorf("claim of the immediate DataVolume: %s, want Bound", pvc.Status.Phase)
	}
	waitPrintable(t, s.Client, ns, "eager", kubevirtv1.VirtualMachineStatusStopped, false)

	// The other one, created with it, is still waiting: nothing imported.
	dv := waitDataVolume(t, s.Client, ns, "cold-root", cdiv1beta1.WaitForFirstConsumer)
	if dv.Status.Progress != "N/A" {
		t.Errorf("progress of a DataVolume waiting for its consumer = %s, want N/A", dv.Status.Progress)
	}
	if pvc := claimOf(t, s.Client, ns, "cold-root"); pvc.Status.Phase != corev1.ClaimPending || pvc.Spec.VolumeName != "" {
		t.Errorf("claim waiting for its consumer: %s on volume %q, want Pending on none", pvc.Status.Phase, pvc.Spec.VolumeName)
	}
	waitPrintable(t, s.Client, ns, "cold", kubevirtv1.VirtualMachineStatusStopped, false)
	if err := get(ctx, s.Client, ns, "cold-root", dv); err != nil || dv.Status.Phase != cdiv1beta1.WaitForFirstConsumer {
		t.Errorf("DataVolume of the Stopped VM: %s (%v), want still WaitForFirstConsumer", dv.Status.Phase, err)
	}

	// Started: its instance is the first consumer.
	vm, err := vmStatus(ctx, s.Client, ns, "cold")
	if err != nil {
		t.Fatal(err)
	}
	vm.Spec.RunStrategy = ptr.To(kubevirtv1.RunStrategyAlways)
	if err := s.Client.Update(ctx, vm); err != nil {
		t.Fatal(err)
	}
	waitPrintable(t, s.Client, ns, "cold", kubevirtv1.VirtualMachineStatusRunning, true)
	if err := get(ctx, s.Client, ns, "cold-root", dv); err != nil || dv.Status.Phase != cdiv1beta1.Succeeded {
		t.Errorf("DataVolume of the running VM: %s (%v), want Succeeded", dv.Status.Phase, err)
	}
	if pvc := claimOf(t, s.Client, ns, "cold-root"); pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
		t.Errorf("claim once consumed: %s on volume %q, want Bound on a volume", pvc.Status.Phase, pvc.Spec.VolumeName)
	}
}

// TestDefaultStorageClassWaits: a DataVolume that names no StorageClass
// gets the cluster's default; when the default waits for its first
// consumer, so does the DataVolume. The default is cluster-wide: the test
// removes it as soon as its DataVolume waits (the tests of this package
// run one at a time, so no other test creates DataVolumes meanwhile).
func TestDefaultStorageClassWaits(t *testing.T) {
	ctx := t.Context()
	ns := fresh("wffc-default")
	s := cluster(t, "target", ns)
	sc, err := s.CreateStorageClass(ctx, fleetenv.StorageClass{Name: "default-" + ns, Mode: storagev1.VolumeBindingWaitForFirstConsumer, Default: true})
	if err != nil {
		t.Fatal(err)
	}
	removeDefault := func() {
		if err := s.Client.Delete(context.Background(), sc); client.IgnoreNotFound(err) != nil {
			t.Error(err)
		}
	}
	t.Cleanup(removeDefault)
	dv := &cdiv1beta1.DataVolume{}
	dv.Namespace, dv.Name = ns, "unnamed-class"
	dv.Spec = agenttest.HTTPSource("https://images.example/rhel9.qcow2")
	dv.Spec.Storage = &cdiv1beta1.StorageSpec{}
	if err := s.Client.Create(ctx, dv); err != nil {
		t.Fatal(err)
	}
	waitDataVolume(t, s.Client, ns, "unnamed-class", cdiv1beta1.WaitForFirstConsumer)
	removeDefault()

	// A pod mounting the claim is its first consumer.
	pod := &corev1.Pod{}
	pod.Namespace, pod.Name = ns, "consumer"
	pod.Spec.Containers = []corev1.Container{{Name: "c", Image: "registry.invalid/busybox"}}
	pod.Spec.Volumes = []corev1.Volume{{Name: "disk", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "unnamed-class"},
	}}}
	if err := s.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	waitDataVolume(t, s.Client, ns, "unnamed-class", cdiv1beta1.Succeeded)
}
