package fleetvirtualmachine

import (
	"context"
	"fmt"
	"maps"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/consolelink"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/delivery"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/placement"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/status"
	"github.com/fleetvm/fleetvm/pkg/write"
)

// readClusterState turns what observe read into the status inputs of the
// clusters the outcome lists.
func (r *Reconciler) readClusterState(obs *observation, in *status.Inputs) {
	in.Apps = map[string]status.AppState{}
	for c, app := range obs.Apps {
		in.Apps[c] = delivery.StateOf(app)
	}
	in.Clusters = map[string]status.ClusterInfo{}
	in.Reports = map[string]*fleetv1alpha1.VMState{}
	for c := range in.Outcome.Clusters {
		if mc := obs.Facts[c].Cluster; mc != nil {
			info := status.ClusterInfo{Environment: mc.Labels[r.Config.EnvironmentLabel], Available: metav1.ConditionUnknown,
				Console: consolelink.Console(mc.Status.ClusterClaims)}
			if cond := meta.FindStatusCondition(mc.Status.Conditions, clusterv1.ManagedClusterConditionAvailable); cond != nil {
				info.Available = cond.Status
			}
			in.Clusters[c] = info
		}
		if rep, ok := obs.Reports[c]; ok {
			in.Reports[c] = rep
		}
	}
}

// reportDeliveryError shows an ApplicationSet write that failed after the
// status was recorded: Delivered turns False with the error.
func (r *Reconciler) reportDeliveryError(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, err error) {
	before := fvm.DeepCopy()
	meta.SetStatusCondition(&fvm.Status.Conditions, metav1.Condition{
		Type: fleetv1alpha1.ConditionDelivered, Status: metav1.ConditionFalse, Reason: fleetv1alpha1.ReasonDeliveryFailed,
		Message: status.Truncate(err.Error(), status.MaxErrorInMessage), ObservedGeneration: fvm.Generation, LastTransitionTime: metav1.NewTime(r.Clock.Now()),
	})
	if werr := r.patchStatusIfChanged(ctx, before, fvm); werr != nil && !write.Stale(werr) {
		log.FromContext(ctx).Error(werr, "report delivery error in status")
	}
}

// recordClusterChanges emits an event when a cluster starts leaving, its
// VM's removal starts, or a removal is confirmed.
func (r *Reconciler) recordClusterChanges(fvm *fleetv1alpha1.FleetVirtualMachine, prev fleetv1alpha1.FleetVirtualMachineStatus, outcome placement.Outcome) {
	was := map[string]fleetv1alpha1.ClusterStatus{}
	for _, c := range prev.Clusters {
		was[c.Cluster] = c
	}
	for _, c := range slices.Sorted(maps.Keys(outcome.Clusters)) {
		plan, old := outcome.Clusters[c], was[c]
		switch {
		case plan.State == placement.Leaving && old.LeavingSince == nil:
			r.Recorder.Eventf(fvm, "Normal", "ClusterLeaving",
				"Cluster %s no longer qualifies (%s); its VM is removed if it does not qualify again within %s", c, plan.Reason, r.Config.GracePeriod)
		case plan.State == placement.Removing && old.RemovingSince == nil:
			r.Recorder.Eventf(fvm, "Normal", "ClusterRemoving",
				"Removing the VM from cluster %s: it did not qualify for %s (%s)", c, r.Config.GracePeriod, plan.Reason)
		}
	}
	for _, c := range outcome.Dropped {
		if _, ok := was[c]; ok {
			r.Recorder.Eventf(fvm, "Normal", "ClusterRemoved", "The VM is gone from cluster %s", c)
		}
	}
}

// readDiskImages reads the FleetDiskImages the VM boots from.
func (r *Reconciler) readDiskImages(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, in *status.Inputs) error {
	in.Images = map[string]*fleetv1alpha1.FleetDiskImage{}
	var errs []error
	for _, d := range fvm.Spec.DiskImages {
		fdi := &fleetv1alpha1.FleetDiskImage{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: fvm.Namespace, Name: d.Name}, fdi)
		switch {
		case apierrors.IsNotFound(err):
			in.Images[d.Name] = nil
		case err != nil:
			errs = append(errs, fmt.Errorf("get FleetDiskImage %s/%s: %w", fvm.Namespace, d.Name, err))
		default:
			in.Images[d.Name] = fdi
		}
	}
	return joinErrors(errs)
}

// patchStatusIfChanged writes the status only when it differs: a reconcile
// that finds nothing new issues no write.
func (r *Reconciler) patchStatusIfChanged(ctx context.Context, before, fvm *fleetv1alpha1.FleetVirtualMachine) error {
	written, err := write.Status(ctx, r.Client, before, fvm)
	if err != nil {
		return fmt.Errorf("write status of %s: %w", klog.KObj(fvm), err)
	}
	if written {
		r.expect.Wrote(fvm)
	}
	return nil
}

// recordTransitions emits an event for the transitions an operator acts
// on, not for every step of a rollout: Ready becoming True, or leaving
// True; Placed or Delivered turning False (or False for another reason),
// and turning True again after that. A FleetVirtualMachine created and
// rolled out without trouble has one event, Ready.
func (r *Reconciler) recordTransitions(before, after *fleetv1alpha1.FleetVirtualMachine) {
	for _, t := range []string{fleetv1alpha1.ConditionPlaced, fleetv1alpha1.ConditionDelivered, fleetv1alpha1.ConditionReady} {
		old := meta.FindStatusCondition(before.Status.Conditions, t)
		cur := meta.FindStatusCondition(after.Status.Conditions, t)
		if kind, ok := transitionEvent(t, old, cur); ok {
			r.Recorder.Event(after, kind, cur.Reason, cur.Message)
		}
	}
	if kind, reason, msg, ok := rolloutEvent(before.Status.Rollout, after.Status.Rollout); ok {
		r.Recorder.Event(after, kind, reason, msg)
	}
}

// rolloutEvent says whether the rollout's phase or revision changed, and
// the event that tells it: Rollout<Phase>, a Warning when it failed.
func rolloutEvent(old, cur *fleetv1alpha1.RolloutStatus) (kind, reason, msg string, ok bool) {
	if cur == nil || (old != nil && old.Revision == cur.Revision && old.Phase == cur.Phase) {
		return "", "", "", false
	}
	kind = "Normal"
	if cur.Phase == fleetv1alpha1.RolloutPhase("Failed") {
		kind = "Warning"
	}
	msg = fmt.Sprintf("revision %d (previous %d): %s", cur.Revision, cur.PreviousRevision, cur.Phase)
	if cur.Message != "" {
		msg += ": " + cur.Message
	}
	return kind, "Rollout" + string(cur.Phase), msg, true
}

// transitionEvent says whether a condition's change is worth an event,
// and its type.
func transitionEvent(condition string, old, cur *metav1.Condition) (string, bool) {
	if cur == nil || (old != nil && old.Status == cur.Status && old.Reason == cur.Reason) {
		return "", false
	}
	was := metav1.ConditionUnknown
	if old != nil {
		was = old.Status
	}
	if condition == fleetv1alpha1.ConditionReady {
		switch {
		case cur.Status == metav1.ConditionTrue && was != metav1.ConditionTrue:
			return "Normal", true
		case cur.Status != metav1.ConditionTrue && was == metav1.ConditionTrue:
			return "Warning", true
		}
		return "", false
	}
	// Waiting for Argo CD to create the Applications is a step of a
	// rollout; losing them once delivered is not.
	rollingOut := func(c *metav1.Condition) bool {
		return c != nil && c.Reason == fleetv1alpha1.ReasonApplicationsMissing
	}
	switch {
	case cur.Status == metav1.ConditionFalse && rollingOut(cur) && was != metav1.ConditionTrue:
		return "", false
	case cur.Status == metav1.ConditionFalse:
		return "Warning", true
	case cur.Status == metav1.ConditionTrue && was == metav1.ConditionFalse && !rollingOut(old):
		return "Normal", true
	}
	return "", false
}
