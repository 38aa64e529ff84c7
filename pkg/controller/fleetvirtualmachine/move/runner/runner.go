package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/delivery"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/move"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/placement"
	"github.com/fleetvm/fleetvm/pkg/rollout"
	"github.com/fleetvm/fleetvm/pkg/write"
)

// This file is the seam between the FleetVirtualMachine reconcile and its
// moves. The reconcile calls the Runner at three fixed points, as
// cluster-api's machine controller calls its drain helper:
//
//  1. Step, after the fleet is read and before the decision is recorded:
//     one step of each move (move.Step decides it), its status written first.
//     A move's status is its memory (the target it chose), so a reconcile
//     that stops after it does not choose again.
//  2. EnsureWorks, in delivery: the ManifestWorks the steps ask for (a Cold
//     move's export and import, a Live move's migrations), every other
//     move work of the FleetVirtualMachine removed.
//  3. Forget, once the FleetVirtualMachine is gone: its moves end, their
//     finalizers and works go.
//
// What the step asks of placement and delivery comes back as a Plan.

// +kubebuilder:rbac:groups=fleetvm.io,resources=fleetvirtualmachinemoves,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=fleetvm.io,resources=fleetvirtualmachinemoves/status,verbs=get;update;patch

// Runner runs the moves of FleetVirtualMachines against the hub.
type Runner struct {
	Client   client.Client
	Recorder record.EventRecorder
	// written lets the works found as last written go unwritten.
	written write.Memo
}

// View is what a FleetVirtualMachine's reconcile knows, for its moves.
type View struct {
	FVM *fleetv1alpha1.FleetVirtualMachine
	Now time.Time
	// Copies is what the hub knows of the VM on each cluster; it is
	// called only when a move or a reported hold needs it.
	Copies func() map[string]move.Copy
	// Held tells whether a report carries a move's hold (AnnotationHold):
	// a copy a lost move held is kept as it is (move.Frozen).
	Held bool
	// Scheduled: the OCM scheduler's decision for the FleetVirtualMachine's
	// placement is current; a move's target is chosen from it.
	Scheduled bool
	// Targets are the clusters a move that has not started may take now,
	// best first (to: the one it asks for, "" any), or what it waits for
	// rather than fail.
	Targets func(ctx context.Context, to string, copies map[string]move.Copy) (targets []string, waitFor string, err error)
}

// Plan is what the moves of a FleetVirtualMachine ask of its reconcile
// after their step.
type Plan struct {
	// Moves are the moves under way, after their step.
	Moves []Stepped
	// Frozen are the copies a move the hub no longer has held, kept in the
	// run strategy they report (move.Frozen).
	Frozen map[string]fleetv1alpha1.RunStrategy
	// Stop: a move's write was refused (a stale read); the reconcile stops
	// and comes again with the cache caught up.
	Stop bool
}

// Stepped is one move and what its step decided.
type Stepped struct {
	Move *fleetv1alpha1.FleetVirtualMachineMove
	Out  move.Output
	// Import is what the target's VM imports (Cold; nil until the export
	// serves).
	Import *delivery.Import
}

// Step runs one step of the FleetVirtualMachine's moves and writes their
// status. One move of a VM runs at a time: the one started first, else
// the oldest; the others wait, Pending. A move is held by its finalizer
// from its first step until it ended: deleting it rolls it back, or
// finishes it past the point of no return, first.
func (r *Runner) Step(ctx context.Context, v View) (Plan, error) {
	var plan Plan
	list := &fleetv1alpha1.FleetVirtualMachineMoveList{}
	if err := r.Client.List(ctx, list, client.InNamespace(v.FVM.Namespace), client.MatchingFields{IndexMoveFleetVM: v.FVM.Name}); err != nil {
		return plan, fmt.Errorf("list FleetVirtualMachineMoves: %w", err)
	}
	var errs []error
	moves := make([]*fleetv1alpha1.FleetVirtualMachineMove, 0, len(list.Items))
	for i := range list.Items {
		m := &list.Items[i]
		if !move.Active(m) {
			// An ended move needs no holding any more.
			if err := r.release(ctx, m); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if m.DeletionTimestamp == nil {
			if _, err := write.AddFinalizer(ctx, r.Client, m, fleetv1alpha1.MoveFinalizer); err != nil {
				plan.Stop = true
				if apierrors.IsNotFound(err) || write.Stale(err) {
					return plan, nil
				}
				return plan, fmt.Errorf("add finalizer to FleetVirtualMachineMove %s: %w", m.Name, err)
			}
		}
		moves = append(moves, m)
	}
	// Copies a move the hub no longer has held stay as they are (only a
	// reported hold can make one: the rest of the fleet skips this).
	var copies map[string]move.Copy
	if len(moves) > 0 || v.Held {
		active := make([]types.UID, 0, len(moves))
		for _, m := range moves {
			active = append(active, m.UID)
		}
		copies = v.Copies()
		plan.Frozen = move.Frozen(copies, active)
	}
	slices.SortFunc(moves, func(a, b *fleetv1alpha1.FleetVirtualMachineMove) int {
		if sa, sb := move.Started(a), move.Started(b); sa != sb {
			if sa {
				return -1
			}
			return 1
		}
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	for i, m := range moves {
		in, imp, err := r.input(ctx, v, moves, i, copies)
		if err != nil {
			return plan, errors.Join(append(errs, err)...)
		}
		out := move.Step(in)
		if !equality.Semantic.DeepEqual(out.Status, m.Status) {
			before := m.DeepCopy()
			m.Status = out.Status
			if _, err := write.Status(ctx, r.Client, before, m); err != nil {
				plan.Stop = true
				if write.Stale(err) {
					return plan, errors.Join(errs...)
				}
				return plan, errors.Join(append(errs, fmt.Errorf("write status of FleetVirtualMachineMove %s: %w", m.Name, err))...)
			}
			r.record(v.FVM, m, before.Status)
			if !move.Active(m) {
				if err := r.release(ctx, m); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if move.Active(m) {
			plan.Moves = append(plan.Moves, Stepped{Move: m, Out: out, Import: imp})
		}
	}
	return plan, errors.Join(errs...)
}

// input is what the step of moves[i] reads, and what a Cold move's target
// imports.
func (r *Runner) input(ctx context.Context, v View, moves []*fleetv1alpha1.FleetVirtualMachineMove, i int, copies map[string]move.Copy) (move.Input, *delivery.Import, error) {
	m := moves[i]
	in := move.Input{Now: v.Now, Move: m, RunStrategy: v.FVM.Spec.RunStrategy, Copies: copies,
		Deleting: v.FVM.DeletionTimestamp != nil, Deleted: m.DeletionTimestamp != nil}
	if i > 0 {
		in.Busy = moves[0].Name
	}
	in.Method, in.Refused = move.MethodFor(v.FVM, m.Spec.Method)
	var imp *delivery.Import
	var err error
	switch {
	case !move.Started(m):
		if i == 0 && !v.Scheduled {
			// Its target is chosen from the scheduler's current answer.
			in.WaitFor = "the OCM scheduler's decision for the FleetVirtualMachine's placement"
		}
		if i == 0 && in.WaitFor == "" {
			in.WaitFor = rolloutWave(v.FVM, m.Spec.From)
		}
		if i == 0 && in.WaitFor == "" && v.Targets != nil {
			if in.Targets, in.WaitFor, err = v.Targets(ctx, m.Spec.To, copies); err != nil {
				return in, nil, err
			}
		}
		// The source, and the target the move would take.
		clusters := []string{m.Spec.From, m.Spec.To}
		if len(in.Targets) > 0 {
			clusters = append(clusters, in.Targets[0])
		}
		in.Live, err = r.liveClusters(ctx, clusters)
	case m.Status.Method == fleetv1alpha1.MoveMethodCold:
		in.Export, imp, err = r.readExport(ctx, v.FVM, m)
	case m.Status.Method == fleetv1alpha1.MoveMethodLive:
		var w liveWorks
		w, err = r.migrationWorks(ctx, m)
		in.Migration = move.ReadMigration(w.receive, w.send)
	}
	return in, imp, err
}

// rolloutWave names the rollout's step a move of the copy on cluster from
// waits for: the copy is taking a revision, soaking on it, or returning
// to the previous one (status.clusters[].rollout). One change at a time
// reaches a VM: the move starts once the copy's step ended (it succeeded,
// failed or waits its turn), and the rollout gives a copy being moved no
// revision until the move ended.
func rolloutWave(fvm *fleetv1alpha1.FleetVirtualMachine, from string) string {
	for _, c := range fvm.Status.Clusters {
		if c.Cluster != from || c.Rollout == nil {
			continue
		}
		switch rollout.State(c.Rollout.State) {
		case rollout.Applying, rollout.Soaking, rollout.Reverting:
			return fmt.Sprintf("the rollout's step on cluster %s to end (revision %d, %s)", from, c.Rollout.Revision, c.Rollout.State)
		}
	}
	return ""
}

// liveClusters tells which of the clusters offer decentralized live
// migration (fleetv1alpha1.LabelLiveMigration).
func (r *Runner) liveClusters(ctx context.Context, clusters []string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, c := range clusters {
		if c == "" {
			continue
		}
		mc := &clusterv1.ManagedCluster{}
		switch err := r.Client.Get(ctx, types.NamespacedName{Name: c}, mc); {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("get ManagedCluster %s: %w", c, err)
		}
		out[c] = mc.Labels[fleetv1alpha1.LabelLiveMigration] == "true"
	}
	return out, nil
}

// record tells a move's phase change in events, on the move and on its
// FleetVirtualMachine.
func (r *Runner) record(fvm *fleetv1alpha1.FleetVirtualMachine, m *fleetv1alpha1.FleetVirtualMachineMove, before fleetv1alpha1.FleetVirtualMachineMoveStatus) {
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

// release removes the finalizer of a move that ended.
func (r *Runner) release(ctx context.Context, m *fleetv1alpha1.FleetVirtualMachineMove) error {
	if !controllerutil.ContainsFinalizer(m, fleetv1alpha1.MoveFinalizer) {
		return nil
	}
	if _, err := write.RemoveFinalizer(ctx, r.Client, m, fleetv1alpha1.MoveFinalizer); err != nil && !apierrors.IsNotFound(err) && !write.Stale(err) {
		return fmt.Errorf("remove finalizer of FleetVirtualMachineMove %s: %w", m.Name, err)
	}
	return nil
}

// Forget ends the moves of a FleetVirtualMachine that does not exist
// (nothing is left to move) and removes their works.
func (r *Runner) Forget(ctx context.Context, key types.NamespacedName, now time.Time) error {
	list := &fleetv1alpha1.FleetVirtualMachineMoveList{}
	if err := r.Client.List(ctx, list, client.InNamespace(key.Namespace), client.MatchingFields{IndexMoveFleetVM: key.Name}); err != nil {
		return fmt.Errorf("list FleetVirtualMachineMoves: %w", err)
	}
	t := metav1.NewTime(now)
	for i := range list.Items {
		m := &list.Items[i]
		if move.Active(m) {
			before := m.DeepCopy()
			m.Status.Phase, m.Status.CompletionTime = fleetv1alpha1.MoveFailed, &t
			m.Status.Message = fmt.Sprintf("FleetVirtualMachine %s does not exist", key.Name)
			if _, err := write.Status(ctx, r.Client, before, m); err != nil {
				if write.Stale(err) {
					continue
				}
				return fmt.Errorf("write status of FleetVirtualMachineMove %s: %w", m.Name, err)
			}
		}
		if err := r.release(ctx, m); err != nil {
			return err
		}
	}
	return r.deleteWorks(ctx, key, nil)
}

// Decision is what the moves ask of the placement decision.
func (p Plan) Decision() []placement.Move {
	var out []placement.Move
	for _, st := range p.Moves {
		if st.Out.Target == "" {
			continue
		}
		out = append(out, placement.Move{Name: st.Move.Name, From: st.Move.Spec.From, To: st.Out.Target,
			RemoveFrom: st.Out.RemoveFrom, RemoveTo: st.Out.RemoveTo})
	}
	return out
}

// Targets are the targets the moves hold a copy on.
func (p Plan) Targets() []string {
	var out []string
	for _, st := range p.Moves {
		if t := st.Out.Target; t != "" {
			out = append(out, t)
		}
	}
	return out
}

// Imports are the clusters whose VM a move renders with disks of its own:
// a Cold move's target importing from the source's export, a Live move's
// target blank for the migration to fill.
func (p Plan) Imports() map[string]*delivery.Import {
	out := map[string]*delivery.Import{}
	for _, st := range p.Moves {
		switch {
		case st.Out.Import && st.Import != nil:
			out[st.Out.Target] = st.Import
		case st.Out.Blank:
			out[st.Out.Target] = &delivery.Import{Blank: true}
		}
	}
	return out
}

// Importing are the targets of Cold moves that export now and deliver
// nothing there yet: the import's Secret needs the VM's namespace first.
func (p Plan) Importing() []string {
	var out []string
	for _, st := range p.Moves {
		if to := st.Move.Status.To; st.Out.Export && to != "" && st.Out.Target == "" {
			out = append(out, to)
		}
	}
	return out
}

// Hold is how a move holds a cluster's VM: its run strategy, and the hold
// it is delivered under (move.Output.Hold, AnnotationHold).
type Hold struct {
	RunStrategy fleetv1alpha1.RunStrategy
	Hold        string
}

// Held are the clusters whose VM a move holds in a run strategy of its
// own: stopped (Halted), or for a live migration Manual (the source) and
// WaitAsReceiver (the target); and the copies a lost move left frozen,
// under the hold they report (reported).
func (p Plan) Held(reported func(cluster string) string) map[string]Hold {
	out := map[string]Hold{}
	for c, rs := range p.Frozen {
		out[c] = Hold{RunStrategy: rs, Hold: reported(c)}
	}
	for _, st := range p.Moves {
		for c, rs := range st.Out.Holds {
			out[c] = Hold{RunStrategy: rs, Hold: st.Out.Hold}
		}
		for _, c := range st.Out.Halt {
			out[c] = Hold{RunStrategy: fleetv1alpha1.RunStrategyHalted, Hold: st.Out.Hold}
		}
	}
	return out
}

// Notes say, by cluster, what the moves do with its copy: the source of
// each move (moving), and each frozen copy (kept). placed tells whether a
// cluster's copy stays placed (a move's note goes only there).
func (p Plan) Notes(reported func(cluster string) string, placed func(cluster string) bool) map[string]string {
	out := map[string]string{}
	for c, rs := range p.Frozen {
		out[c] = fmt.Sprintf("kept %s: a move that no longer exists held it (%s %s), and another copy exists; "+
			"remove the copy you do not want, and this one follows spec.runStrategy again", rs, fleetv1alpha1.AnnotationHold, reported(c))
	}
	for _, st := range p.Moves {
		if from := st.Move.Spec.From; placed(from) {
			out[from] = fmt.Sprintf("moving to %s (move %s, %s): %s", st.Out.Status.To, st.Move.Name, st.Out.Status.Phase, st.Out.Status.Message)
		}
	}
	return out
}

// LookAgain is when the first move's timeout passes (0: none).
func (p Plan) LookAgain() time.Duration {
	var d time.Duration
	for _, st := range p.Moves {
		if l := st.Out.LookAgain; l > 0 && (d == 0 || l < d) {
			d = l
		}
	}
	return d
}

// FleetVMOf maps a FleetVirtualMachineMove to its FleetVirtualMachine.
func FleetVMOf(_ context.Context, obj client.Object) []reconcile.Request {
	m := obj.(*fleetv1alpha1.FleetVirtualMachineMove)
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: m.Namespace, Name: m.Spec.FleetVirtualMachine}}}
}
