package vmstatus

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	agentcapacity "github.com/fleetvm/fleetvm/pkg/agent/capacity"
	"github.com/fleetvm/fleetvm/pkg/write"
	"github.com/fleetvm/fleetvm/test/agenttest"
)

// spokeWithoutMultus is a fake spoke holding objs, on which
// NetworkAttachmentDefinitions are not served.
func spokeWithoutMultus(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	return fake.NewClientBuilder().WithScheme(agenttest.Scheme()).WithObjects(objs...).
		WithInterceptorFuncs(interceptor.Funcs{
			List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				if _, ok := list.(*metav1.PartialObjectMetadataList); ok {
					return &meta.NoKindMatchError{GroupKind: agentcapacity.NetworkAttachmentDefinitionGVK.GroupKind()}
				}
				return c.List(ctx, list, opts...)
			},
		}).Build()
}

func templateDV(vm *kubevirtv1.VirtualMachine, name string, phase cdiv1beta1.DataVolumePhase) *cdiv1beta1.DataVolume {
	return &cdiv1beta1.DataVolume{
		ObjectMeta: metav1.ObjectMeta{Namespace: vm.Namespace, Name: name, OwnerReferences: []metav1.OwnerReference{
			*metav1.NewControllerRef(vm, kubevirtv1.VirtualMachineGroupVersionKind),
		}},
		Status: cdiv1beta1.DataVolumeStatus{Phase: phase},
	}
}

// TestReconcileReportsHoldAndDataVolumes: the report carries the VM's hold
// and its DataVolumes' state as the spoke holds them; it is rewritten when
// either changes (a DataVolume's phase moves, a new hold arrives) and
// only then.
func TestReconcileReportsHoldAndDataVolumes(t *testing.T) {
	ctx := context.Background()
	vm := agenttest.VM("team", "web", agenttest.FleetVM("team", "web"), agenttest.RunStrategy(kubevirtv1.RunStrategyHalted),
		agenttest.DataVolumeTemplate("web-root", agenttest.HTTPSource("https://images.example/rhel9.qcow2")))
	vm.UID = "vm-uid"
	vm.Annotations = map[string]string{fleetv1alpha1.AnnotationHold: "move-uid.Copying"}
	dv := templateDV(vm, "web-root", cdiv1beta1.WaitForFirstConsumer)
	spoke := spokeWithoutMultus(t, vm, dv)
	writes := 0
	hub := fake.NewClientBuilder().WithScheme(agenttest.Scheme()).Build()
	r := &Reconciler{Spoke: spoke, Hub: agenttest.CountWrites(hub, func(agenttest.Write) { writes++ }), Namespace: "east"}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team", Name: "web"}}

	step := func(wantWrites int, wantHold string, wantDVs fleetv1alpha1.DataVolumesState) {
		t.Helper()
		if _, err := r.Reconcile(ctx, req); err != nil {
			t.Fatal(err)
		}
		report := &fleetv1alpha1.VMReport{}
		if err := hub.Get(ctx, client.ObjectKey{Namespace: "east", Name: "team.web"}, report); err != nil {
			t.Fatal(err)
		}
		if len(report.Spec.VMs) != 1 {
			t.Fatalf("report VMs = %+v, want one", report.Spec.VMs)
		}
		got := report.Spec.VMs[0]
		type seen struct {
			Writes      int
			Hold        string
			DataVolumes fleetv1alpha1.DataVolumesState
		}
		if diff := cmp.Diff(seen{wantWrites, wantHold, wantDVs}, seen{writes, got.Hold, got.DataVolumes}); diff != "" {
			t.Errorf("report (-want,+got):\n%s", diff)
		}
	}

	step(1, "move-uid.Copying", fleetv1alpha1.DataVolumesNotReady)
	step(1, "move-uid.Copying", fleetv1alpha1.DataVolumesNotReady) // nothing changed: no write

	dv.Status.Phase = cdiv1beta1.Succeeded
	if err := spoke.Update(ctx, dv); err != nil {
		t.Fatal(err)
	}
	step(2, "move-uid.Copying", fleetv1alpha1.DataVolumesReady)

	if err := spoke.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
		t.Fatal(err)
	}
	vm.Annotations[fleetv1alpha1.AnnotationHold] = "move-uid.Verifying"
	if err := spoke.Update(ctx, vm); err != nil {
		t.Fatal(err)
	}
	step(3, "move-uid.Verifying", fleetv1alpha1.DataVolumesReady)
	step(3, "move-uid.Verifying", fleetv1alpha1.DataVolumesReady)

	dv.Status.Phase = cdiv1beta1.Failed
	if err := spoke.Update(ctx, dv); err != nil {
		t.Fatal(err)
	}
	step(4, "move-uid.Verifying", fleetv1alpha1.DataVolumesFailed)
}

// TestReconcileWaitsForItsOwnWrite: a hub cache that has not yet seen the
// agent's last write of a report (it lags behind the API server) makes the
// agent wait for it, not send the same report again; once the cache shows
// the write, or the wait times out, the report is compared as usual.
func TestReconcileWaitsForItsOwnWrite(t *testing.T) {
	ctx := context.Background()
	vm := agenttest.VM("team", "web", agenttest.FleetVM("team", "web"), agenttest.RunStrategy(kubevirtv1.RunStrategyHalted))
	vm.Annotations = map[string]string{fleetv1alpha1.AnnotationHold: "move-uid.Copying"}
	spoke := spokeWithoutMultus(t, vm)
	key := client.ObjectKey{Namespace: "east", Name: "team.web"}
	// cached is the report as the lagging cache holds it; nil: not there.
	var cached *fleetv1alpha1.VMReport
	lagging := false
	server := fake.NewClientBuilder().WithScheme(agenttest.Scheme()).Build()
	hub := fake.NewClientBuilder().WithScheme(agenttest.Scheme()).WithInterceptorFuncs(interceptor.Funcs{
		Get: func(ctx context.Context, _ client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if lagging && k == key {
				if cached == nil {
					return apierrors.NewNotFound(fleetv1alpha1.GroupVersion.WithResource("vmreports").GroupResource(), k.Name)
				}
				cached.DeepCopyInto(obj.(*fleetv1alpha1.VMReport))
				return nil
			}
			return server.Get(ctx, k, obj, opts...)
		},
		Create: func(ctx context.Context, _ client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			return server.Create(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, _ client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			return server.Patch(ctx, obj, p, opts...)
		},
	}).Build()
	writes := 0
	now := time.Unix(1_800_000_000, 0)
	r := &Reconciler{Spoke: spoke, Hub: agenttest.CountWrites(hub, func(agenttest.Write) { writes++ }), Namespace: "east"}
	r.expect.Now = func() time.Time { return now }
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team", Name: "web"}}
	reconcileAndCount := func(wantWrites int, wantWait bool) {
		t.Helper()
		res, err := r.Reconcile(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if writes != wantWrites || (res.RequeueAfter > 0) != wantWait {
			t.Errorf("writes %d, requeue after %v; want %d writes, waiting %v", writes, res.RequeueAfter, wantWrites, wantWait)
		}
	}
	serverCopy := func() *fleetv1alpha1.VMReport {
		t.Helper()
		got := &fleetv1alpha1.VMReport{}
		if err := server.Get(ctx, key, got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	setHold := func(hold string) {
		t.Helper()
		if err := spoke.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
			t.Fatal(err)
		}
		vm.Annotations[fleetv1alpha1.AnnotationHold] = hold
		if err := spoke.Update(ctx, vm); err != nil {
			t.Fatal(err)
		}
	}

	// Created; the cache has not seen it: no second create.
	lagging = true
	reconcileAndCount(1, false)
	reconcileAndCount(1, true)
	// The cache shows the report: nothing to write, nothing to wait for.
	cached = serverCopy()
	reconcileAndCount(1, false)

	// The VM changes: the report is patched. The cache still holds the
	// copy before the patch: no second patch.
	setHold("move-uid.Verifying")
	reconcileAndCount(2, false)
	reconcileAndCount(2, true)
	cached = serverCopy()
	reconcileAndCount(2, false)

	// The cache never shows the write (a relist skipped it): past the
	// timeout the copy it holds is compared as it is.
	before := cached
	setHold("move-uid.Done")
	reconcileAndCount(3, false)
	cached = before
	reconcileAndCount(3, true)
	now = now.Add(write.ExpectationTimeout)
	reconcileAndCount(4, false)
	if got := serverCopy().Spec.VMs[0].Hold; got != "move-uid.Done" {
		t.Errorf("hold = %q, want move-uid.Done", got)
	}
}

// TestReconcileFailsOnUnreadableDataVolume: a DataVolume the cache cannot
// read is an error, never reported as missing.
func TestReconcileFailsOnUnreadableDataVolume(t *testing.T) {
	ctx := context.Background()
	vm := agenttest.VM("team", "web", agenttest.FleetVM("team", "web"),
		agenttest.DataVolumeTemplate("web-root", agenttest.HTTPSource("https://images.example/rhel9.qcow2")))
	spoke := fake.NewClientBuilder().WithScheme(agenttest.Scheme()).WithObjects(vm).
		WithInterceptorFuncs(interceptor.Funcs{
			List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				if _, ok := list.(*metav1.PartialObjectMetadataList); ok {
					return &meta.NoKindMatchError{GroupKind: agentcapacity.NetworkAttachmentDefinitionGVK.GroupKind()}
				}
				return c.List(ctx, list, opts...)
			},
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*cdiv1beta1.DataVolume); ok {
					return context.DeadlineExceeded
				}
				return c.Get(ctx, key, obj, opts...)
			},
		}).Build()
	hub := fake.NewClientBuilder().WithScheme(agenttest.Scheme()).Build()
	r := &Reconciler{Spoke: spoke, Hub: hub, Namespace: "east"}
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team", Name: "web"}}); err == nil {
		t.Fatal("Reconcile = nil error, want the DataVolume read's")
	}
	var reports fleetv1alpha1.VMReportList
	if err := hub.List(ctx, &reports); err != nil {
		t.Fatal(err)
	}
	if len(reports.Items) != 0 {
		t.Errorf("reports = %d, want none written from a failed read", len(reports.Items))
	}
}

// TestFleetVMsOfDataVolume: a DataVolume maps to the FleetVM of the VM
// that owns it, else of the VMs of its namespace whose templates name it.
func TestFleetVMsOfDataVolume(t *testing.T) {
	owner := agenttest.VM("team", "web", agenttest.FleetVM("team", "web"),
		agenttest.DataVolumeTemplate("web-root", agenttest.HTTPSource("https://images.example/rhel9.qcow2")))
	owner.UID = "web-uid"
	byTemplate := agenttest.VM("team", "db", agenttest.FleetVM("team", "db"),
		agenttest.DataVolumeTemplate("db-root", agenttest.HTTPSource("https://images.example/rhel9.qcow2")))
	elsewhere := agenttest.VM("other", "db", agenttest.FleetVM("other", "db"),
		agenttest.DataVolumeTemplate("db-root", agenttest.HTTPSource("https://images.example/rhel9.qcow2")))
	unmanaged := agenttest.VM("team", "raw",
		agenttest.DataVolumeTemplate("raw-root", agenttest.HTTPSource("https://images.example/rhel9.qcow2")))
	r := &Reconciler{Spoke: spokeWithoutMultus(t, owner, byTemplate, elsewhere, unmanaged), Namespace: "east"}
	req := func(ns, name string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
	}
	dv := func(ns, name string, owners ...metav1.OwnerReference) *cdiv1beta1.DataVolume {
		return &cdiv1beta1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: owners}}
	}
	cases := map[string]struct {
		dv   *cdiv1beta1.DataVolume
		want []reconcile.Request
	}{
		"owned by a VM":              {dv: dv("team", "web-root", *metav1.NewControllerRef(owner, kubevirtv1.VirtualMachineGroupVersionKind)), want: []reconcile.Request{req("team", "web")}},
		"orphan named by a template": {dv: dv("team", "db-root"), want: []reconcile.Request{req("team", "db")}},
		"named by no template":       {dv: dv("team", "golden")},
		"VM without FleetVM":         {dv: dv("team", "raw-root")},
		"owner VM gone":              {dv: dv("team", "gone-root", metav1.OwnerReference{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Name: "gone"})},
		"owned by something else, named by a template": {
			dv:   dv("team", "db-root", metav1.OwnerReference{APIVersion: "example.io/v1", Kind: "VirtualMachine", Name: "web"}),
			want: []reconcile.Request{req("team", "db")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, r.fleetVMsOfDataVolume(context.Background(), tc.dv)); diff != "" {
				t.Errorf("fleetVMsOfDataVolume (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestDataVolumeStateChanged: a phase change reaches the reconciler, a
// progress step does not.
func TestDataVolumeStateChanged(t *testing.T) {
	old := &cdiv1beta1.DataVolume{Status: cdiv1beta1.DataVolumeStatus{Phase: cdiv1beta1.ImportInProgress, Progress: "25.0%"}}
	progressed := old.DeepCopy()
	progressed.Status.Progress = "50.0%"
	done := old.DeepCopy()
	done.Status.Phase = cdiv1beta1.Succeeded
	adopted := old.DeepCopy()
	adopted.OwnerReferences = []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Name: "web"}}
	cases := map[string]struct {
		new  *cdiv1beta1.DataVolume
		want bool
	}{
		"progress only":  {progressed, false},
		"phase changed":  {done, true},
		"owners changed": {adopted, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := dataVolumeStateChanged.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: tc.new}); got != tc.want {
				t.Errorf("Update = %v, want %v", got, tc.want)
			}
		})
	}
}
