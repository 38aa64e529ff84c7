package capacity

import (
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/vmtemplate"
)

// ShapeOf returns the shape of a FleetVirtualMachine's VM: for an inline VM,
// its CPU, memory and Multus networks plus spec.placement.requiredNetworks;
// for a VM from git, which the hub cannot read, only the required
// networks (none: no shape, nothing to fit).
func ShapeOf(fvm *fleetv1alpha1.FleetVirtualMachine) (Shape, bool) {
	if fvm.DeletionTimestamp != nil {
		return Shape{}, false
	}
	required := fvm.Spec.Placement.RequiredNetworks
	if fvm.Spec.Template == nil {
		if len(required) == 0 {
			return Shape{}, false
		}
		return Shape{Networks: Networks(fvm.Namespace, required...)}, true
	}
	vm, errs := vmtemplate.Decode(fvm.Spec.Template.Raw, field.NewPath("spec", "template"))
	if vm == nil || len(errs) > 0 {
		return Shape{}, false
	}
	mem, ok := vmtemplate.Memory(vm)
	if !ok {
		return Shape{}, false
	}
	return Shape{
		CPU: vmtemplate.CPU(vm), Memory: mem,
		Networks: Networks(fvm.Namespace, append(vmtemplate.Networks(vm), required...)...),
	}, true
}

// ScoreValues returns the values of a fleetvm-capacity score by name; nil
// for no score. It reads the score whatever its validUntil, as OCM's CEL
// scores() does: the hub's pick reads ValidScoreValues.
func ScoreValues(score *clusterv1alpha1.AddOnPlacementScore) map[string]int32 {
	if score == nil {
		return nil
	}
	out := make(map[string]int32, len(score.Status.Scores))
	for _, s := range score.Status.Scores {
		out[s.Name] = s.Value
	}
	return out
}

// Expired tells whether a score's validUntil has come by now: the agent
// stopped renewing it (it is gone, or cannot reach the hub), so its
// values say nothing about the cluster any more. A score without
// validUntil never expires.
func Expired(score *clusterv1alpha1.AddOnPlacementScore, now time.Time) bool {
	return score != nil && score.Status.ValidUntil != nil && !now.Before(score.Status.ValidUntil.Time)
}

// ValidScoreValues is ScoreValues for a score that has not expired by now,
// and nil (no score: nothing fits) for one that has.
func ValidScoreValues(score *clusterv1alpha1.AddOnPlacementScore, now time.Time) map[string]int32 {
	if Expired(score, now) {
		return nil
	}
	return ScoreValues(score)
}
