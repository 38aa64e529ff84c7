package fleetvirtualmachine

import (
	"context"
	"fmt"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/validation"
)

// deletionPolicyInEffect decides the policy a deletion follows: the one
// recorded in the status when the deletion started, to the end, whatever
// spec.deletionPolicy says since (admission refuses the change, but a
// webhook that is bypassed or set to Ignore lets it through); without a
// record, the spec's, which must then be recorded before the first step.
func deletionPolicyInEffect(fvm *fleetv1alpha1.FleetVirtualMachine) (policy fleetv1alpha1.DeletionPolicy, record bool) {
	return validation.DeletionPolicy(fvm), fvm.Status.DeletionPolicy == ""
}

// deletionPolicy returns whether the deletion removes the VMs (Delete)
// or leaves them (Orphan), recording the policy in the status before the
// deletion's first step: a later change of spec.deletionPolicy is not
// followed. The record is written with the resourceVersion read, so a
// spec changed in between is recorded as changed, before anything acted.
func (r *Reconciler) deletionPolicy(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine) (deleteVMs bool, err error) {
	policy, record := deletionPolicyInEffect(fvm)
	if record {
		before := fvm.DeepCopy()
		fvm.Status.DeletionPolicy = policy
		if err := r.patchStatusIfChanged(ctx, before, fvm); err != nil {
			return false, fmt.Errorf("record the deletion's policy: %w", err)
		}
	}
	return policy == fleetv1alpha1.DeletionPolicyDelete, nil
}

// deletionPolicyNote tells, in the Deleting condition, which policy the
// deletion follows, and that a later change of the spec is not followed.
func deletionPolicyNote(fvm *fleetv1alpha1.FleetVirtualMachine) string {
	policy, _ := deletionPolicyInEffect(fvm)
	note := fmt.Sprintf("deletionPolicy %s, as when the deletion started", policy)
	if want := fvm.Spec.DeletionPolicy; want != "" && want != policy {
		note += fmt.Sprintf("; spec.deletionPolicy %s, set after, is not followed", want)
	}
	return note
}
