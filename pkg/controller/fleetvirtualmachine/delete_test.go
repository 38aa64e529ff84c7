package fleetvirtualmachine

import (
	"context"
	"fmt"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/argoapp"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/delivery"
	"github.com/fleetvm/fleetvm/pkg/tenancy"
	"github.com/fleetvm/fleetvm/pkg/write"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

// TestDeletionWritesEachApplicationTwice: taking a deleted FleetVM's
// Applications apart costs two writes each, whatever the policy: the one
// that detaches it from the ApplicationSet also sets Argo CD's resources
// finalizer as the policy says, then the delete. A namespace of 5,000
// FleetVMs with 3 copies each is 15,000 writes less than a detach, a
// finalizer write and a delete each; the hub's client rate bounds how fast
// a mass deletion goes. Each Application is still deleted only with the
// finalizer its policy needs (Delete: on, Argo CD removes the VM; Orphan:
// off, the VM stays), and one Argo CD reports invalid is left alone.
func TestDeletionWritesEachApplicationTwice(t *testing.T) {
	const resources = argoapp.ResourcesFinalizerName
	for _, policy := range []fleetv1alpha1.DeletionPolicy{fleetv1alpha1.DeletionPolicyDelete, fleetv1alpha1.DeletionPolicyOrphan} {
		t.Run(string(policy), func(t *testing.T) {
			ctx := t.Context()
			fvm := &fleetv1alpha1.FleetVirtualMachine{
				ObjectMeta: metav1.ObjectMeta{
					Namespace: "vms", Name: "web", UID: "fvm-uid", Generation: 1,
					Finalizers:        []string{fleetv1alpha1.FleetVirtualMachineFinalizer},
					DeletionTimestamp: ptr.To(metav1.Now()),
				},
				Spec: fleetv1alpha1.FleetVirtualMachineSpec{
					Template:       &runtime.RawExtension{Raw: []byte(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","spec":{}}`)},
					Placement:      fleetv1alpha1.FleetPlacement{Environment: "prod"},
					DeletionPolicy: policy,
				},
			}
			cfg := DefaultConfig()
			appSet := &argoapp.ApplicationSet{ObjectMeta: metav1.ObjectMeta{
				Namespace: cfg.ArgoNamespace, Name: delivery.ChildName(client.ObjectKeyFromObject(fvm)), UID: "appset-uid",
				Labels: delivery.OwnerLabels(fvm), Finalizers: []string{delivery.ProtectionFinalizer},
			}}
			objs := []client.Object{fvm, appSet}
			clusters := []string{"prod-a", "prod-b", "prod-c"}
			for _, cluster := range clusters {
				app := &argoapp.Application{ObjectMeta: metav1.ObjectMeta{
					Namespace: cfg.ArgoNamespace, Name: appSet.Name + "." + cluster,
					Labels: delivery.OwnerLabels(fvm),
					OwnerReferences: []metav1.OwnerReference{{
						APIVersion: argoapp.GroupVersion.String(), Kind: "ApplicationSet",
						Name: appSet.Name, UID: appSet.UID, Controller: ptr.To(true),
					}},
				}}
				app.Labels[fleetv1alpha1.LabelCluster] = cluster
				if policy == fleetv1alpha1.DeletionPolicyOrphan {
					app.Finalizers = []string{resources} // as a template may set it
				}
				if cluster == "prod-c" {
					app.Status.Conditions = []argoapp.ApplicationCondition{{Type: argoapp.ApplicationConditionInvalidSpecError, Message: "cluster gone"}}
				}
				objs = append(objs, app)
			}
			b := fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(objs...).WithStatusSubresource(fvm)
			if err := SetupIndexes(ctx, utiltesting.Indexer{Builder: b}); err != nil {
				t.Fatal(err)
			}
			writes := map[string]int{}       // per Application
			deletedWith := map[string]bool{} // resources finalizer at the delete
			c := b.WithInterceptorFuncs(interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if obj.GetObjectKind().GroupVersionKind().Kind == gitOpsClusterGVK.Kind {
						return nil
					}
					return c.Get(ctx, key, obj, opts...)
				},
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					switch obj.(type) {
					case *argoapp.Application, *argoapp.ApplicationSet:
						writes[obj.GetName()]++
					}
					return c.Patch(ctx, obj, patch, opts...)
				},
				Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
					if _, ok := obj.(*argoapp.Application); ok {
						writes[obj.GetName()]++
					}
					return c.Update(ctx, obj, opts...)
				},
				Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
					app, ok := obj.(*argoapp.Application)
					if !ok {
						if _, ok := obj.(*argoapp.ApplicationSet); ok {
							writes[obj.GetName()]++
						}
						return c.Delete(ctx, obj, opts...)
					}
					writes[app.Name]++
					live := &argoapp.Application{}
					if err := c.Get(ctx, client.ObjectKeyFromObject(app), live); err != nil {
						return err
					}
					deletedWith[app.Name] = controllerutil.ContainsFinalizer(live, resources)
					if err := c.Delete(ctx, obj, opts...); err != nil {
						return err
					}
					// Argo CD removes the VM and its finalizer.
					if err := c.Get(ctx, client.ObjectKeyFromObject(app), live); apierrors.IsNotFound(err) {
						return nil
					} else if err != nil {
						return err
					}
					live.Finalizers = nil
					return c.Update(ctx, live)
				},
			}).Build()
			r := &Reconciler{Client: c, Recorder: record.NewFakeRecorder(100), Clock: clocktesting.NewFakeClock(metav1.Now().Time), Config: cfg}

			// Argo CD reports prod-c invalid: with Delete its removal waits.
			// Then the condition clears and it goes too.
			for range 6 {
				if _, err := write.Requeue(r).Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(fvm)}); err != nil {
					t.Fatalf("Reconcile: %v", err)
				}
			}
			invalid := appSet.Name + ".prod-c"
			if policy == fleetv1alpha1.DeletionPolicyDelete {
				if _, deleted := deletedWith[invalid]; deleted {
					t.Fatalf("%s was deleted while Argo CD reported it invalid", invalid)
				}
				app := &argoapp.Application{}
				if err := c.Get(ctx, client.ObjectKey{Namespace: cfg.ArgoNamespace, Name: invalid}, app); err != nil {
					t.Fatal(err)
				}
				app.Status.Conditions = nil
				if err := c.Update(ctx, app); err != nil {
					t.Fatal(err)
				}
				writes[invalid]-- // the test's, not the hub's
				for range 4 {
					if _, err := write.Requeue(r).Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(fvm)}); err != nil {
						t.Fatalf("Reconcile: %v", err)
					}
				}
			}

			if err := c.Get(ctx, client.ObjectKeyFromObject(fvm), &fleetv1alpha1.FleetVirtualMachine{}); !apierrors.IsNotFound(err) {
				t.Fatalf("the FleetVirtualMachine is not gone: %v", err)
			}
			var apps argoapp.ApplicationList
			if err := c.List(ctx, &apps); err != nil {
				t.Fatal(err)
			}
			if len(apps.Items) != 0 {
				t.Errorf("%d Applications left", len(apps.Items))
			}
			wantFinalizer := policy == fleetv1alpha1.DeletionPolicyDelete
			for _, cluster := range clusters {
				name := appSet.Name + "." + cluster
				want := 2
				if name == invalid && wantFinalizer {
					want = 3 // detached while invalid, finalizer once valid, delete
				}
				if writes[name] != want {
					t.Errorf("%s: %d writes, want %d", name, writes[name], want)
				}
				if with, ok := deletedWith[name]; !ok || with != wantFinalizer {
					t.Errorf("%s: deleted %v, with the resources finalizer %v; want deleted with it %v", name, ok, with, wantFinalizer)
				}
			}
			// The ApplicationSet: its delete and its release, with no
			// write refused for the version its delete moved on.
			if writes[appSet.Name] != 2 {
				t.Errorf("ApplicationSet: %d writes, want 2", writes[appSet.Name])
			}
			if t.Failed() {
				names := slices.Sorted(func(yield func(string) bool) {
					for k := range writes {
						if !yield(fmt.Sprintf("%s=%d", k, writes[k])) {
							return
						}
					}
				})
				t.Logf("writes: %v", names)
			}
		})
	}
}

// TestDeletionAsksTheAPIServerForTheApplicationSet: a FleetVM deleted
// right after the reconcile that created its ApplicationSet, before the
// cache shows it. The deletion does not end on the cache's word: left
// behind, the ApplicationSet would deliver the VM with no FleetVM. It
// deletes the ApplicationSet the API server has, and keeps its finalizer.
func TestDeletionAsksTheAPIServerForTheApplicationSet(t *testing.T) {
	ctx := t.Context()
	fvm := &fleetv1alpha1.FleetVirtualMachine{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "vms", Name: "web", UID: "fvm-uid", Generation: 1,
			Finalizers:        []string{fleetv1alpha1.FleetVirtualMachineFinalizer},
			DeletionTimestamp: ptr.To(metav1.Now()),
		},
		Spec: fleetv1alpha1.FleetVirtualMachineSpec{
			Template:       &runtime.RawExtension{Raw: []byte(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","spec":{}}`)},
			DeletionPolicy: fleetv1alpha1.DeletionPolicyDelete,
		},
	}
	cfg := DefaultConfig()
	appSet := &argoapp.ApplicationSet{ObjectMeta: metav1.ObjectMeta{
		Namespace: cfg.ArgoNamespace, Name: delivery.ChildName(client.ObjectKeyFromObject(fvm)), UID: "appset-uid",
		Labels: delivery.OwnerLabels(fvm), Finalizers: []string{delivery.ProtectionFinalizer},
	}}
	b := fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(fvm, appSet).WithStatusSubresource(fvm)
	if err := SetupIndexes(ctx, utiltesting.Indexer{Builder: b}); err != nil {
		t.Fatal(err)
	}
	live := b.Build()
	// The cache: everything but the new ApplicationSet.
	cached := interceptor.NewClient(live, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*argoapp.ApplicationSet); ok {
				return apierrors.NewNotFound(argoapp.GroupVersion.WithResource("applicationsets").GroupResource(), key.Name)
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	r := &Reconciler{Client: cached, APIReader: live, Recorder: record.NewFakeRecorder(100), Clock: clocktesting.NewFakeClock(metav1.Now().Time), Config: cfg}
	_, _ = r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(fvm)})

	got := &fleetv1alpha1.FleetVirtualMachine{}
	if err := live.Get(ctx, client.ObjectKeyFromObject(fvm), got); err != nil {
		t.Fatalf("the FleetVirtualMachine is gone with its ApplicationSet still there: %v", err)
	}
	if !controllerutil.ContainsFinalizer(got, fleetv1alpha1.FleetVirtualMachineFinalizer) {
		t.Error("the finalizer is off with the ApplicationSet still there")
	}
	left := &argoapp.ApplicationSet{}
	if err := live.Get(ctx, client.ObjectKeyFromObject(appSet), left); err == nil && left.DeletionTimestamp == nil {
		t.Error("the ApplicationSet the API server has was not deleted")
	}
}

// TestTenantCleanupDeletesEachWorkOnce: the last FleetVM of a namespace
// deletes the namespace's ManifestWorks (one per cluster) and its
// AppProject, and the sweep once it is gone looks again while the cache
// still shows them (the watch has not brought the deletions, or the work
// agent's finalizer holds them): it asks for no deletion a second time.
func TestTenantCleanupDeletesEachWorkOnce(t *testing.T) {
	ctx := t.Context()
	cfg := DefaultConfig()
	const ns = "vms"
	project := tenancy.NewAppProject()
	project.SetNamespace(cfg.ArgoNamespace)
	project.SetName(tenancy.ProjectName(ns))
	project.SetUID("project-uid")
	project.SetLabels(map[string]string{tenancy.LabelNamespace: ns})
	objs := []client.Object{project}
	for _, cluster := range []string{"prod-a", "prod-b", "prod-c"} {
		objs = append(objs, &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{
			Namespace: cluster, Name: namespaceWorkName(ns), UID: types.UID("work-" + cluster),
			Labels: map[string]string{tenancy.LabelNamespace: ns},
		}})
	}
	deleted := map[string]int{}
	b := fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		// The cache lags: what was deleted is still read.
		Delete: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.DeleteOption) error {
			deleted[obj.GetNamespace()+"/"+obj.GetName()]++
			return nil
		},
	})
	if err := SetupIndexes(ctx, utiltesting.Indexer{Builder: b}); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: b.Build(), Config: cfg}
	if _, err := r.cleanupTenant(ctx, ns, "last-fvm-uid"); err != nil {
		t.Fatal(err)
	}
	if len(deleted) != 4 {
		t.Fatalf("the last FleetVM deleted %v, want the AppProject and the 3 works", deleted)
	}
	if _, err := r.sweepReleased(ctx, ns); err != nil {
		t.Fatal(err)
	}
	for obj, n := range deleted {
		if n != 1 {
			t.Errorf("%s deleted %d times, want once", obj, n)
		}
	}
}
