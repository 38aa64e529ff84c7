package hub

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync/atomic"
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
// objects, transformed; then they follow a change and a deletion through
// the item-wise watch, not the watch they are given. Other tests' objects
// may still come and go, so only this test's are counted and read.
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
	for _, tc := range []struct {
		exemplar client.Object
		keys     []client.ObjectKey
		check    func(obj any) error
		// change changes the first key's object; changed tells the
		// cached copy of the change.
		change  func(obj client.Object)
		changed func(obj any) bool
	}{
		{&fleetv1alpha1.VMReport{}, reports, func(obj any) error {
			r := obj.(*fleetv1alpha1.VMReport)
			if r.Labels != nil || r.ManagedFields != nil || len(r.Spec.VMs) != 1 || r.Spec.VMs[0].PrintableStatus != "Running" {
				return fmt.Errorf("VMReport %s cached as %+v, want its spec without labels or managed fields", r.Name, r)
			}
			return nil
		}, func(obj client.Object) { obj.(*fleetv1alpha1.VMReport).Spec.VMs[0].PrintableStatus = "Stopped" }, func(obj any) bool {
			r := obj.(*fleetv1alpha1.VMReport)
			return r.Labels == nil && r.Spec.VMs[0].PrintableStatus == "Stopped"
		}},
		{&argoapp.Application{}, []client.ObjectKey{app}, func(obj any) error {
			a, ok := obj.(*argoapp.Application)
			if !ok || a.Spec.Project != "default" || a.ManagedFields != nil {
				return fmt.Errorf("application cached as %#v, want the hub's view of it with its project", obj)
			}
			return nil
		}, func(obj client.Object) { obj.(*argov1alpha1.Application).Spec.Project = "itemwise" }, func(obj any) bool {
			a, ok := obj.(*argoapp.Application)
			return ok && a.Spec.Project == "itemwise" && a.ManagedFields == nil
		}},
	} {
		// The informer is handed a List and a watch that fail: the
		// item-wise lister must stand in for both. (A failed watch
		// would make the informer list again, which sees the change
		// too: the calls are counted.)
		var givenCalls atomic.Int32
		given := &toolscache.ListWatch{
			ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
				givenCalls.Add(1)
				return nil, errors.New("the informer's own List was called")
			},
			WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
				givenCalls.Add(1)
				return nil, errors.New("the informer's own watch was called")
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
		if err != nil {
			cancel()
			t.Fatalf("%T: %d of this test's %d objects cached: %v", tc.exemplar, len(objs), len(tc.keys), err)
		}
		for _, obj := range objs {
			if err := tc.check(obj); err != nil {
				t.Error(err)
			}
		}

		// A change and a deletion, seen through the watch.
		first, last := tc.keys[0], tc.keys[len(tc.keys)-1]
		obj := reflect.New(reflect.TypeOf(tc.exemplar).Elem()).Interface().(client.Object)
		if _, ok := tc.exemplar.(*argoapp.Application); ok {
			obj = &argov1alpha1.Application{} // written as Argo CD's type
		}
		if err := c.Get(ctx, first, obj); err != nil {
			t.Fatal(err)
		}
		tc.change(obj)
		if err := c.Update(ctx, obj); err != nil {
			t.Fatal(err)
		}
		if len(tc.keys) > 1 {
			gone := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
			gone.SetNamespace(last.Namespace)
			gone.SetName(last.Name)
			if err := c.Delete(ctx, gone); err != nil {
				t.Fatal(err)
			}
		}
		err = utilwait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			got, ok, _ := informer.GetStore().GetByKey(first.String())
			if !ok || !tc.changed(got) {
				return false, nil
			}
			_, there, _ := informer.GetStore().GetByKey(last.String())
			return len(tc.keys) == 1 || !there, nil
		})
		cancel()
		if err != nil {
			got, _, _ := informer.GetStore().GetByKey(first.String())
			_, there, _ := informer.GetStore().GetByKey(last.String())
			t.Fatalf("%T: the change of %s not seen through the watch (cached %+v), or %s still cached (%t): %v", tc.exemplar, first, got, last, there, err)
		}
		if n := givenCalls.Load(); n != 0 {
			t.Errorf("%T: the informer's own List or watch was called %d times, want none", tc.exemplar, n)
		}
	}
}
