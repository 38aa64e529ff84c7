package fleetvirtualmachine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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
	"github.com/fleetvm/fleetvm/pkg/argoapp"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/delivery"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/placement"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/status"
	"github.com/fleetvm/fleetvm/pkg/write"
)

// reconcileDelete takes a deleted FleetVirtualMachine apart, in an order
// that never loses a VM by accident:
//
//  1. the ApplicationSet goes first, so nothing recreates Applications; its
//     Applications are detached from it before it is released, so the
//     garbage collector deletes none of them;
//  2. each Application is deleted deliberately: with Delete, Argo CD's
//     resources finalizer is added first so Argo CD removes the VM from the
//     cluster (not while Argo CD reports the Application invalid: it would
//     drop the finalizer and leave the VM); with Orphan, without it, so the
//     VM keeps running;
//  3. with Delete, once every Application is gone, the agents must no
//     longer report the VM: a VM still reported was not removed, and the
//     status says where;
//  4. the Placement, and the shared GitOps objects of cluster sets no other
//     FleetVirtualMachine uses; every object is checked for its owner
//     before it is deleted;
//  5. the finalizer.
//
// While it waits, the Ready condition (reason Deleting) says on what.
func (r *Reconciler) reconcileDelete(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine) (ctrl.Result, error) {
	r.alarms.set(client.ObjectKeyFromObject(fvm), 0)
	if !controllerutil.ContainsFinalizer(fvm, fleetv1alpha1.FleetVirtualMachineFinalizer) {
		return ctrl.Result{}, nil
	}
	name := delivery.ChildName(client.ObjectKeyFromObject(fvm))
	deleteVMs, err := r.deletionPolicy(ctx, fvm) // deletionpolicy.go: the policy it started with, to the end
	if err != nil {
		return ctrl.Result{}, err
	}

	obj, err := r.getOwned(ctx, fvm, &argoapp.ApplicationSet{}, name)
	if err == nil && obj == nil {
		// The cache may not show yet an ApplicationSet the reconcile
		// before this deletion created: left behind, it would deliver the
		// VM with no FleetVirtualMachine. Only the API server's word ends
		// the deletion.
		obj, err = r.getOwnedFrom(ctx, r.reader(), fvm, &argoapp.ApplicationSet{}, name)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if obj != nil {
		appSet := obj.(*argoapp.ApplicationSet)
		if appSet.DeletionTimestamp == nil {
			if err := r.Client.Delete(ctx, appSet); err != nil && !apierrors.IsNotFound(err) {
				return ctrl.Result{}, fmt.Errorf("delete ApplicationSet %s: %w", klog.KObj(appSet), err)
			}
		}
		// Each Application gets the finalizer its removal needs in the
		// write that detaches it, unless Argo CD reports it invalid (step
		// 2 waits for that to clear).
		prepare := func(app *argoapp.Application) {
			if !deleteVMs || delivery.RemovalBlocked(app) == "" {
				setResourcesFinalizer(app, deleteVMs)
			}
		}
		return ctrl.Result{}, r.releaseApplicationSet(ctx, fvm, appSet, prepare) // its deletion brings us back
	}

	apps, err := r.listApplications(ctx, fvm)
	if err != nil {
		return ctrl.Result{}, err
	}
	var errs []error
	var waiting []string
	for i := range apps {
		app := &apps[i]
		cluster := app.Label(fleetv1alpha1.LabelCluster)
		if why := delivery.RemovalBlocked(app); deleteVMs && why != "" && app.DeletionTimestamp == nil {
			waiting = append(waiting, fmt.Sprintf("%s: %s", cluster, why))
			continue
		}
		if err := r.removeApplication(ctx, app, deleteVMs); err != nil {
			errs = append(errs, err)
		}
		waiting = append(waiting, cluster+": Argo CD is deleting the Application")
	}
	if len(waiting) == 0 && deleteVMs {
		// Argo CD said it deleted the VMs; the agents confirm it.
		reported, err := r.stillReported(ctx, fvm)
		if err != nil {
			return ctrl.Result{}, err
		}
		for _, c := range reported {
			waiting = append(waiting, c+": the cluster's agent still reports the VM (removal not confirmed: remove the VM on that cluster, or, if the cluster is gone for good, its VMReport "+c+"/"+reportName(fvm)+" on the hub)")
		}
	}
	if len(errs) > 0 || len(waiting) > 0 {
		msg := "waiting to remove the VMs (" + deletionPolicyNote(fvm) + "): " + strings.Join(waiting[:min(len(waiting), 10)], "; ")
		if !deleteVMs {
			msg = "waiting for Argo CD to delete the Applications (the VMs stay: " + deletionPolicyNote(fvm) + ")"
		}
		r.setDeletingCondition(ctx, fvm, msg)
		if len(errs) > 0 {
			// A refused delete (write.Stale) is retried from the newer
			// Application, without backoff.
			return ctrl.Result{}, errors.Join(errs...)
		}
		// Argo CD's deletions and the agents' reports bring us back.
		return ctrl.Result{}, nil
	}

	if obj, err := r.getOwned(ctx, fvm, &clusterv1beta1.Placement{}, name); err != nil {
		return ctrl.Result{}, err
	} else if obj != nil {
		if err := r.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("delete Placement %s: %w", klog.KObj(obj), err)
		}
	}
	if fvm.Status.Placement != nil {
		if err := r.releaseCandidates(ctx, fvm, fvm.Status.Placement.Name); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.cleanupShared(ctx, placement.ClusterSets(fvm.Spec), fvm.UID); err != nil {
		return ctrl.Result{}, err
	}
	// Applications still running under the project (being deleted by Argo
	// CD) hold it: the sweep once this FleetVirtualMachine is gone looks
	// again.
	if _, err := r.cleanupTenant(ctx, fvm.Namespace, fvm.UID); err != nil {
		return ctrl.Result{}, err
	}

	if _, err := write.RemoveFinalizer(ctx, r.Client, fvm, fleetv1alpha1.FleetVirtualMachineFinalizer); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
	}
	policy := "their VMs were removed"
	if !deleteVMs {
		policy = "their VMs were left running (deletionPolicy Orphan)"
	}
	r.Recorder.Eventf(fvm, "Normal", "Deleted", "Removed the Placement and ApplicationSet; %s", policy)
	return ctrl.Result{}, nil
}

// stillReported lists the clusters whose agent still reports a VM
// labelled with the FleetVirtualMachine, wherever it runs (the status may
// not know every copy).
func (r *Reconciler) stillReported(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine) ([]string, error) {
	var list fleetv1alpha1.VMReportList
	if err := r.Client.List(ctx, &list, client.MatchingFields{IndexReport: client.ObjectKeyFromObject(fvm).String()}); err != nil {
		return nil, fmt.Errorf("list VMReports of %s: %w", klog.KObj(fvm), err)
	}
	var out []string
	for _, report := range list.Items {
		if reportOn(&report, fvm) && len(report.Spec.VMs) > 0 {
			out = append(out, report.Namespace)
		}
	}
	slices.Sort(out)
	return out, nil
}

// setDeletingCondition shows what a deletion waits for.
func (r *Reconciler) setDeletingCondition(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, msg string) {
	before := fvm.DeepCopy()
	meta.SetStatusCondition(&fvm.Status.Conditions, metav1.Condition{
		Type: fleetv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: fleetv1alpha1.ReasonDeleting,
		Message: status.Truncate(msg, status.MaxConditionMessage), ObservedGeneration: fvm.Generation, LastTransitionTime: metav1.NewTime(r.Clock.Now()),
	})
	if err := r.patchStatusIfChanged(ctx, before, fvm); err != nil && !write.Stale(err) && !apierrors.IsNotFound(err) {
		r.Recorder.Eventf(fvm, "Warning", "StatusNotWritten", "could not write the deletion's progress: %v", err)
	}
}

// cleanupShared removes the shared Placement, GitOpsCluster and the
// ManagedClusterSetBinding FleetVM created for each of the cluster sets
// when no FleetVirtualMachine but the one of UID self uses it, being
// deleted or not: one being deleted still has Applications that need the
// set's Argo CD cluster secrets to remove their VMs. Only objects that
// carry FleetVM's labels for that set are deleted.
func (r *Reconciler) cleanupShared(ctx context.Context, sets []string, self types.UID) error {
	var errs []error
	for _, set := range sets {
		// Two at most, not copied, as cleanupTenant reads its namespace.
		var users fleetv1alpha1.FleetVirtualMachineList
		if err := r.Client.List(ctx, &users, client.MatchingFields{IndexClusterSet: set}, client.Limit(2), client.UnsafeDisableDeepCopy); err != nil {
			errs = append(errs, fmt.Errorf("list FleetVirtualMachines of cluster set %s: %w", set, err))
			continue
		}
		if slices.ContainsFunc(users.Items, func(u fleetv1alpha1.FleetVirtualMachine) bool { return u.UID != self }) {
			continue
		}
		name := delivery.SharedName(set)
		g := &unstructured.Unstructured{}
		g.SetGroupVersionKind(gitOpsClusterGVK)
		candidates := []client.Object{g, &clusterv1beta1.Placement{}}
		for _, obj := range candidates {
			err := r.Client.Get(ctx, types.NamespacedName{Namespace: r.Config.ArgoNamespace, Name: name}, obj)
			switch {
			case apierrors.IsNotFound(err):
				continue
			case err != nil:
				errs = append(errs, fmt.Errorf("get %s/%s: %w", r.Config.ArgoNamespace, name, err))
				continue
			case obj.GetLabels()[delivery.LabelClusterSet] != set || obj.GetLabels()[fleetv1alpha1.LabelPartOf] != fleetv1alpha1.PartOfValue:
				continue // not FleetVM's: left alone
			}
			if err := r.deletions.Delete(ctx, r.Client, obj); err != nil {
				errs = append(errs, fmt.Errorf("delete %s: %w", klog.KObj(obj), err))
			}
		}
		binding := &clusterv1beta2.ManagedClusterSetBinding{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: r.Config.ArgoNamespace, Name: set}, binding); err == nil &&
			binding.Labels[fleetv1alpha1.LabelPartOf] == fleetv1alpha1.PartOfValue {
			// Only a binding FleetVM created; one a user made stays.
			if err := r.deletions.Delete(ctx, r.Client, binding); err != nil {
				errs = append(errs, fmt.Errorf("delete %s: %w", klog.KObj(binding), err))
			}
		}
	}
	return errors.Join(errs...)
}

// sweepReleased removes, once a FleetVirtualMachine is gone, the tenant
// objects of its namespace and the shared objects of cluster sets that no
// FleetVirtualMachine uses any more. Each deleted FleetVirtualMachine
// releases them itself when it is the last user; this catches the ones
// deleted together (kubectl delete --all, a namespace deleted), each of
// which saw the others still there.
func (r *Reconciler) sweepReleased(ctx context.Context, namespace string) (ctrl.Result, error) {
	var errs []error
	var wait ctrl.Result
	switch requeue, err := r.cleanupTenant(ctx, namespace, ""); {
	case err != nil:
		errs = append(errs, err)
	case requeue:
		wait.RequeueAfter = sweepRetry
	}
	var shared unstructured.UnstructuredList
	shared.SetGroupVersionKind(gitOpsClusterGVK.GroupVersion().WithKind(gitOpsClusterGVK.Kind + "List"))
	if err := r.Client.List(ctx, &shared, client.InNamespace(r.Config.ArgoNamespace),
		client.MatchingLabels{fleetv1alpha1.LabelPartOf: fleetv1alpha1.PartOfValue}); err != nil {
		return wait, errors.Join(append(errs, fmt.Errorf("list GitOpsClusters: %w", err))...)
	}
	var sets []string
	for _, g := range shared.Items {
		if set := g.GetLabels()[delivery.LabelClusterSet]; set != "" {
			sets = append(sets, set)
		}
	}
	if err := r.cleanupShared(ctx, sets, ""); err != nil {
		errs = append(errs, err)
	}
	return wait, errors.Join(errs...)
}

// sweepRetry is how soon a sweep looks again at tenant objects that
// Applications still use (Argo CD deleting them).
const sweepRetry = 10 * time.Second

// releaseCandidates deletes a candidate Placement the FleetVirtualMachine
// no longer uses (it is deleted, or its intent changed) when no other live
// FleetVirtualMachine's status names it. A FleetVirtualMachine that starts
// using it at the same moment recreates it on its next reconcile; losing
// a Placement never removes a VM (placement.Decide).
func (r *Reconciler) releaseCandidates(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, name string) error {
	if !strings.HasPrefix(name, CandidatePlacementPrefix) {
		return nil
	}
	// The index holds only users not being deleted (fvm is), so one is
	// enough to keep it. Not copied: read only. Before, every user was
	// read (copied into the list) to skip those being deleted: each of a
	// namespace of 5,000 deleted at once read the 5,000.
	var users fleetv1alpha1.FleetVirtualMachineList
	if err := r.Client.List(ctx, &users, client.MatchingFields{IndexStatusPlacement: name}, client.Limit(2), client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("list FleetVirtualMachines of Placement %s: %w", name, err)
	}
	for i := range users.Items {
		if u := &users.Items[i]; u.UID != fvm.UID && u.DeletionTimestamp == nil {
			return nil
		}
	}
	p := &clusterv1beta1.Placement{}
	switch err := r.Client.Get(ctx, types.NamespacedName{Namespace: r.Config.ArgoNamespace, Name: name}, p); {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("get Placement %s/%s: %w", r.Config.ArgoNamespace, name, err)
	case !isCandidatePlacement(p):
		return nil // not FleetVM's: left alone
	}
	// The version read: one changed since (the scheduler's status, the
	// reschedule token of a FleetVirtualMachine that started using it, or
	// a cache behind) is refused, and the retry looks at its users again.
	// Ignoring the refusal would leave the Placement, and its decision,
	// for good.
	if err := r.Client.Delete(ctx, p, client.Preconditions{UID: &p.UID, ResourceVersion: &p.ResourceVersion}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Placement %s: %w", klog.KObj(p), err)
	}
	return nil
}
