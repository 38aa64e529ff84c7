package shapes

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

func fvm(name, cpu, memory string) *fleetv1alpha1.FleetVirtualMachine {
	raw := `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","spec":{"template":{"spec":{"domain":{"cpu":{"cores":` + cpu +
		`},"memory":{"guest":"` + memory + `"},"devices":{}}}}}}`
	return &fleetv1alpha1.FleetVirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
		Spec:       fleetv1alpha1.FleetVirtualMachineSpec{Template: &runtime.RawExtension{Raw: []byte(raw)}},
	}
}

func cluster(name string) *clusterv1.ManagedCluster {
	return &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// TestReconcile: every cluster namespace gets one ConfigMap with the
// fleet's distinct shapes, networks included (a VM from git asks only for
// its required networks, if any; a deleting FleetVirtualMachine for none); a second pass writes nothing; a
// ConfigMap edited by hand is put back.
func TestReconcile(t *testing.T) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, fleetv1alpha1.AddToScheme, clusterv1.Install} {
		utilruntime.Must(add(s))
	}
	deleting := fvm("going", "8", "32Gi")
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	deleting.Finalizers = []string{"test"}
	fromGit := &fleetv1alpha1.FleetVirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "git"}}
	gitBridged := fromGit.DeepCopy()
	gitBridged.Name = "git-bridged"
	gitBridged.Spec.Placement.RequiredNetworks = []string{"default/vlan2003"}
	bridged := fvm("bridged", "4", "16Gi")
	bridged.Spec.Template.Raw = []byte(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","spec":{"template":{"spec":{` +
		`"domain":{"cpu":{"cores":4},"memory":{"guest":"16Gi"},"devices":{}},` +
		`"networks":[{"name":"default","pod":{}},{"name":"vlan","multus":{"networkName":"vlan2003"}}]}}}}`)
	writes := 0
	c := fake.NewClientBuilder().WithScheme(s).
		WithObjects(fvm("a", "4", "16Gi"), fvm("b", "4", "16384Mi"), fvm("small", "1", "1Gi"), deleting, fromGit, gitBridged, bridged,
			cluster("prod-a"), cluster("dev-a")).
		WithInterceptorFuncs(interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				writes++
				return c.Create(ctx, obj, opts...)
			},
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
				writes++
				return c.Patch(ctx, obj, p, opts...)
			},
		}).Build()
	r := &Reconciler{Client: c}
	ctx := context.Background()
	// By name: the git VM's networks-only shape, 1 core, 4 cores, and
	// 4 cores on team-a's vlan2003 (qualified with the VM's namespace).
	want := `[{"cpu":"0","memory":"0","networks":["default/vlan2003"]},{"cpu":"1","memory":"1Gi"},` +
		`{"cpu":"4","memory":"16Gi"},{"cpu":"4","memory":"16Gi","networks":["team-a/vlan2003"]}]`
	read := func(ns string) string {
		t.Helper()
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: fleetv1alpha1.ShapesConfigMapName}, cm); err != nil {
			t.Fatal(err)
		}
		return cm.Data[fleetv1alpha1.ShapesConfigMapKey]
	}

	if _, err := r.Reconcile(ctx, ctrl.Request{}); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"prod-a", "dev-a"} {
		if diff := cmp.Diff(want, read(ns)); diff != "" {
			t.Errorf("shapes of %s (-want,+got):\n%s", ns, diff)
		}
	}
	if writes != 2 {
		t.Errorf("writes = %d, want 2 (one ConfigMap per cluster)", writes)
	}

	writes = 0
	if _, err := r.Reconcile(ctx, ctrl.Request{}); err != nil {
		t.Fatal(err)
	}
	if writes != 0 {
		t.Errorf("second pass wrote %d times, want 0", writes)
	}

	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "dev-a", Name: fleetv1alpha1.ShapesConfigMapName}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data[fleetv1alpha1.ShapesConfigMapKey] = "[]"
	if err := c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx, ctrl.Request{}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, read("dev-a")); diff != "" {
		t.Errorf("hand-edited shapes not put back (-want,+got):\n%s", diff)
	}
}
