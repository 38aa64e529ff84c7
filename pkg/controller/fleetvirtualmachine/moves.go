package fleetvirtualmachine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/move"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/move/runner"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/placement"
	"github.com/fleetvm/fleetvm/pkg/explain"
)

// This file is where the reconcile meets its moves (package move runs
// them: runner.Runner): what it tells the moves of the fleet (the copies,
// the targets a move may take) and where new copies may not go (draining
// clusters).

// IndexDraining indexes ManagedClusters that carry the drain taint.
const IndexDraining = "fleetvm.io/draining"

// Draining tells whether a ManagedCluster carries the drain taint.
func Draining(mc *clusterv1.ManagedCluster) bool {
	return slices.ContainsFunc(mc.Spec.Taints, func(t clusterv1.Taint) bool { return t.Key == fleetv1alpha1.DrainTaintKey })
}

// drainingClusters are the clusters that carry the drain taint.
func (r *Reconciler) drainingClusters(ctx context.Context) (map[string]bool, error) {
	list := &clusterv1.ManagedClusterList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{IndexDraining: "true"}); err != nil {
		return nil, fmt.Errorf("list draining ManagedClusters: %w", err)
	}
	out := map[string]bool{}
	for _, mc := range list.Items {
		out[mc.Name] = true
	}
	return out, nil
}

// stepMoves (phase 1b) runs one step of the FleetVirtualMachine's moves
// (runner.Runner.Step) and writes their status before the decision is
// recorded. It returns false when the reconcile must stop (a move's write
// was refused).
func (r *Reconciler) stepMoves(ctx context.Context, s *scope) bool {
	plan, err := r.moveRunner().Step(ctx, runner.View{
		FVM: s.fvm, Now: s.now.Time, Scheduled: s.obs.Scheduled, Held: anyHold(s.obs.Reports),
		Copies: func() map[string]move.Copy { return r.copies(s) },
		Targets: func(ctx context.Context, to string, copies map[string]move.Copy) ([]string, string, error) {
			return r.pendingTargets(ctx, s, to, copies)
		},
	})
	s.fail(err)
	s.moves = plan
	// A target new to the FleetVirtualMachine is read as any of its
	// clusters: its labels (the environment it is placed for) and sets.
	for _, t := range plan.Targets() {
		if _, ok := s.obs.Facts[t]; !ok {
			s.fail(r.readFacts(ctx, s.obs, t))
		}
	}
	return !plan.Stop
}

// copies is what the hub knows of the VM on each cluster, for the moves.
func (r *Reconciler) copies(s *scope) map[string]move.Copy {
	out := map[string]move.Copy{}
	in := r.decisionInput(s.fvm, s.obs, s.now)
	for c, p := range in.Clusters {
		cp := move.Copy{Present: p.Present(), Removing: p.RemovingSince != nil, Reported: p.Reported}
		if rep := s.obs.Reports[c]; rep != nil {
			cp.PrintableStatus, cp.Ready, cp.RunStrategy = rep.PrintableStatus, rep.Ready, rep.RunStrategy
			cp.Hold, cp.DataVolumes = rep.Hold, rep.DataVolumes
		}
		if mc := s.obs.Facts[c].Cluster; mc != nil {
			cp.Available = meta.IsStatusConditionTrue(mc.Status.Conditions, clusterv1.ManagedClusterConditionAvailable)
		}
		out[c] = cp
	}
	return out
}

// moveTargets are the clusters a moving copy may go to: those the
// scheduler admits for the VM (environment, bound sets, fit, networks)
// where it fits now, hold no copy and are not draining; the one FleetVM
// would place a new copy on first. unscored are the others whose agent
// has not scored the VM's shape yet.
func (r *Reconciler) moveTargets(ctx context.Context, s *scope, copies map[string]move.Copy) (targets, unscored []string, err error) {
	if s.obs.pick == nil {
		return nil, nil, nil
	}
	draining, err := r.drainingClusters(ctx)
	if err != nil {
		return nil, nil, err
	}
	var free []string
	for _, c := range s.obs.Candidates {
		switch {
		case copies[c].Present || draining[c]:
		case s.obs.pick.Fits(c):
			free = append(free, c)
		case s.obs.pick.Unscored != nil && s.obs.pick.Unscored(c):
			unscored = append(unscored, c)
		}
	}
	if len(free) == 0 {
		return nil, unscored, nil
	}
	in := *s.obs.pick
	in.Placed, in.Candidates, in.Desired = nil, free, ptr.To[int32](1)
	best := placement.Pick(in)
	return append(best, slices.DeleteFunc(free, func(c string) bool { return slices.Contains(best, c) })...), unscored, nil
}

// pendingTargets are the targets a move that has not started may take now
// (moveTargets), and what it waits for, rather than fail, when its target
// (spec.to, or any when that is empty) is not among them:
//   - an agent that has not scored the VM's shape yet: its cluster may
//     qualify in a moment (a changed score wakes the move:
//     runner.FleetVMsNotStarted);
//   - the OCM scheduler, for clusters that qualify now but are not in the
//     candidate decision. That decision may predate their fit (an agent
//     scored the shape, or room freed up, after the scheduler decided), and
//     OCM does not decide again on a score its CEL predicate reads: the
//     hub asks it to (s.moveQualifying goes into the reschedule token),
//     and the new decision wakes the move.
func (r *Reconciler) pendingTargets(ctx context.Context, s *scope, to string, copies map[string]move.Copy) (targets []string, waitFor string, err error) {
	targets, unscored, err := r.moveTargets(ctx, s, copies)
	if err != nil {
		return nil, "", err
	}
	switch {
	case to != "" && slices.Contains(targets, to), to == "" && len(targets) > 0:
		return targets, "", nil
	case to != "" && slices.Contains(unscored, to):
		return targets, fmt.Sprintf("the agent of cluster %s to score the VM's shape", to), nil
	case to == "" && len(unscored) > 0:
		return targets, fmt.Sprintf("the agents of clusters %s to score the VM's shape", strings.Join(unscored, ", ")), nil
	}
	qualifying, unscored, err := r.outsideDecision(ctx, s, copies, to)
	if err != nil {
		return nil, "", err
	}
	switch {
	case len(qualifying) > 0:
		s.moveQualifying = qualifying
		names := make([]string, 0, len(qualifying))
		for _, q := range qualifying {
			c, _, _ := strings.Cut(q, "=")
			names = append(names, c)
		}
		return targets, fmt.Sprintf("the OCM scheduler to add %s, where the VM fits now, to its decision", strings.Join(names, ", ")), nil
	case to != "" && slices.Contains(unscored, to):
		// The same words whether or not the decision still lists it.
		return targets, fmt.Sprintf("the agent of cluster %s to score the VM's shape", to), nil
	case len(unscored) > 0:
		return targets, fmt.Sprintf("the agents of clusters %s to score the VM's shape", strings.Join(unscored, ", ")), nil
	}
	return targets, "", nil
}

// outsideDecision looks at the clusters outside the candidate decision,
// without a copy and not draining (only to, when set), by what the
// scheduler reads (as exclusions does): qualifying are those that qualify
// for the VM, each with its fit value as the reschedule token takes it;
// unscored those whose agent has not scored the VM's shape yet.
func (r *Reconciler) outsideDecision(ctx context.Context, s *scope, copies map[string]move.Copy, to string) (qualifying, unscored []string, err error) {
	if s.obs.Candidates == nil || s.obs.pick == nil {
		return nil, nil, nil
	}
	draining, err := r.drainingClusters(ctx)
	if err != nil {
		return nil, nil, err
	}
	in, err := explain.ReadScores(ctx, r.Client, &r.scores, s.fvm, r.Config.EnvironmentLabel)
	if err != nil {
		return nil, nil, fmt.Errorf("explain the placement: %w", err)
	}
	in.Now, in.Decided = s.now.Time, s.obs.Candidates
	verdicts, err := explain.Explain(in)
	if err != nil {
		return nil, nil, err
	}
	fit := fitValues(in, verdicts)
	for _, v := range verdicts {
		c := v.Cluster
		switch {
		case slices.Contains(s.obs.Candidates, c) || copies[c].Present || draining[c] || to != "" && c != to:
		case v.Reason == explain.NotNeeded:
			qualifying = append(qualifying, c+fit[c])
		case (v.Reason == explain.NoRoom || v.Reason == explain.NoAgent) && s.obs.pick.Unscored != nil && s.obs.pick.Unscored(c):
			unscored = append(unscored, c)
		}
	}
	return qualifying, unscored, nil
}

// reported is the hold a cluster's report carries.
func (s *scope) reported(c string) string {
	if rep := s.obs.Reports[c]; rep != nil {
		return rep.Hold
	}
	return ""
}

// noteMoves tells, on the status entry of each move's source, what the
// move does, and on each copy a lost move left frozen, why it is kept.
func (s *scope) noteMoves() {
	notes := s.moves.Notes(s.reported, func(c string) bool {
		p, ok := s.outcome.Clusters[c]
		return ok && p.State == placement.Placed
	})
	for c, note := range notes {
		if p, ok := s.outcome.Clusters[c]; ok {
			p.Reason = note
			s.outcome.Clusters[c] = p
		}
	}
}

// anyHold tells whether a report carries a move's hold.
func anyHold(reports map[string]*fleetv1alpha1.VMState) bool {
	for _, v := range reports {
		if v != nil && v.Hold != "" {
			return true
		}
	}
	return false
}
