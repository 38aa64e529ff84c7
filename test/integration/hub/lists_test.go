package hub

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilwait "k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/argoapp"
	"github.com/fleetvm/fleetvm/pkg/hub"
)

// TestCacheListsItemwise: the hub's informers of VM reports and
// Applications fill their caches from the real API server's List through
// the item-wise lister, not the List they are given, and hold this test's
// objects, transformed. Other tests' objects may still come and go, so
// only this test's are counted and read.
func TestCacheListsItemwise(t *testing.T) {
	ctx := t.Context()
	c := fleet.Hub.Client
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "itemwise"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), ns) })
	create := func(obj client.Object) client.ObjectKey {
		t.Helper()
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), obj) })
		return client.ObjectKeyFromObject(obj)
	}
	var reports []client.ObjectKey
	for i := range 3 {
		reports = append(reports, create(&fleetv1alpha1.VMReport{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("itemwise.vm-%d", i), Namespace: ns.Name, Labels: map[string]string{fleetv1alpha1.LabelCluster: ns.Name}},
			Spec: fleetv1alpha1.VMReportSpec{
				FleetVM: fleetv1alpha1.FleetVMReference{Namespace: "itemwise", Name: fmt.Sprintf("vm-%d", i)},
				VMs:     []fleetv1alpha1.VMState{{Namespace: "itemwise", Name: fmt.Sprintf("vm-%d", i), PrintableStatus: "Running", Ready: true}},
			},
		}))
	}
	app := create(&argov1alpha1.Application{
		ObjectMeta: metav1.ObjectMeta{Name: "itemwise-app", Namespace: argoNS},
		Spec: argov1alpha1.ApplicationSpec{
			Project:     "default",
			Destination: argov1alpha1.ApplicationDestination{Name: "prod-a", Namespace: "itemwise"},
			Source:      &argov1alpha1.ApplicationSource{RepoURL: "https://charts.fleet.invalid", Chart: "fleetvm-vm", TargetRevision: "1.0.0"},
		},
	})

	opts := hub.CacheOptions(fleet.Hub.Config, argoNS)
	watcher, err := client.NewWithWatch(fleet.Hub.Config, client.Options{Scheme: hub.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		exemplar client.Object
		list     client.ObjectList
		in       []client.ListOption
		keys     []client.ObjectKey
		check    func(obj any) error
	}{
		{&fleetv1alpha1.VMReport{}, &fleetv1alpha1.VMReportList{}, nil, reports, func(obj any) error {
			r := obj.(*fleetv1alpha1.VMReport)
			if r.Labels != nil || r.ManagedFields != nil || len(r.Spec.VMs) != 1 || r.Spec.VMs[0].PrintableStatus != "Running" {
				return fmt.Errorf("VMReport %s cached as %+v, want its spec without labels or managed fields", r.Name, r)
			}
			return nil
		}},
		{&argoapp.Application{}, &argoapp.ApplicationList{}, []client.ListOption{client.InNamespace(argoNS)}, []client.ObjectKey{app}, func(obj any) error {
			a, ok := obj.(*argoapp.Application)
			if !ok || a.Spec.Project != "default" || a.ManagedFields != nil {
				return fmt.Errorf("application cached as %#v, want the hub's view of it with its project", obj)
			}
			return nil
		}},
	} {
		// The informer is handed a List that fails: the item-wise lister
		// must stand in for it, and the watch it is handed be used.
		given := &toolscache.ListWatch{
			ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
				return nil, errors.New("the informer's own List was called")
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return watcher.Watch(ctx, tc.list, append([]client.ListOption{&client.ListOptions{Raw: &o}}, tc.in...)...)
			},
		}
		informer := opts.NewInformer(given, tc.exemplar, 0, toolscache.Indexers{})
		transform := opts.DefaultTransform
		for kind, by := range opts.ByObject {
			if reflect.TypeOf(kind) == reflect.TypeOf(tc.exemplar) && by.Transform != nil {
				transform = by.Transform
			}
		}
		if err := informer.SetTransform(transform); err != nil {
			t.Fatal(err)
		}
		ictx, cancel := context.WithCancel(ctx)
		go informer.RunWithContext(ictx)
		cached := func() []any {
			var out []any
			for _, key := range tc.keys {
				if obj, ok, _ := informer.GetStore().GetByKey(key.String()); ok {
					out = append(out, obj)
				}
			}
			return out
		}
		err := utilwait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return informer.HasSynced() && len(cached()) == len(tc.keys), nil
		})
		objs := cached()
		cancel()
		if err != nil {
			t.Fatalf("%T: %d of this test's %d objects cached: %v", tc.exemplar, len(objs), len(tc.keys), err)
		}
		for _, obj := range objs {
			if err := tc.check(obj); err != nil {
				t.Error(err)
			}
		}
	}
}
