package kubectlfleetvm

import (
	"context"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/move"
	"github.com/fleetvm/fleetvm/pkg/rollout"
)

// rolloutWhy is where each cluster stands in the rollout and why: the
// hub's own rule (rollout.Decide) run on the rollout as the status
// records it, with the clusters' decision groups and the moves under way.
type rolloutWhy struct {
	plan map[string]rollout.ClusterPlan
	// groups are the clusters' decision groups; nil when the strategy
	// reads none or the ManagedClusters could not be read (note says so,
	// and plan is empty).
	groups map[string]rollout.Group
	note   string
}

// explainRollout reads what the rule needs beyond the FleetVirtualMachine:
// its moves under way (in its namespace) and, when the strategy reads
// decision groups, the ManagedClusters' labels and claims (a user who may
// not read them sees no groups, and a note saying so).
func (o *options) explainRollout(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine) (rolloutWhy, error) {
	moves := &fleetv1alpha1.FleetVirtualMachineMoveList{}
	if err := o.client.List(ctx, moves, client.InNamespace(fvm.Namespace)); err != nil {
		return rolloutWhy{}, explainError(err, kindMove, fvm.Namespace, "")
	}
	moving := map[string]bool{}
	for i := range moves.Items {
		m := &moves.Items[i]
		if m.Spec.FleetVirtualMachine == fvm.Name && move.Active(m) {
			moving[m.Spec.From] = true
			if m.Status.To != "" {
				moving[m.Status.To] = true
			}
		}
	}
	var out rolloutWhy
	if readsGroups(fvm) {
		var members []rollout.Member
		for _, c := range activeClusters(fvm) {
			mc := &clusterv1.ManagedCluster{}
			err := o.client.Get(ctx, client.ObjectKey{Name: c.Cluster}, mc)
			switch {
			case apierrors.IsForbidden(err):
				out.note = "decision groups, and why clusters wait, not shown: you may not read ManagedClusters"
			case apierrors.IsNotFound(err):
			case err != nil:
				return rolloutWhy{}, err
			}
			if out.note != "" {
				break
			}
			if err != nil { // not found: the cluster is gone
				mc = nil
			}
			members = append(members, rollout.MemberOf(c.Cluster, mc))
		}
		if out.note != "" {
			// Without the groups the rule would place every cluster in
			// group 0: its reasons would be wrong.
			return out, nil
		}
		groups, err := rollout.Groups(fvm.Spec.Placement.DecisionStrategy, members)
		if err != nil {
			return rolloutWhy{}, err
		}
		out.groups = groups
	}
	out.plan = map[string]rollout.ClusterPlan{}
	for _, p := range rollout.Decide(recordedInput(fvm, moving, out.groups, o.now())).Clusters {
		out.plan[p.Name] = p
	}
	return out, nil
}

// readsGroups tells whether the FleetVirtualMachine's rollout reads
// decision groups: ProgressivePerGroup, mandatory groups, or groups set.
func readsGroups(fvm *fleetv1alpha1.FleetVirtualMachine) bool {
	s := fvm.Spec.Rollout
	switch {
	case s == nil:
		return false
	case fvm.Spec.Placement.DecisionStrategy != nil, s.Type == clusterv1alpha1.ProgressivePerGroup:
		return true
	}
	return s.Progressive != nil && len(s.Progressive.MandatoryDecisionGroups.MandatoryDecisionGroups) > 0
}

// recordedInput is the rule's input as the status records the rollout:
// a cluster without a record runs the latest revision, past its soak; a
// record's state says what its VM last showed (Soaking: ready on its
// revision since readySince; ToApply: ready on the one it is given;
// Failed: a failure on it; Applying, Reverting, TimedOut: not running it
// ready yet).
func recordedInput(fvm *fleetv1alpha1.FleetVirtualMachine, moving map[string]bool, groups map[string]rollout.Group, now time.Time) rollout.Input {
	st := fvm.Status.Rollout
	in := rollout.Input{Strategy: *fvm.Spec.Rollout, Now: now,
		Paused: fvm.Annotations[fleetv1alpha1.AnnotationRolloutPaused] == "true"}
	if st != nil {
		in.Target, in.Previous = st.Revision, st.PreviousRevision
		in.Aborted = fvm.Annotations[fleetv1alpha1.AnnotationRolloutAbort] == strconv.FormatInt(st.Revision, 10)
		in.Failed = st.Phase == fleetv1alpha1.RolloutPhase(rollout.Failed)
	}
	for _, c := range activeClusters(fvm) {
		rc := rollout.Cluster{Name: c.Cluster, Group: groups[c.Cluster], Moving: moving[c.Cluster]}
		ready := func(since time.Time) { rc.Running, rc.Ready, rc.ReadySince = rc.Given, true, since }
		r := c.Rollout
		if r == nil {
			rc.Given = in.Target
			ready(time.Unix(0, 0))
			in.Clusters = append(in.Clusters, rc)
			continue
		}
		rc.Given, rc.Reverting = r.Revision, rollout.State(r.State) == rollout.Reverting
		if r.Since != nil {
			rc.GivenAt = r.Since.Time
		}
		switch rollout.State(r.State) {
		case rollout.ToApply, rollout.Done:
			ready(time.Unix(0, 0))
		case rollout.Soaking:
			var since time.Time
			if r.ReadySince != nil {
				since = r.ReadySince.Time
			}
			ready(since)
		case rollout.ClusterFailed:
			rc.Running, rc.Failure = rc.Given, orUnknown(c.PrintableStatus)
		}
		in.Clusters = append(in.Clusters, rc)
	}
	return in
}
