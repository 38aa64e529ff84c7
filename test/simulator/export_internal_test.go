package simulator

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	exportv1beta1 "kubevirt.io/api/export/v1beta1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestParseExportURL(t *testing.T) {
	cases := map[string]struct {
		url  string
		want exportRef
		ok   bool
	}{
		"internal": {
			url:  "https://virt-export-db.apps.svc/volumes/db-root/disk.img",
			want: exportRef{host: "virt-export-db.apps.svc", namespace: "apps", service: "virt-export-db"}, ok: true,
		},
		"external": {
			url:  "https://proxy.example/api/export.kubevirt.io/v1beta1/namespaces/apps/virtualmachineexports/db/volumes/db-root/disk.img.gz",
			want: exportRef{external: true, host: "proxy.example", namespace: "apps", name: "db"}, ok: true,
		},
		"external manifests":  {url: "https://proxy.example/api/export.kubevirt.io/v1beta1/namespaces/apps/virtualmachineexports/db/external/manifests/all"},
		"another service":     {url: "https://images.apps.svc/volumes/db-root/disk.img"},
		"a plain image":       {url: "https://images.example/rhel9.qcow2"},
		"internal, no volume": {url: "https://virt-export-db.apps.svc/internal/manifests/all"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := parseExportURL(tc.url)
			if ok != tc.ok || got != tc.want {
				t.Errorf("parseExportURL(%s) = %+v, %v; want %+v, %v", tc.url, got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestExportSteps drives an export of a stopped VM through the reconciler
// with a fake clock: the exporter starts (Pending, PodPending), is ready
// only after the step delay (Ready with links), and the export is deleted
// once its TTL has passed.
func TestExportSteps(t *testing.T) {
	ctx := t.Context()
	s := cdiScheme(t)
	utilruntime.Must(kubevirtv1.AddToScheme(s))
	utilruntime.Must(exportv1beta1.AddToScheme(s))
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "db"},
		Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: ptr.To(kubevirtv1.RunStrategyHalted), Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
			Spec: kubevirtv1.VirtualMachineInstanceSpec{Volumes: []kubevirtv1.Volume{
				{Name: "root", VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "db-root"}}},
				{Name: "cloudinit", VolumeSource: kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserData: "#cloud-config"}}},
			}},
		}},
	}
	dv := &cdiv1beta1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "db-root"}, Status: cdiv1beta1.DataVolumeStatus{Phase: cdiv1beta1.Succeeded}}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "db-root"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}}
	ex := &exportv1beta1.VirtualMachineExport{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "db", UID: "export-uid", CreationTimestamp: metav1.NewTime(created)},
		Spec: exportv1beta1.VirtualMachineExportSpec{
			Source:      corev1.TypedLocalObjectReference{APIGroup: ptr.To("kubevirt.io"), Kind: "VirtualMachine", Name: "db"},
			TTLDuration: &metav1.Duration{Duration: time.Hour},
		},
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(vm, dv, pvc, ex).
		WithStatusSubresource(&exportv1beta1.VirtualMachineExport{}).Build()
	clk := clocktesting.NewFakePassiveClock(created)
	r := exportReconciler{New(Options{Client: c, Clock: clk, StepDelay: stepDelay})}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ex)}
	state := func() string {
		t.Helper()
		got := &exportv1beta1.VirtualMachineExport{}
		if err := c.Get(ctx, req.NamespacedName, got); err != nil {
			if apierrors.IsNotFound(err) {
				return "gone"
			}
			t.Fatal(err)
		}
		if got.Status == nil {
			return ""
		}
		ready := findExportCondition(got.Status.Conditions, exportv1beta1.ConditionReady)
		return string(got.Status.Phase) + " " + ready.Reason
	}
	step := func() {
		t.Helper()
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	step()
	got = append(got, state())
	clk.SetTime(created.Add(stepDelay - time.Second))
	step()
	got = append(got, state())
	clk.SetTime(created.Add(stepDelay))
	step()
	got = append(got, state())
	clk.SetTime(created.Add(time.Hour))
	step()
	got = append(got, state())
	want := []string{"Pending PodPending", "Pending PodPending", "Ready PodReady", "gone"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("export states at 0s, step delay - 1s, step delay, TTL (-want,+got):\n%s", diff)
	}
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "export-token-db"}, secret); err != nil {
		t.Errorf("token Secret: %v", err)
	}
}
