package fleetvirtualmachine

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/argoapp"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/delivery"
	"github.com/fleetvm/fleetvm/pkg/write"
)

// GitOpsClusterGVK is the GitOpsCluster kind FleetVM writes (as
// unstructured: its Go types bring the whole of multicloud-integrations).
var GitOpsClusterGVK = gitOpsClusterGVK

var gitOpsClusterGVK = schema.GroupVersionKind{Group: "apps.open-cluster-management.io", Version: "v1beta1", Kind: "GitOpsCluster"}

// ensureSharedGitOps makes sure each cluster set the FleetVirtualMachine uses
// has, in the Argo CD namespace, one Placement selecting all its clusters and
// one GitOpsCluster importing them into Argo CD, so Argo CD holds one cluster
// secret per cluster however many FleetVirtualMachines there are.
func (r *Reconciler) ensureSharedGitOps(ctx context.Context, sets []string) error {
	var errs []error
	for _, set := range sets {
		if err := r.ensureShared(ctx, set); err != nil {
			errs = append(errs, err)
		}
	}
	return joinErrors(errs)
}

func (r *Reconciler) ensureShared(ctx context.Context, set string) error {
	name := delivery.SharedName(set)
	labels := delivery.SharedLabels(set)
	p := &clusterv1beta1.Placement{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.Config.ArgoNamespace, Labels: labels},
		Spec: clusterv1beta1.PlacementSpec{
			ClusterSets: []string{set},
			// Keep unreachable clusters imported: a cluster secret that comes
			// and goes with each outage would churn every Application.
			Tolerations: []clusterv1beta1.Toleration{
				{Key: clusterv1.ManagedClusterTaintUnreachable, Operator: clusterv1beta1.TolerationOpExists},
				{Key: clusterv1.ManagedClusterTaintUnavailable, Operator: clusterv1beta1.TolerationOpExists},
			},
		},
	}
	if err := r.createIfMissing(ctx, p); err != nil {
		return err
	}

	g := &unstructured.Unstructured{}
	g.SetGroupVersionKind(gitOpsClusterGVK)
	g.SetName(name)
	g.SetNamespace(r.Config.ArgoNamespace)
	g.SetLabels(labels)
	g.Object["spec"] = map[string]any{
		"argoServer": map[string]any{"cluster": "notused", "argoNamespace": r.Config.ArgoNamespace},
		"placementRef": map[string]any{
			"kind": "Placement", "apiVersion": clusterv1beta1.GroupVersion.String(),
			"name": name, "namespace": r.Config.ArgoNamespace,
		},
	}
	return r.createIfMissing(ctx, g)
}

// createIfMissing creates obj unless the cache already holds an object of
// that name: no write when it exists, whoever made it.
func (r *Reconciler) createIfMissing(ctx context.Context, obj client.Object) error {
	probe := &metav1.PartialObjectMetadata{}
	probe.SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
	if probe.GroupVersionKind().Empty() {
		gvk, err := r.Client.GroupVersionKindFor(obj)
		if err != nil {
			return err
		}
		probe.SetGroupVersionKind(gvk)
	}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(obj), probe)
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("get %s %s: %w", probe.Kind, klog.KObj(obj), err)
	}
	if _, err := write.CreateOnly(ctx, r.Client, obj); err != nil {
		return fmt.Errorf("create %s %s: %w", probe.Kind, klog.KObj(obj), err)
	}
	return nil
}

// reconcileApplicationSet makes the ApplicationSet deliver to the targets.
// got is the ApplicationSet as read (nil: none); with no target and none
// yet, nothing is created. It returns the ApplicationSet as the API server
// holds it.
func (r *Reconciler) reconcileApplicationSet(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, got *argoapp.ApplicationSet, project string, targets []delivery.Target) (*argoapp.ApplicationSet, error) {
	if got == nil && len(targets) == 0 {
		return nil, nil
	}
	want, err := r.renderer().ApplicationSet(fvm, project, targets)
	if err != nil {
		return nil, err
	}
	want.Finalizers = []string{delivery.ProtectionFinalizer}
	if got != nil && got.DeletionTimestamp != nil {
		// Deleted by someone else: detach the Applications so their VMs
		// survive, let it go, and recreate it on the next pass.
		return nil, r.releaseApplicationSet(ctx, fvm, got, nil)
	}
	if got != nil && delivery.HoldsRendered(got, want) {
		return got, nil
	}
	if got != nil {
		if got, err = r.fullApplicationSet(ctx, got, &want.Spec); err != nil {
			return nil, err
		}
	}
	switch out, err := r.written.Ensure(ctx, r.Client, want, got); {
	case err != nil:
		return nil, fmt.Errorf("write ApplicationSet %s: %w", klog.KObj(want), err)
	case out == write.Created:
		if meta.IsStatusConditionTrue(fvm.Status.Conditions, fleetv1alpha1.ConditionDelivered) {
			// It was there: someone deleted it.
			r.Recorder.Eventf(fvm, "Warning", "ApplicationSetRecreated", "Recreated ApplicationSet %s, which was deleted", klog.KObj(want))
		}
		return want, nil
	default:
		return got, nil
	}
}

// fullApplicationSet gives the ApplicationSet as read with its spec, for
// write.Ensure to compare with what FleetVM renders: the cache keeps only
// the spec's digest (delivery.TrimApplicationSet). When the digest is that
// of the rendered spec, the cached copy holds it; otherwise the spec
// changed (FleetVM renders another, or someone edited it), and the
// ApplicationSet is read whole from the API server. nil: it is gone.
func (r *Reconciler) fullApplicationSet(ctx context.Context, got *argoapp.ApplicationSet, want *argoapp.ApplicationSetSpec) (*argoapp.ApplicationSet, error) {
	if full, ok := delivery.FullApplicationSet(got, want); ok {
		return full, nil
	}
	reader := r.APIReader
	if reader == nil {
		reader = r.Client
	}
	live := &argoapp.ApplicationSet{}
	if err := reader.Get(ctx, client.ObjectKeyFromObject(got), live); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read ApplicationSet %s: %w", klog.KObj(got), err)
	}
	if live.UID != got.UID {
		// Deleted and made again since the cache saw it: decide from the
		// cache's copy of the new one.
		return nil, apierrors.NewConflict(argoapp.GroupVersion.WithResource("applicationsets").GroupResource(), got.Name,
			fmt.Errorf("the cache holds an older ApplicationSet of that name"))
	}
	return live, nil
}

// releaseApplicationSet lets a deleted ApplicationSet go without taking its
// Applications along: owner references to it are removed first, so the
// garbage collector has nothing to delete. prepare, when not nil, changes
// each Application in the same write (the deletion sets Argo CD's resources
// finalizer as its policy says: one write per Application less).
func (r *Reconciler) releaseApplicationSet(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, appSet *argoapp.ApplicationSet, prepare func(*argoapp.Application)) error {
	apps, err := r.listApplications(ctx, fvm)
	if err != nil {
		return err
	}
	for i := range apps {
		app := &apps[i]
		if _, err := write.Mutate(ctx, r.Client, app, func() {
			app.OwnerReferences = withoutOwner(app.OwnerReferences, appSet.UID)
			if prepare != nil && app.DeletionTimestamp == nil {
				prepare(app)
			}
		}); err != nil {
			return fmt.Errorf("detach Application %s from its ApplicationSet: %w", klog.KObj(app), err)
		}
	}
	// Tested, not locked to the version read: the caller may just have
	// deleted it, which moved its resourceVersion on.
	if _, err := write.RemoveFinalizerTested(ctx, r.Client, appSet, delivery.ProtectionFinalizer); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("release ApplicationSet %s: %w", klog.KObj(appSet), err)
	}
	return nil
}

// setResourcesFinalizer puts Argo CD's resources finalizer on app when its
// deletion must remove the VM from the cluster, and takes it off when the
// VM must stay.
func setResourcesFinalizer(app *argoapp.Application, deleteVM bool) {
	if deleteVM {
		controllerutil.AddFinalizer(app, argoapp.ResourcesFinalizerName)
	} else {
		controllerutil.RemoveFinalizer(app, argoapp.ResourcesFinalizerName)
	}
}

// adoptApplications gives Applications left without an owner (their
// ApplicationSet was deleted and recreated) back to the current one, so
// Argo CD keeps managing them and nothing is recreated.
func (r *Reconciler) adoptApplications(ctx context.Context, appSet *argoapp.ApplicationSet, apps []argoapp.Application) error {
	var errs []error
	for i := range apps {
		app := &apps[i]
		if app.DeletionTimestamp != nil || metav1.GetControllerOf(app) != nil {
			continue
		}
		var refErr error
		if _, err := write.Mutate(ctx, r.Client, app, func() {
			refErr = controllerutil.SetControllerReference(appSet, app, r.Client.Scheme())
		}); err != nil || refErr != nil {
			errs = append(errs, fmt.Errorf("adopt Application %s: %w", klog.KObj(app), errors.Join(refErr, err)))
		}
	}
	return joinErrors(errs)
}

// removeApplication deliberately removes one cluster's Application: with
// deleteVM, Argo CD's resources finalizer is added first so Argo CD deletes
// the VM from the cluster; without, the VM is left running.
//
// The delete names the version whose finalizers FleetVM wrote or read: a
// write since (another controller's, a person's) that took the resources
// finalizer off, or put it on, is refused with 409 Conflict, and the next
// reconcile decides again from the newer Application. Deleting it anyway
// would leave a VM that must go, or remove one that must stay.
func (r *Reconciler) removeApplication(ctx context.Context, app *argoapp.Application, deleteVM bool) error {
	if app.DeletionTimestamp != nil {
		return nil
	}
	setFinalizer := write.RemoveFinalizer
	if deleteVM {
		setFinalizer = write.AddFinalizer
	}
	if _, err := setFinalizer(ctx, r.Client, app, argoapp.ResourcesFinalizerName); err != nil {
		return fmt.Errorf("set finalizers of Application %s: %w", klog.KObj(app), err)
	}
	if err := r.Client.Delete(ctx, app, client.Preconditions{UID: &app.UID, ResourceVersion: &app.ResourceVersion}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Application %s: %w", klog.KObj(app), err)
	}
	return nil
}
