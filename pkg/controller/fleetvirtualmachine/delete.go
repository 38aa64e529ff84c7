package fleetvirtualmachine

import (
	"context"
	"fmt"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// reconcileDelete takes a deleted FleetVirtualMachine apart, in an order
// that never loses a VM by accident:
//
//  1. the ApplicationSet goes first, so nothing recreates Applications; its
//     Applications are detached from it before it is released, so the
//     garbage collector deletes none of them;
//  2. each Application is deleted deliberately: with Delete, Argo CD's
//     resources finalizer is added first so Argo CD removes the VM from the
//     cluster; with Orphan, without it, so the VM keeps running;
//  3. once every Application is gone, the Placement, and the shared GitOps
//     objects of cluster sets no other FleetVirtualMachine uses;
//  4. the finalizer.
func (r *Reconciler) reconcileDelete(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(fvm, Finalizer) {
		return ctrl.Result{}, nil
	}
	key := client.ObjectKeyFromObject(fvm)
	name := childName(key)

	appSet := &argov1alpha1.ApplicationSet{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: r.Config.ArgoNamespace, Name: name}, appSet)
	switch {
	case err == nil && isOwnedBy(appSet, fvm):
		if appSet.DeletionTimestamp == nil {
			if err := r.Client.Delete(ctx, appSet); err != nil && !apierrors.IsNotFound(err) {
				return ctrl.Result{}, fmt.Errorf("delete ApplicationSet %s: %w", klog.KObj(appSet), err)
			}
		}
		if err := r.releaseApplicationSet(ctx, fvm, appSet); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, nil // the ApplicationSet's deletion brings us back
	case err != nil && !apierrors.IsNotFound(err):
		return ctrl.Result{}, fmt.Errorf("get ApplicationSet: %w", err)
	}

	apps, err := r.listApplications(ctx, fvm)
	if err != nil {
		return ctrl.Result{}, err
	}
	deleteVMs := fvm.Spec.DeletionPolicy != fleetv1alpha1.DeletionPolicyOrphan
	var errs []error
	for i := range apps {
		if err := r.removeApplication(ctx, &apps[i], deleteVMs); err != nil {
			errs = append(errs, err)
		}
	}
	if err := joinErrors(errs); err != nil {
		return ctrl.Result{}, err
	}
	if len(apps) > 0 {
		// Argo CD removes the VMs, then the Applications; their deletion
		// brings us back.
		return ctrl.Result{}, nil
	}

	p := &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: r.Config.ArgoNamespace, Name: name}}
	if err := r.Client.Delete(ctx, p); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("delete Placement %s: %w", klog.KObj(p), err)
	}
	if err := r.cleanupShared(ctx, fvm); err != nil {
		return ctrl.Result{}, err
	}

	patch := client.MergeFrom(fvm.DeepCopy())
	controllerutil.RemoveFinalizer(fvm, Finalizer)
	if err := r.Client.Patch(ctx, fvm, patch); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
	}
	policy := "their VMs were removed"
	if !deleteVMs {
		policy = "their VMs were left running (deletionPolicy Orphan)"
	}
	r.Recorder.Eventf(fvm, "Normal", "Deleted", "Removed the Placement and ApplicationSet; %s", policy)
	return ctrl.Result{}, nil
}

// cleanupShared removes the shared Placement, GitOpsCluster and the
// ManagedClusterSetBinding FleetVM created for each cluster set this
// FleetVirtualMachine used, when no other live FleetVirtualMachine uses it.
func (r *Reconciler) cleanupShared(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine) error {
	var errs []error
	for _, set := range clusterSets(fvm) {
		var users fleetv1alpha1.FleetVirtualMachineList
		if err := r.Client.List(ctx, &users, client.MatchingFields{IndexClusterSet: set}); err != nil {
			errs = append(errs, fmt.Errorf("list FleetVirtualMachines of cluster set %s: %w", set, err))
			continue
		}
		inUse := false
		for i := range users.Items {
			u := &users.Items[i]
			if u.UID != fvm.UID && u.DeletionTimestamp == nil {
				inUse = true
				break
			}
		}
		if inUse {
			continue
		}
		name := sharedName(set)
		g := &unstructured.Unstructured{}
		g.SetGroupVersionKind(gitOpsClusterGVK)
		g.SetNamespace(r.Config.ArgoNamespace)
		g.SetName(name)
		shared := []client.Object{
			g,
			&clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: r.Config.ArgoNamespace, Name: name}},
		}
		binding := &clusterv1beta2.ManagedClusterSetBinding{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: r.Config.ArgoNamespace, Name: set}, binding); err == nil &&
			binding.Labels[fleetv1alpha1.LabelPartOf] == fleetv1alpha1.PartOfValue {
			// Only a binding FleetVM created; one a user made stays.
			shared = append(shared, binding)
		}
		for _, obj := range shared {
			if err := r.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("delete %T %s: %w", obj, klog.KObj(obj), err))
			}
		}
	}
	return joinErrors(errs)
}
