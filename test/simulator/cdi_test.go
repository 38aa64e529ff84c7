package simulator_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetvm/fleetvm/test/agenttest"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/simulator"
)

// goldenImage is what a ManifestWork delivers to a spoke for a disk image:
// a standalone DataVolume importing the image and a DataSource naming it.
func goldenImage(ns, name, url string) (*cdiv1beta1.DataVolume, *cdiv1beta1.DataSource) {
	dv := &cdiv1beta1.DataVolume{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: cdiv1beta1.DataVolumeSpec{
			Source: &cdiv1beta1.DataVolumeSource{HTTP: &cdiv1beta1.DataVolumeSourceHTTP{URL: url}},
			Storage: &cdiv1beta1.StorageSpec{Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("20Gi")},
			}},
		},
	}
	ds := &cdiv1beta1.DataSource{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: cdiv1beta1.DataSourceSpec{Source: cdiv1beta1.DataSourceSource{
			PVC: &cdiv1beta1.DataVolumeSourcePVC{Namespace: ns, Name: name},
		}},
	}
	return dv, ds
}

func dataSourceReady(t *testing.T, c client.Client, ns, name string) *cdiv1beta1.DataSourceCondition {
	t.Helper()
	ds := &cdiv1beta1.DataSource{}
	if err := get(t.Context(), c, ns, name, ds); err != nil {
		return nil
	}
	for i := range ds.Status.Conditions {
		if ds.Status.Conditions[i].Type == cdiv1beta1.DataSourceReady {
			return &ds.Status.Conditions[i]
		}
	}
	return nil
}

func waitDataSource(t *testing.T, c client.Client, ns, name string, status corev1.ConditionStatus, reason string) {
	t.Helper()
	var cond *cdiv1beta1.DataSourceCondition
	err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		cond = dataSourceReady(t, c, ns, name)
		return cond != nil && cond.Status == status && cond.Reason == reason, nil
	})
	if err != nil {
		t.Fatalf("DataSource %s/%s: want Ready=%s (%s), have %+v: %v", ns, name, status, reason, cond, err)
	}
}

// TestGoldenImage: a VM cloning a golden image waits while the image's
// DataSource is NotFound, then its DataVolume arrives on its own (as a
// ManifestWork creates it), is imported into a Bound claim, the DataSource
// turns Ready and the VM starts. Deleting the DataVolume deletes its claim
// and the DataSource is NotFound again.
func TestGoldenImage(t *testing.T) {
	ctx := t.Context()
	vmNS, images := fresh("golden-vm"), fresh("golden-images")
	s := spoke(t, vmNS)
	if err := s.EnsureNamespace(ctx, images); err != nil {
		t.Fatal(err)
	}
	// Exactly the VM's size, and gone after the test: VMs of other tests
	// never land on it (nodes are cluster-wide, picked first fit by name).
	createNode(t, s, fleetenv.Node{Name: "n-" + vmNS, CPU: "1", Memory: "1Gi"})
	dv, ds := goldenImage(images, "rhel9", "https://images.example/rhel9.qcow2")
	if err := s.Client.Create(ctx, ds); err != nil {
		t.Fatal(err)
	}
	waitDataSource(t, s.Client, images, "rhel9", corev1.ConditionFalse, simulator.ReasonDataSourceNotFound)

	vm := agenttest.VM(vmNS, "app", agenttest.DataVolumeTemplate("app-root", agenttest.DataSourceRef(images, "rhel9")))
	if err := s.Client.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	if err := fleetenv.Eventually(ctx, wait, func() (bool, error) {
		root := &cdiv1beta1.DataVolume{}
		if err := get(ctx, s.Client, vmNS, "app-root", root); err != nil {
			return false, err
		}
		return root.Status.Phase == cdiv1beta1.Pending, nil
	}); err != nil {
		t.Fatalf("VM's DataVolume not Pending while the image is missing: %v", err)
	}
	waitPrintable(t, s.Client, vmNS, "app", kubevirtv1.VirtualMachineStatusProvisioning, false)

	if err := s.Client.Create(ctx, dv); err != nil {
		t.Fatal(err)
	}
	waitDataSource(t, s.Client, images, "rhel9", corev1.ConditionTrue, simulator.ReasonDataSourceReady)
	if err := get(ctx, s.Client, images, "rhel9", dv); err != nil {
		t.Fatal(err)
	}
	if dv.Status.Phase != cdiv1beta1.Succeeded || dv.Status.Progress != "100.0%" {
		t.Errorf("image DataVolume = %s %s, want Succeeded 100.0%% once its DataSource is Ready", dv.Status.Phase, dv.Status.Progress)
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := get(ctx, s.Client, images, "rhel9", pvc); err != nil {
		t.Fatalf("claim of the imported image: %v", err)
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Status.Capacity.Storage().String() != "20Gi" || !metav1.IsControlledBy(pvc, dv) {
		t.Errorf("claim = %s %s owner %v, want Bound 20Gi owned by the DataVolume", pvc.Status.Phase, pvc.Status.Capacity.Storage(), metav1.GetControllerOf(pvc))
	}
	waitPrintable(t, s.Client, vmNS, "app", kubevirtv1.VirtualMachineStatusRunning, true)

	if err := s.Client.Delete(ctx, dv); err != nil {
		t.Fatal(err)
	}
	if err := fleetenv.Eventually(ctx, wait, func() (bool, error) {
		err := get(ctx, s.Client, images, "rhel9", &corev1.PersistentVolumeClaim{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}); err != nil {
		t.Errorf("claim not deleted with its DataVolume: %v", err)
	}
	waitDataSource(t, s.Client, images, "rhel9", corev1.ConditionFalse, simulator.ReasonDataSourceNotFound)
}

// TestFailedImport: an import from a host under simulator.FailingHostSuffix
// fails with a message naming the host, leaves no claim, and its
// DataSource is not Ready, with the DataVolume's phase as the reason.
func TestFailedImport(t *testing.T) {
	ctx := t.Context()
	ns := fresh("failing-images")
	s := spoke(t, ns)
	dv, ds := goldenImage(ns, "broken", "https://mirror"+simulator.FailingHostSuffix+"/broken.qcow2")
	for _, o := range []client.Object{dv, ds} {
		if err := s.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitDataSource(t, s.Client, ns, "broken", corev1.ConditionFalse, string(cdiv1beta1.Failed))
	if err := get(ctx, s.Client, ns, "broken", dv); err != nil {
		t.Fatal(err)
	}
	var ready *cdiv1beta1.DataVolumeCondition
	for i := range dv.Status.Conditions {
		if dv.Status.Conditions[i].Type == cdiv1beta1.DataVolumeReady {
			ready = &dv.Status.Conditions[i]
		}
	}
	if dv.Status.Phase != cdiv1beta1.Failed || ready == nil || ready.Status != corev1.ConditionFalse ||
		!strings.Contains(ready.Message, "mirror"+simulator.FailingHostSuffix) {
		t.Errorf("DataVolume = phase %s, Ready %+v; want Failed, Ready=False naming the host", dv.Status.Phase, ready)
	}
	if err := get(ctx, s.Client, ns, "broken", &corev1.PersistentVolumeClaim{}); !apierrors.IsNotFound(err) {
		t.Errorf("claim of a failed import: %v, want NotFound", err)
	}
}
