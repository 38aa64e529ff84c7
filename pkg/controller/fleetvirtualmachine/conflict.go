package fleetvirtualmachine

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/argoapp"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/delivery"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/status"
	"github.com/fleetvm/fleetvm/pkg/vmclaim"
	"github.com/fleetvm/fleetvm/pkg/write"
)

// claimWinner returns the FleetVirtualMachine that delivers fvm's VM when
// it is another one (admission refuses a second claim; two can still race
// past it), nil when fvm delivers it.
func (r *Reconciler) claimWinner(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine) (*fleetv1alpha1.FleetVirtualMachine, error) {
	claimants, err := vmclaim.Claimants(ctx, r.Client, fvm)
	if err != nil {
		return nil, err
	}
	found := false
	for i := range claimants {
		found = found || claimants[i].UID == fvm.UID
	}
	if !found {
		claimants = append(claimants, *fvm)
	}
	w := vmclaim.Winner(claimants)
	if w == nil || w.UID == fvm.UID {
		return nil, nil
	}
	return w, nil
}

// reconcileConflict handles a FleetVirtualMachine that lost its VM's claim:
// it delivers nothing. Anything it created while racing is taken apart
// without deleting a VM (the winner's Applications deliver the same VM):
// its ApplicationSet is released, its Applications deleted without Argo
// CD's resources finalizer, its Placement deleted. The status says why.
func (r *Reconciler) reconcileConflict(ctx context.Context, fvm, before, winner *fleetv1alpha1.FleetVirtualMachine, now metav1.Time) (ctrl.Result, error) {
	var errs []error
	name := delivery.ChildName(client.ObjectKeyFromObject(fvm))
	if obj, err := r.getOwned(ctx, fvm, &argoapp.ApplicationSet{}, name); err != nil {
		errs = append(errs, err)
	} else if obj != nil {
		appSet := obj.(*argoapp.ApplicationSet)
		if appSet.DeletionTimestamp == nil {
			if err := r.Client.Delete(ctx, appSet); client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("delete ApplicationSet %s: %w", klog.KObj(appSet), err))
			}
		}
		errs = append(errs, r.releaseApplicationSet(ctx, fvm, appSet, func(app *argoapp.Application) { setResourcesFinalizer(app, false) }))
	}
	apps, err := r.listApplications(ctx, fvm)
	errs = append(errs, err)
	for i := range apps {
		errs = append(errs, r.removeApplication(ctx, &apps[i], false))
	}
	if obj, err := r.getOwned(ctx, fvm, &clusterv1beta1.Placement{}, name); err != nil {
		errs = append(errs, err)
	} else if obj != nil {
		if err := r.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("delete Placement %s: %w", klog.KObj(obj), err))
		}
	}

	in := status.Inputs{
		Spec: fvm.Spec, Generation: fvm.Generation, GracePeriod: r.Config.GracePeriod, Previous: fvm.Status, Now: now,
		Conflict: client.ObjectKeyFromObject(winner).String(),
	}
	fvm.Status = status.Compute(in)
	if err := r.patchStatusIfChanged(ctx, before, fvm); err != nil && !write.Stale(err) {
		errs = append(errs, err)
	} else if err == nil {
		r.recordTransitions(before, fvm)
	}
	return ctrl.Result{}, errors.Join(errs...)
}
