package simulator

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func storageClass(name string, mode storagev1.VolumeBindingMode, created time.Time, annotations map[string]string) *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: name, Annotations: annotations, CreationTimestamp: metav1.NewTime(created)},
		Provisioner:       "csi.example.io",
		VolumeBindingMode: ptr.To(mode),
	}
}

var (
	t0        = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	isDefault = map[string]string{AnnDefaultStorageClass: "true"}
)

// newBindingSimulator is a simulator on a fake spoke that also serves
// VMs and pods (which may consume a claim).
func newBindingSimulator(t *testing.T, objs ...client.Object) (*Simulator, client.Client, *clocktesting.FakePassiveClock) {
	t.Helper()
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(cdiv1beta1.AddToScheme(s))
	utilruntime.Must(kubevirtv1.AddToScheme(s))
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithStatusSubresource(&cdiv1beta1.DataVolume{}, &corev1.PersistentVolumeClaim{}, &corev1.Pod{}).Build()
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	return New(Options{Client: c, Clock: clk, StepDelay: stepDelay}), c, clk
}

// TestWaitsForFirstConsumer: which StorageClass a DataVolume's claim gets
// (the one it names, else the cluster's default) and whether it binds at
// first consumer; CDI's immediate-binding annotation overrides the mode.
func TestWaitsForFirstConsumer(t *testing.T) {
	wffc := storageClass("local", storagev1.VolumeBindingWaitForFirstConsumer, t0, nil)
	immediate := storageClass("ceph", storagev1.VolumeBindingImmediate, t0, nil)
	defaultWFFC := storageClass("gp3", storagev1.VolumeBindingWaitForFirstConsumer, t0, isDefault)
	defaultImmediate := storageClass("standard", storagev1.VolumeBindingImmediate, t0, isDefault)
	newerDefaultWFFC := storageClass("gp3-newer", storagev1.VolumeBindingWaitForFirstConsumer, t0.Add(time.Hour), isDefault)
	betaDefaultWFFC := storageClass("old-gp2", storagev1.VolumeBindingWaitForFirstConsumer, t0, map[string]string{annBetaDefaultStorageClass: "true"})
	notDefault := storageClass("local-2", storagev1.VolumeBindingWaitForFirstConsumer, t0, map[string]string{AnnDefaultStorageClass: "false"})

	storage := func(class *string) cdiv1beta1.DataVolumeSpec {
		return cdiv1beta1.DataVolumeSpec{Storage: &cdiv1beta1.StorageSpec{StorageClassName: class}}
	}
	pvc := func(class *string) cdiv1beta1.DataVolumeSpec {
		return cdiv1beta1.DataVolumeSpec{PVC: &corev1.PersistentVolumeClaimSpec{StorageClassName: class}}
	}
	cases := map[string]struct {
		classes     []client.Object
		spec        cdiv1beta1.DataVolumeSpec
		annotations map[string]string
		want        bool
	}{
		"named WaitForFirstConsumer":               {classes: []client.Object{wffc, defaultImmediate}, spec: storage(ptr.To("local")), want: true},
		"named WaitForFirstConsumer, spec.pvc":     {classes: []client.Object{wffc}, spec: pvc(ptr.To("local")), want: true},
		"named Immediate over a WFFC default":      {classes: []client.Object{immediate, defaultWFFC}, spec: storage(ptr.To("ceph")), want: false},
		"named class that does not exist":          {classes: []client.Object{defaultWFFC}, spec: storage(ptr.To("nowhere")), want: false},
		"default WaitForFirstConsumer":             {classes: []client.Object{defaultWFFC, immediate}, spec: storage(nil), want: true},
		"default by the beta annotation":           {classes: []client.Object{betaDefaultWFFC}, spec: storage(nil), want: true},
		"default Immediate":                        {classes: []client.Object{defaultImmediate, wffc}, spec: storage(nil), want: false},
		"no default":                               {classes: []client.Object{wffc, notDefault}, spec: storage(nil), want: false},
		"no class at all":                          {spec: storage(nil), want: false},
		"two defaults: the newest":                 {classes: []client.Object{defaultImmediate, newerDefaultWFFC}, spec: storage(nil), want: true},
		"storage class '' is the default":          {classes: []client.Object{defaultWFFC}, spec: storage(ptr.To("")), want: true},
		"pvc class '' asks for none":               {classes: []client.Object{defaultWFFC}, spec: pvc(ptr.To("")), want: false},
		"immediate binding requested":              {classes: []client.Object{wffc}, spec: storage(ptr.To("local")), annotations: map[string]string{AnnImmediateBinding: "true"}, want: false},
		"immediate binding requested, any value":   {classes: []client.Object{defaultWFFC}, spec: storage(nil), annotations: map[string]string{AnnImmediateBinding: ""}, want: false},
		"another CDI annotation binds at consumer": {classes: []client.Object{wffc}, spec: storage(ptr.To("local")), annotations: map[string]string{"cdi.kubevirt.io/storage.usePopulator": "true"}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sim, _, _ := newBindingSimulator(t, tc.classes...)
			dv := &cdiv1beta1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "root", Annotations: tc.annotations}, Spec: tc.spec}
			got, err := sim.waitsForFirstConsumer(t.Context(), dv)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("waitsForFirstConsumer = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestWaitForFirstConsumerSteps drives a standalone DataVolume on
// WaitForFirstConsumer storage: it waits with a Pending claim and nothing
// imported, however long, until a pod mounts its claim; then the claim
// binds and the import runs to Succeeded. With CDI's immediate-binding
// annotation it imports at once, as on Immediate storage.
func TestWaitForFirstConsumerSteps(t *testing.T) {
	imported := []string{"ImportScheduled N/A", "ImportInProgress 0.0%", "ImportInProgress 25.0%", "ImportInProgress 50.0%",
		"ImportInProgress 75.0%", "ImportInProgress 100.0%", "Succeeded 100.0%"}
	cases := map[string]struct {
		annotations map[string]string
		// before are the phases before a consumer exists, after those
		// once it does.
		before, after []string
		// claimBefore is the claim's phase while no consumer exists.
		claimBefore string
	}{
		"waits for its first consumer": {
			before: []string{"WaitForFirstConsumer N/A"}, after: imported, claimBefore: "Pending",
		},
		"immediate binding requested": {
			annotations: map[string]string{AnnImmediateBinding: "true"}, before: imported, claimBefore: "Bound",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			dv := standaloneDV("golden", &cdiv1beta1.DataVolumeSource{HTTP: &cdiv1beta1.DataVolumeSourceHTTP{URL: "https://images.example/rhel9.qcow2"}})
			dv.Annotations = tc.annotations
			sim, c, clk := newBindingSimulator(t, dv, storageClass("gp3", storagev1.VolumeBindingWaitForFirstConsumer, t0, isDefault))
			req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(dv)}
			// run reconciles, a step delay apart, until the phase stops
			// moving, and returns the phases it went through.
			run := func() []string {
				var got []string
				for range 20 {
					before := phaseOf(t, c, dv)
					if _, err := (dataVolumeReconciler{sim}).Reconcile(ctx, req); err != nil {
						t.Fatal(err)
					}
					clk.SetTime(clk.Now().Add(stepDelay))
					after := phaseOf(t, c, dv)
					if after == before {
						return got
					}
					got = append(got, after)
				}
				t.Fatal("never came to rest")
				return nil
			}
			if diff := cmp.Diff(tc.before, run()); diff != "" {
				t.Errorf("phases without a consumer (-want,+got):\n%s", diff)
			}
			claim := func() (phase, volume, data string) {
				pvc := &corev1.PersistentVolumeClaim{}
				if err := c.Get(ctx, req.NamespacedName, pvc); err != nil {
					return "none", "", ""
				}
				return string(pvc.Status.Phase), pvc.Spec.VolumeName, pvc.Annotations[DataAnnotation]
			}
			if phase, volume, _ := claim(); phase != tc.claimBefore || (phase == "Pending" && volume != "") {
				t.Errorf("claim without a consumer: %s on volume %q, want %s (on no volume while Pending)", phase, volume, tc.claimBefore)
			}

			// A VM that uses the DataVolume but is halted consumes nothing.
			halted := &kubevirtv1.VirtualMachine{
				ObjectMeta: metav1.ObjectMeta{Namespace: dv.Namespace, Name: "user"},
				Spec: kubevirtv1.VirtualMachineSpec{
					RunStrategy: ptr.To(kubevirtv1.RunStrategyHalted),
					Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
						Volumes: []kubevirtv1.Volume{{Name: "root", VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: dv.Name}}}},
					}},
				},
			}
			if err := c.Create(ctx, halted); err != nil {
				t.Fatal(err)
			}
			if got := run(); len(got) != 0 {
				t.Errorf("phases with a halted VM over it = %v, want none", got)
			}

			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Namespace: dv.Namespace, Name: "consumer"},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "c", Image: "registry.invalid/busybox"}},
					Volumes: []corev1.Volume{{Name: "disk", VolumeSource: corev1.VolumeSource{
						PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: dv.Name},
					}}},
				},
			}
			if err := c.Create(ctx, pod); err != nil {
				t.Fatal(err)
			}
			if got := sim.dataVolumesConsumedBy(ctx, pod); len(tc.after) > 0 && len(got) != 1 {
				t.Errorf("a pod mounting the claim maps to %v, want the DataVolume", got)
			}
			if diff := cmp.Diff(tc.after, run()); diff != "" {
				t.Errorf("phases once consumed (-want,+got):\n%s", diff)
			}
			if phase, volume, _ := claim(); phase != "Bound" || volume == "" {
				t.Errorf("claim once imported: %s on volume %q, want Bound on a volume", phase, volume)
			}
		})
	}
}

// TestWaitingClaimGetsTheImportedData: a claim created Pending and bound
// at first consumer ends with the data imported into it, as a new claim
// would.
func TestWaitingClaimGetsTheImportedData(t *testing.T) {
	dv := standaloneDV("golden", nil)
	dv.OwnerReferences = nil
	bound := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: dv.Namespace, Name: dv.Name, OwnerReferences: []metav1.OwnerReference{
			*metav1.NewControllerRef(dv, cdiv1beta1.SchemeGroupVersion.WithKind("DataVolume")),
		}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
	sim, c, _ := newBindingSimulator(t, dv, bound)
	if err := sim.ensureClaim(context.Background(), dv, "disk-of-web"); err != nil {
		t.Fatal(err)
	}
	got := &corev1.PersistentVolumeClaim{}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(bound), got); err != nil {
		t.Fatal(err)
	}
	if got.Annotations[DataAnnotation] != "disk-of-web" {
		t.Errorf("data = %q, want disk-of-web", got.Annotations[DataAnnotation])
	}
}
