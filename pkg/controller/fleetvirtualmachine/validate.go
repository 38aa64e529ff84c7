package fleetvirtualmachine

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/validation"
	"github.com/fleetvm/fleetvm/pkg/write"
)

// reconcileInvalid checks the spec against the rules admission checks
// (pkg/validation) and reports whether it breaks one. If it does, the
// reconcile ends here: the Placement, the ApplicationSet and the
// Applications stay as they are, so nothing new is placed or delivered
// and no VM is removed because of it; Ready and Placed say why, with the
// field errors.
func (r *Reconciler) reconcileInvalid(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine) (bool, error) {
	_, errs := validation.FleetVirtualMachine(fvm, r.validationOptions())
	if len(errs) == 0 {
		return false, nil
	}
	before := fvm.DeepCopy()
	invalidStatus(&fvm.Status, fvm.Generation, errs, metav1.NewTime(r.Clock.Now()))
	err := r.patchStatusIfChanged(ctx, before, fvm)
	switch {
	case write.Stale(err):
		return true, nil // the newer object brings the next reconcile
	case err != nil:
		return true, err
	}
	r.recordTransitions(before, fvm)
	return true, nil
}

// validationOptions are the hub settings the rules depend on.
func (r *Reconciler) validationOptions() validation.Options {
	return validation.Options{ImageNamespace: r.Config.ImageNamespace, SharedImageNamespaces: r.Config.SharedImageNamespaces}
}

// invalidStatus sets Ready and Placed False with reason InvalidSpec and
// a bounded message naming the fields and why; the rest of the status
// (where the VMs run, as last seen) is kept.
func invalidStatus(status *fleetv1alpha1.FleetVirtualMachineStatus, generation int64, errs field.ErrorList, now metav1.Time) {
	msg := "the spec breaks a rule admission checks; nothing new is placed or delivered, the VMs already running stay, until it is fixed: " +
		validation.Summary(errs)
	status.ObservedGeneration = generation
	for _, t := range []string{fleetv1alpha1.ConditionReady, fleetv1alpha1.ConditionPlaced} {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{
			Type: t, Status: metav1.ConditionFalse, Reason: fleetv1alpha1.ReasonInvalidSpec, Message: msg,
			ObservedGeneration: generation, LastTransitionTime: now,
		})
	}
}
