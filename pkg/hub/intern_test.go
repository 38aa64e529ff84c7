package hub

import (
	"encoding/json"
	"reflect"
	"testing"
	"unsafe"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/argoapp"
)

// decoded returns an independent copy of obj, as the informer decodes each
// object: no string shares bytes with obj's.
func decoded[T client.Object](t *testing.T, obj T) T {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	out := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(T)
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// cached runs the hub's cache transform of obj's kind.
func cached(t *testing.T, obj client.Object) client.Object {
	t.Helper()
	out, err := CacheTransform(obj)(obj)
	if err != nil {
		t.Fatal(err)
	}
	return out.(client.Object)
}

func same(a, b string) bool { return a == b && unsafe.StringData(a) == unsafe.StringData(b) }

func report() *fleetv1alpha1.VMReport {
	return &fleetv1alpha1.VMReport{
		ObjectMeta: metav1.ObjectMeta{Name: "bench.vm-1", Namespace: "cluster-0002", Labels: map[string]string{fleetv1alpha1.LabelCluster: "cluster-0002"}},
		Spec: fleetv1alpha1.VMReportSpec{
			FleetVM: fleetv1alpha1.FleetVMReference{Namespace: "bench", Name: "vm-1"},
			VMs: []fleetv1alpha1.VMState{{
				Namespace: "bench", Name: "vm-1", PrintableStatus: "Running", Ready: true, RunStrategy: "Always",
				Conditions: "Ready=True, LiveMigratable=False (DisksNotLiveMigratable: cannot migrate VMI)", Node: "node-1",
				IPAddresses: []string{"10.128.1.2"}, DiskImages: []string{"containerdisk:quay.io/containerdisks/fedora:41"},
				DataVolumes: fleetv1alpha1.DataVolumesReady,
			}},
		},
	}
}

// TestCacheTransformsShareRepeatedStrings: two objects the cache decodes
// apart hold one copy of the strings they repeat after the hub's
// transforms, and read the same as before them (but for what a transform
// drops on purpose).
func TestCacheTransformsShareRepeatedStrings(t *testing.T) {
	// VM reports: the spec is kept as decoded, the labels dropped.
	a, b := cached(t, decoded(t, report())).(*fleetv1alpha1.VMReport), cached(t, decoded(t, report())).(*fleetv1alpha1.VMReport)
	want := report()
	want.Labels = nil
	if !reflect.DeepEqual(a.Spec, want.Spec) || !reflect.DeepEqual(a.ObjectMeta, want.ObjectMeta) {
		t.Errorf("cached VMReport = %+v, want %+v", a, want)
	}
	va, vb := a.Spec.VMs[0], b.Spec.VMs[0]
	for name, pair := range map[string][2]string{
		"namespace": {a.Namespace, b.Namespace}, "conditions": {va.Conditions, vb.Conditions},
		"printableStatus": {va.PrintableStatus, vb.PrintableStatus}, "node": {va.Node, vb.Node},
		"diskImages": {va.DiskImages[0], vb.DiskImages[0]}, "dataVolumes": {string(va.DataVolumes), string(vb.DataVolumes)},
	} {
		if !same(pair[0], pair[1]) {
			t.Errorf("VMReport %s: two copies of %q", name, pair[0])
		}
	}

	// FleetVirtualMachines: the status's conditions and cluster entries.
	fvm := &fleetv1alpha1.FleetVirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "vm-1", Namespace: "bench", Finalizers: []string{"fleetvm.io/cleanup"}},
		Status: fleetv1alpha1.FleetVirtualMachineStatus{
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "AllReady", Message: "ready on all 3 clusters"}},
			Placement:  &fleetv1alpha1.PlacementStatus{Namespace: "argocd", Name: "fvm.candidates-1", DecidedClusters: []string{"cluster-0002"}},
			Clusters: []fleetv1alpha1.ClusterStatus{{
				Cluster: "cluster-0002", Environment: "prod", Phase: fleetv1alpha1.ClusterPhase("Running"), PrintableStatus: "Running",
				SyncStatus: "Synced", Health: "Healthy", Node: "node-1", Message: "Ready=True",
			}},
		},
	}
	fa, fb := cached(t, decoded(t, fvm)).(*fleetv1alpha1.FleetVirtualMachine), cached(t, decoded(t, fvm)).(*fleetv1alpha1.FleetVirtualMachine)
	if !reflect.DeepEqual(fa.Status, fvm.Status) || !reflect.DeepEqual(fa.ObjectMeta, fvm.ObjectMeta) {
		t.Errorf("cached FleetVirtualMachine changed: %+v", fa)
	}
	ca, cb := fa.Status.Clusters[0], fb.Status.Clusters[0]
	for name, pair := range map[string][2]string{
		"condition message": {fa.Status.Conditions[0].Message, fb.Status.Conditions[0].Message},
		"finalizer":         {fa.Finalizers[0], fb.Finalizers[0]},
		"cluster":           {ca.Cluster, cb.Cluster}, "phase": {string(ca.Phase), string(cb.Phase)},
		"health": {ca.Health, cb.Health}, "message": {ca.Message, cb.Message},
		"decided cluster": {fa.Status.Placement.DecidedClusters[0], cb.Cluster},
	} {
		if !same(pair[0], pair[1]) {
			t.Errorf("FleetVirtualMachine %s: two copies of %q", name, pair[0])
		}
	}

	// Applications: decoded as the hub's view of one (argoapp), then shared.
	app := &argov1alpha1.Application{
		ObjectMeta: metav1.ObjectMeta{Name: "fvm-bench.vm-1.cluster-0002", Namespace: "argocd", Labels: map[string]string{fleetv1alpha1.LabelFleetVMName: "vm-1"}},
		Spec:       argov1alpha1.ApplicationSpec{Project: "fleetvm-bench"},
		Status: argov1alpha1.ApplicationStatus{
			Sync:           argov1alpha1.SyncStatus{Status: argov1alpha1.SyncStatusCodeSynced},
			Health:         argov1alpha1.AppHealthStatus{Status: "Healthy"},
			OperationState: &argov1alpha1.OperationState{Phase: "Succeeded", Message: "successfully synced (all tasks run)"},
		},
	}
	aa, ab := cached(t, decodedApplication(t, app)).(*argoapp.Application), cached(t, decodedApplication(t, app)).(*argoapp.Application)
	appMeta := *app.ObjectMeta.DeepCopy()
	appMeta.Labels = nil // held outside the metadata (argoapp.HoldLabels)
	if !reflect.DeepEqual(aa.ObjectMeta, appMeta) || !reflect.DeepEqual(aa.GetLabels(), app.Labels) ||
		aa.Spec.Project != app.Spec.Project || string(aa.Status.Sync.Status) != string(app.Status.Sync.Status) {
		t.Errorf("cached Application changed: %+v", aa)
	}
	for name, pair := range map[string][2]string{
		"project": {aa.Spec.Project, ab.Spec.Project}, "sync": {string(aa.Status.Sync.Status), string(ab.Status.Sync.Status)},
		"health":            {string(aa.Status.Health.Status), string(ab.Status.Health.Status)},
		"label":             {aa.Label(fleetv1alpha1.LabelFleetVMName), ab.Label(fleetv1alpha1.LabelFleetVMName)},
		"operation phase":   {string(aa.Status.OperationState.Phase), string(ab.Status.OperationState.Phase)},
		"operation message": {aa.Status.OperationState.Message, ab.Status.OperationState.Message},
	} {
		if !same(pair[0], pair[1]) {
			t.Errorf("Application %s: two copies of %q", name, pair[0])
		}
	}
	if same(aa.Name, ab.Name) {
		t.Error("Application names were interned: they are unique per object")
	}

	// ApplicationSets: held (delivery.TrimApplicationSet), their labels'
	// keys and values and their annotations' keys shared; an annotation
	// value, one per object, only with the object's own name.
	appSet := &argoapp.ApplicationSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: "fvm-bench.vm-1", Namespace: "argocd",
			Labels:      map[string]string{fleetv1alpha1.LabelFleetVMNamespace: "bench"},
			Annotations: map[string]string{"fleetvm.io/placement": "fvm-bench.vm-1", "fleetvm.io/generated-hash": "0123456789abcdef"},
		},
	}
	sa, sb := cached(t, decoded(t, appSet)).(*argoapp.ApplicationSet), cached(t, decoded(t, appSet)).(*argoapp.ApplicationSet)
	if !reflect.DeepEqual(sa.GetLabels(), appSet.Labels) || !reflect.DeepEqual(sa.GetAnnotations(), appSet.Annotations) {
		t.Errorf("cached ApplicationSet's labels %v, annotations %v; want %v, %v", sa.GetLabels(), sa.GetAnnotations(), appSet.Labels, appSet.Annotations)
	}
	if !same(sa.Label(fleetv1alpha1.LabelFleetVMNamespace), sb.Label(fleetv1alpha1.LabelFleetVMNamespace)) {
		t.Error("ApplicationSet label value: two copies")
	}
	if same(sa.Annotation("fleetvm.io/generated-hash"), sb.Annotation("fleetvm.io/generated-hash")) {
		t.Error("ApplicationSet annotation values were interned: they are one per object")
	}
	if !same(sa.Annotation("fleetvm.io/placement"), sa.Name) {
		t.Error("ApplicationSet: the placement annotation, its own name, is a second copy of the name")
	}
}
