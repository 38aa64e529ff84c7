package shapes

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/capacity"
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

// syncedInformer is a fake informer whose handlers have seen its first
// list at once.
type syncedInformer struct{ *controllertest.FakeInformer }

func (i syncedInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	_, err := i.FakeInformer.AddEventHandler(h)
	return synced{}, err
}

type synced struct{}

func (synced) HasSynced() bool { return true }

// countingQueue counts the items asked for later.
type countingQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	later int
}

func (q *countingQueue) AddAfter(item reconcile.Request, d time.Duration) {
	if item == fleetKey && d == Coalesce {
		q.later++
	}
}

// TestReconcileFromTheWatch: with the shapes recorded from the informer's
// events, a pass writes what a pass over the whole list writes, within
// the namespaces' limit and over it; a creation, a spec change, the start
// of a deletion and a deletion each record the change before they queue
// the pass, and a status write queues nothing.
func TestReconcileFromTheWatch(t *testing.T) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, fleetv1alpha1.AddToScheme, clusterv1.Install} {
		utilruntime.Must(add(s))
	}
	bridged := fvm("bridged", "4", "16Gi")
	bridged.Spec.Template.Raw = []byte(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","spec":{"template":{"spec":{` +
		`"domain":{"cpu":{"cores":4},"memory":{"guest":"16Gi"},"devices":{}},` +
		`"networks":[{"name":"default","pod":{}},{"name":"vlan","multus":{"networkName":"vlan2003"}}]}}}}`)
	gitBridged := &fleetv1alpha1.FleetVirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "git-bridged"}}
	gitBridged.Spec.Placement.RequiredNetworks = []string{"default/vlan2003"}
	fvms := []*fleetv1alpha1.FleetVirtualMachine{fvm("a", "4", "16Gi"), fvm("b", "4", "16384Mi"), fvm("small", "1", "1Gi"), bridged, gitBridged,
		{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "git"}}}
	for i, f := range fvms {
		f.UID, f.Generation = types.UID(f.Name), 1
		f.CreationTimestamp = metav1.NewTime(time.Date(2026, 11, 29, 0, 0, i, 0, time.UTC))
	}
	for _, limit := range []int{0, 1} {
		t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
			ctx := context.Background()
			b := fake.NewClientBuilder().WithScheme(s).WithObjects(cluster("prod-a"))
			for _, f := range fvms {
				b = b.WithObjects(f.DeepCopy())
			}
			c := b.Build()
			r := &Reconciler{Client: c, ShapesPerNamespace: limit, observing: true}
			inf := syncedInformer{&controllertest.FakeInformer{}}
			w := &shapeWatch{informer: inf, shapes: &r.shapes, registered: make(chan toolscache.ResourceEventHandlerRegistration, 1)}
			q := &countingQueue{}
			if err := w.Start(ctx, q); err != nil {
				t.Fatal(err)
			}
			if err := w.WaitForSync(ctx); err != nil {
				t.Fatal(err)
			}
			for _, f := range fvms {
				inf.Add(f.DeepCopy())
			}
			// pass reconciles and checks the ConfigMap against the
			// answer for the whole list the client holds.
			pass := func(what string) {
				t.Helper()
				if _, err := r.Reconcile(ctx, ctrl.Request{}); err != nil {
					t.Fatal(err)
				}
				var list fleetv1alpha1.FleetVirtualMachineList
				if err := c.List(ctx, &list); err != nil {
					t.Fatal(err)
				}
				want, err := capacity.EncodeShapes(capacity.Shapes(list.Items, limit).Shapes)
				if err != nil {
					t.Fatal(err)
				}
				cm := &corev1.ConfigMap{}
				if err := c.Get(ctx, client.ObjectKey{Namespace: "prod-a", Name: fleetv1alpha1.ShapesConfigMapName}, cm); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, cm.Data[fleetv1alpha1.ShapesConfigMapKey]); diff != "" {
					t.Errorf("%s: shapes from the watch (-from the list,+from the watch):\n%s", what, diff)
				}
			}
			queued := func(what string, want int) {
				t.Helper()
				if q.later != want {
					t.Errorf("%s: %d passes queued, want %d", what, q.later, want)
				}
				q.later = 0
			}
			queued("first list", len(fvms))
			pass("first list")

			// A status write: the same shape, nothing queued.
			status := fvms[0].DeepCopy()
			status.Status.ObservedGeneration = 1
			inf.Update(fvms[0], status)
			queued("status write", 0)

			// A spec change: "a" takes small's shape.
			changed := fvm("a", "1", "1Gi")
			changed.UID, changed.Generation, changed.CreationTimestamp = "a", 2, fvms[0].CreationTimestamp
			stored := &fleetv1alpha1.FleetVirtualMachine{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(changed), stored); err != nil {
				t.Fatal(err)
			}
			stored.Spec = changed.Spec
			if err := c.Update(ctx, stored); err != nil {
				t.Fatal(err)
			}
			inf.Update(fvms[0], changed)
			queued("spec change", 1)
			pass("spec change")

			// The start of a deletion, then the deletion, of bridged.
			deleting := bridged.DeepCopy()
			now := metav1.Now()
			deleting.DeletionTimestamp = &now
			inf.Update(bridged, deleting)
			queued("deletion started", 1)
			if err := c.Delete(ctx, bridged.DeepCopy()); err != nil {
				t.Fatal(err)
			}
			pass("deletion started")
			inf.Delete(deleting)
			queued("deleted", 1)
			pass("deleted")
		})
	}
}
