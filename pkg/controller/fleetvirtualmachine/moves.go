package fleetvirtualmachine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/delivery"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/move"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/placement"
	"github.com/fleetvm/fleetvm/pkg/explain"
	"github.com/fleetvm/fleetvm/pkg/write"
)

// This file runs the FleetVirtualMachineMoves of a FleetVirtualMachine
// (move.Step decides each step) and keeps new copies off draining
// clusters.

// +kubebuilder:rbac:groups=fleetvm.io,resources=fleetvirtualmachinemoves,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=fleetvm.io,resources=fleetvirtualmachinemoves/status,verbs=get;update;patch

const (
	// IndexMoveFleetVM indexes FleetVirtualMachineMoves by the
	// FleetVirtualMachine they move.
	IndexMoveFleetVM = "fleetvm.io/move-fleetvm"
	// IndexDraining indexes ManagedClusters that carry the drain taint.
	IndexDraining = "fleetvm.io/draining"
)

// Draining tells whether a ManagedCluster carries the drain taint.
func Draining(mc *clusterv1.ManagedCluster) bool {
	return slices.ContainsFunc(mc.Spec.Taints, func(t clusterv1.Taint) bool { return t.Key == fleetv1alpha1.DrainTaintKey })
}

// stepped is one move and what its step decided.
type stepped struct {
	move *fleetv1alpha1.FleetVirtualMachineMove
	out  move.Output
	// imp is what the target's VM imports (Cold; nil until the export
	// serves).
	imp *delivery.Import
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
// and writes their status before the decision is recorded: a move's
// status is its memory (the target it chose), kept first so a reconcile
// that stops after it does not choose again. It returns false when the
// reconcile must stop (a move's write was refused).
func (r *Reconciler) stepMoves(ctx context.Context, s *scope) bool {
	list := &fleetv1alpha1.FleetVirtualMachineMoveList{}
	if err := r.Client.List(ctx, list, client.InNamespace(s.fvm.Namespace), client.MatchingFields{IndexMoveFleetVM: s.fvm.Name}); err != nil {
		s.fail(fmt.Errorf("list FleetVirtualMachineMoves: %w", err))
		return true
	}
	moves := make([]*fleetv1alpha1.FleetVirtualMachineMove, 0, len(list.Items))
	for i := range list.Items {
		m := &list.Items[i]
		if !move.Active(m) {
			// An ended move needs no holding any more.
			s.fail(r.releaseMove(ctx, m))
			continue
		}
		// A move is held from its first step until it ended: deleting it
		// then rolls it back, or finishes it, first.
		if m.DeletionTimestamp == nil {
			if _, err := write.AddFinalizer(ctx, r.Client, m, fleetv1alpha1.MoveFinalizer); err != nil {
				if !apierrors.IsNotFound(err) && !write.Stale(err) {
					s.fail(fmt.Errorf("add finalizer to FleetVirtualMachineMove %s: %w", m.Name, err))
				}
				return false
			}
		}
		moves = append(moves, m)
	}
	// Copies a move the hub no longer has held stay as they are (only a
	// reported hold can make one: the rest of the fleet skips this).
	var copies map[string]move.Copy
	if len(moves) > 0 || anyHold(s.obs.Reports) {
		active := make([]types.UID, 0, len(moves))
		for _, m := range moves {
			active = append(active, m.UID)
		}
		copies = r.copies(s)
		s.frozen = move.Frozen(copies, active)
	}
	if len(moves) == 0 {
		return true
	}
	// One move of a VM at a time: the one started first, else the oldest.
	slices.SortFunc(moves, func(a, b *fleetv1alpha1.FleetVirtualMachineMove) int {
		if sa, sb := move.Started(a), move.Started(b); sa != sb {
			return boolFirst(sa, sb)
		}
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	in := move.Input{Now: s.now.Time, RunStrategy: s.fvm.Spec.RunStrategy, Copies: copies, Deleting: s.fvm.DeletionTimestamp != nil}
	for i, m := range moves {
		in.Move = m
		in.Deleted = m.DeletionTimestamp != nil
		in.Busy, in.WaitFor = "", ""
		if i > 0 {
			in.Busy = moves[0].Name
		}
		in.Method, in.Refused = move.MethodFor(s.fvm, m.Spec.Method)
		if i == 0 && !move.Started(m) && !s.obs.Scheduled {
			// Its target is chosen from the scheduler's current answer.
			in.WaitFor = "the OCM scheduler's decision for the FleetVirtualMachine's placement"
		}
		if i == 0 && !move.Started(m) && in.WaitFor == "" {
			var err error
			if in.Targets, in.WaitFor, err = r.pendingTargets(ctx, s, m.Spec.To, in.Copies); err != nil {
				s.fail(err)
				return true
			}
		}
		var imp *delivery.Import
		in.Export, in.Migration = move.Export{}, move.Migration{}
		if m.Status.Method == fleetv1alpha1.MoveMethodCold && move.Started(m) {
			var err error
			if in.Export, imp, err = r.readExport(ctx, s.fvm, m); err != nil {
				s.fail(err)
				return true
			}
		}
		if m.Status.Method == fleetv1alpha1.MoveMethodLive && move.Started(m) {
			w, err := r.migrationWorks(ctx, m)
			if err != nil {
				s.fail(err)
				return true
			}
			in.Migration = move.ReadMigration(w.receive, w.send)
		}
		if !move.Started(m) {
			// The source, and the target the move would take.
			clusters := []string{m.Spec.From, m.Spec.To}
			if len(in.Targets) > 0 {
				clusters = append(clusters, in.Targets[0])
			}
			live, err := r.liveClusters(ctx, clusters)
			if err != nil {
				s.fail(err)
				return true
			}
			in.Live = live
		}
		out := move.Step(in)
		if !equality.Semantic.DeepEqual(out.Status, m.Status) {
			before := m.DeepCopy()
			m.Status = out.Status
			if _, err := write.Status(ctx, r.Client, before, m); err != nil {
				if !write.Stale(err) {
					s.fail(fmt.Errorf("write status of FleetVirtualMachineMove %s: %w", m.Name, err))
				}
				return false
			}
			r.recordMove(s.fvm, m, before.Status)
			if !move.Active(m) {
				s.fail(r.releaseMove(ctx, m))
			}
		}
		if move.Active(m) {
			s.moves = append(s.moves, stepped{move: m, out: out, imp: imp})
		}
		// A target new to the FleetVirtualMachine is read as any of its
		// clusters: its labels (the environment it is placed for) and sets.
		if t := out.Target; t != "" {
			if _, ok := s.obs.Facts[t]; !ok {
				s.fail(r.readFacts(ctx, s.obs, t))
			}
		}
	}
	return true
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
//     fleetVMsWithMovesNotStarted);
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
	in, err := explain.Read(ctx, r.Client, s.fvm, r.Config.EnvironmentLabel)
	if err != nil {
		return nil, nil, fmt.Errorf("explain the placement: %w", err)
	}
	in.Now, in.Decided = s.now.Time, s.obs.Candidates
	verdicts, err := explain.Explain(in)
	if err != nil {
		return nil, nil, err
	}
	fit := fitValues(in)
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

// decisionMoves are what the moves ask of the decision.
func (s *scope) decisionMoves() []placement.Move {
	var out []placement.Move
	for _, st := range s.moves {
		if st.out.Target == "" {
			continue
		}
		out = append(out, placement.Move{Name: st.move.Name, From: st.move.Spec.From, To: st.out.Target,
			RemoveFrom: st.out.RemoveFrom, RemoveTo: st.out.RemoveTo})
	}
	return out
}

// imports are the clusters whose VM a Cold move renders importing its
// disks from the source's export.
func (s *scope) imports() map[string]*delivery.Import {
	out := map[string]*delivery.Import{}
	for _, st := range s.moves {
		switch {
		case st.out.Import && st.imp != nil:
			out[st.out.Target] = st.imp
		case st.out.Blank:
			out[st.out.Target] = &delivery.Import{Blank: true}
		}
	}
	return out
}

// importing are the targets of Cold moves that export now and deliver
// nothing there yet: the import's Secret needs the VM's namespace first.
func (s *scope) importing() []string {
	var out []string
	for _, st := range s.moves {
		if to := st.move.Status.To; st.out.Export && to != "" && st.out.Target == "" {
			out = append(out, to)
		}
	}
	return out
}

// hold is how a move holds a cluster's VM: its run strategy, and the
// move's hold it is delivered under (move.Output.Hold).
type hold struct {
	RunStrategy fleetv1alpha1.RunStrategy
	Hold        string
}

// held are the clusters whose VM a move holds in a run strategy of its
// own: stopped (Halted), or for a live migration Manual (the source) and
// WaitAsReceiver (the target).
func (s *scope) held() map[string]hold {
	out := map[string]hold{}
	for c, rs := range s.frozen {
		out[c] = hold{RunStrategy: rs, Hold: s.obs.Reports[c].Hold}
	}
	for _, st := range s.moves {
		for c, rs := range st.out.Holds {
			out[c] = hold{RunStrategy: rs, Hold: st.out.Hold}
		}
		for _, c := range st.out.Halt {
			out[c] = hold{RunStrategy: fleetv1alpha1.RunStrategyHalted, Hold: st.out.Hold}
		}
	}
	return out
}

// noteMoves tells, on the status entry of each move's source, what the
// move does.
func (s *scope) noteMoves() {
	for c, rs := range s.frozen {
		if p, ok := s.outcome.Clusters[c]; ok {
			p.Reason = fmt.Sprintf("kept %s: a move that no longer exists held it (%s %s), and another copy exists; "+
				"remove the copy you do not want, and this one follows spec.runStrategy again", rs, fleetv1alpha1.AnnotationHold, s.obs.Reports[c].Hold)
			s.outcome.Clusters[c] = p
		}
	}
	for _, st := range s.moves {
		from := st.move.Spec.From
		if p, ok := s.outcome.Clusters[from]; ok && p.State == placement.Placed {
			p.Reason = fmt.Sprintf("moving to %s (move %s, %s): %s", st.out.Status.To, st.move.Name, st.out.Status.Phase, st.out.Status.Message)
			s.outcome.Clusters[from] = p
		}
	}
}

// recordMove tells a move's phase change in events, on the move and on
// its FleetVirtualMachine.
func (r *Reconciler) recordMove(fvm *fleetv1alpha1.FleetVirtualMachine, m *fleetv1alpha1.FleetVirtualMachineMove, before fleetv1alpha1.FleetVirtualMachineMoveStatus) {
	if m.Status.Phase == before.Phase || r.Recorder == nil {
		return
	}
	kind := "Normal"
	if m.Status.Phase == fleetv1alpha1.MoveFailed || m.Status.Phase == fleetv1alpha1.MoveRollingBack || m.Status.Phase == fleetv1alpha1.MoveAborting {
		kind = "Warning"
	}
	reason := "Move" + string(m.Status.Phase)
	r.Recorder.Eventf(m, kind, reason, "%s", m.Status.Message)
	r.Recorder.Eventf(fvm, kind, reason, "move %s from %s to %s: %s", m.Name, m.Spec.From, m.Status.To, m.Status.Message)
}

// boolFirst sorts true before false.
func boolFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	default:
		return 1
	}
}

// moveDeadline is when the first move's timeout passes (0: none).
func (s *scope) moveDeadline() time.Duration {
	var d time.Duration
	for _, st := range s.moves {
		if l := st.out.LookAgain; l > 0 && (d == 0 || l < d) {
			d = l
		}
	}
	return d
}

// fleetVMOfMove maps a FleetVirtualMachineMove to its FleetVirtualMachine.
func fleetVMOfMove(_ context.Context, obj client.Object) []reconcile.Request {
	m := obj.(*fleetv1alpha1.FleetVirtualMachineMove)
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: m.Namespace, Name: m.Spec.FleetVirtualMachine}}}
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

// releaseMove removes the finalizer of a move that ended.
func (r *Reconciler) releaseMove(ctx context.Context, m *fleetv1alpha1.FleetVirtualMachineMove) error {
	if !controllerutil.ContainsFinalizer(m, fleetv1alpha1.MoveFinalizer) {
		return nil
	}
	if _, err := write.RemoveFinalizer(ctx, r.Client, m, fleetv1alpha1.MoveFinalizer); err != nil && !apierrors.IsNotFound(err) && !write.Stale(err) {
		return fmt.Errorf("remove finalizer of FleetVirtualMachineMove %s: %w", m.Name, err)
	}
	return nil
}

// failMovesOfGone ends the moves of a FleetVirtualMachine that does not
// exist: nothing is left to move.
func (r *Reconciler) failMovesOfGone(ctx context.Context, key types.NamespacedName) error {
	list := &fleetv1alpha1.FleetVirtualMachineMoveList{}
	if err := r.Client.List(ctx, list, client.InNamespace(key.Namespace), client.MatchingFields{IndexMoveFleetVM: key.Name}); err != nil {
		return fmt.Errorf("list FleetVirtualMachineMoves: %w", err)
	}
	now := metav1.NewTime(r.Clock.Now())
	for i := range list.Items {
		m := &list.Items[i]
		if !move.Active(m) {
			if err := r.releaseMove(ctx, m); err != nil {
				return err
			}
			continue
		}
		before := m.DeepCopy()
		m.Status.Phase, m.Status.CompletionTime = fleetv1alpha1.MoveFailed, &now
		m.Status.Message = fmt.Sprintf("FleetVirtualMachine %s does not exist", key.Name)
		if _, err := write.Status(ctx, r.Client, before, m); err != nil {
			if write.Stale(err) {
				continue
			}
			return fmt.Errorf("write status of FleetVirtualMachineMove %s: %w", m.Name, err)
		}
		if err := r.releaseMove(ctx, m); err != nil {
			return err
		}
	}
	return nil
}
