package kubectlfleetvm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/drain"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/move"
)

const kindMove = "FleetVirtualMachineMove"

// moveWaitMargin is how much longer than the move's own timeout --wait
// follows it: the timeout runs from the start until the VM is ready on the
// target, and a rollback or the removal of the source's copy come after.
const moveWaitMargin = 5 * time.Minute

type moveOptions struct {
	from, to, method string
	timeout          time.Duration
	wait             bool
}

func newMoveCommand(o *options) *cobra.Command {
	mo := &moveOptions{method: string(fleetv1alpha1.MoveMethodAuto), timeout: move.DefaultTimeout}
	cmd := &cobra.Command{
		Use:   "move NAME --from CLUSTER",
		Short: "Move a FleetVirtualMachine's copy from one cluster to another (a FleetVirtualMachineMove)",
		Long: `move creates a FleetVirtualMachineMove in the namespace: the hub moves the copy
of the VM on --from to --to, or to a cluster it picks by the rules it places
new copies with when --to is not given. The move is make-before-break and never
runs two servers: the VM is prepared on the target, stopped on the source,
started on the target, and the source's copy is removed once the target's is
ready; a failure or --timeout rolls it back, and the VM stays where it was.

The command checks first that the FleetVirtualMachine has a copy on --from,
that --to holds none, and that the VM can move by --method (Auto: Restart for a
VM whose disks are all made from images; for one whose DataVolumes hold data
of its own, Live when both clusters offer KubeVirt's decentralized live
migration, else Cold: stopped, its disks exported and imported on the target). It prints the move's name. With
--wait it follows the move, printing each phase with its message, until it
ends: at most --timeout plus 5 minutes. It exits non-zero if the move failed.
Interrupting the command does not stop the move.`,
		Example: `  kubectl fleetvm move web -n vms --from prod-a
  kubectl fleetvm move web -n vms --from prod-a --to prod-c --wait`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := mo.validate(); err != nil {
				return err
			}
			if err := o.complete(); err != nil {
				return err
			}
			return o.move(cmd.Context(), args[0], mo)
		},
	}
	cmd.Flags().StringVar(&mo.from, "from", "", "The managed cluster the copy leaves (required).")
	cmd.Flags().StringVar(&mo.to, "to", "", "The managed cluster the copy goes to; the hub picks one when empty.")
	cmd.Flags().StringVar(&mo.method, "method", mo.method, "How the VM reaches the target: Auto, Restart, Cold or Live.")
	cmd.Flags().DurationVar(&mo.timeout, "timeout", mo.timeout, "How long the move may take until the VM is ready on the target; past it, the move rolls back.")
	cmd.Flags().BoolVar(&mo.wait, "wait", false, "Follow the move until it ends; exit non-zero if it failed.")
	return cmd
}

// validate checks the flags before anything is read.
func (mo *moveOptions) validate() error {
	switch {
	case mo.from == "":
		return errors.New("--from is required: the managed cluster the copy leaves")
	case mo.to == mo.from:
		return fmt.Errorf("--to must differ from --from (both are %q)", mo.from)
	case mo.timeout <= 0:
		return fmt.Errorf("--timeout must be positive, not %s", mo.timeout)
	}
	for _, m := range []fleetv1alpha1.MoveMethod{fleetv1alpha1.MoveMethodAuto, fleetv1alpha1.MoveMethodRestart, fleetv1alpha1.MoveMethodCold, fleetv1alpha1.MoveMethodLive} {
		if strings.EqualFold(mo.method, string(m)) {
			mo.method = string(m)
			return nil
		}
	}
	return fmt.Errorf("--method must be Auto, Restart, Cold or Live, not %q", mo.method)
}

// move checks that the copy can move as asked, creates the move and, with
// --wait, follows it to its end.
func (o *options) move(ctx context.Context, name string, mo *moveOptions) error {
	fvm := &fleetv1alpha1.FleetVirtualMachine{}
	if err := o.client.Get(ctx, client.ObjectKey{Namespace: o.namespace, Name: name}, fvm); err != nil {
		return explainError(err, kindFVM, o.namespace, name)
	}
	if err := checkMove(fvm, mo); err != nil {
		return err
	}
	mv := &fleetv1alpha1.FleetVirtualMachineMove{
		ObjectMeta: metav1.ObjectMeta{Namespace: o.namespace, GenerateName: moveGenerateName(name)},
		Spec: fleetv1alpha1.FleetVirtualMachineMoveSpec{
			FleetVirtualMachine: name, From: mo.from, To: mo.to,
			Method: fleetv1alpha1.MoveMethod(mo.method), Timeout: &metav1.Duration{Duration: mo.timeout},
		},
	}
	if err := o.client.Create(ctx, mv, client.FieldOwner(FieldManager)); err != nil {
		if apierrors.IsForbidden(err) || meta.IsNoMatchError(err) || isCRDMissing(err) {
			return explainError(err, kindMove, o.namespace, "")
		}
		return fmt.Errorf("create a %s of %s/%s: %w", kindMove, o.namespace, name, err)
	}
	_, _ = fmt.Fprintf(o.out, "fleetvirtualmachinemove.fleetvm.io/%s created\n", mv.Name)
	if !mo.wait {
		return nil
	}
	return o.followMove(ctx, mv, mo.timeout+moveWaitMargin)
}

// checkMove refuses, before anything is written, a move the hub would
// refuse: no copy on --from, a copy already on --to, a VM that cannot
// move by the method asked. Each message names the flag.
func checkMove(fvm *fleetv1alpha1.FleetVirtualMachine, mo *moveOptions) error {
	ref := fvm.Namespace + "/" + fvm.Name
	if len(drain.CopiesOn([]fleetv1alpha1.FleetVirtualMachine{*fvm}, mo.from)) == 0 {
		return fmt.Errorf("--from %s: FleetVirtualMachine %s has no copy there (%s)", mo.from, ref, copiesText(fvm))
	}
	if mo.to != "" && slices.ContainsFunc(fvm.Status.Clusters, func(c fleetv1alpha1.ClusterStatus) bool { return c.Cluster == mo.to }) {
		return fmt.Errorf("--to %s: FleetVirtualMachine %s already has a copy there: a move goes to a cluster without one", mo.to, ref)
	}
	if _, refused := move.Resolve(fvm, fleetv1alpha1.MoveMethod(mo.method)); refused != "" {
		return fmt.Errorf("--method %s: %s cannot move: %s", mo.method, ref, refused)
	}
	return nil
}

// copiesText says where the VM's copies are, for an error about --from.
func copiesText(fvm *fleetv1alpha1.FleetVirtualMachine) string {
	var placed, leaving []string
	for _, c := range fvm.Status.Clusters {
		if c.LeavingSince != nil || c.RemovingSince != nil {
			leaving = append(leaving, c.Cluster)
		} else {
			placed = append(placed, c.Cluster)
		}
	}
	var parts []string
	if len(placed) > 0 {
		parts = append(parts, "its copies: "+strings.Join(placed, ", "))
	}
	if len(leaving) > 0 {
		parts = append(parts, "leaving: "+strings.Join(leaving, ", "))
	}
	if len(parts) == 0 {
		return "it has no copy on any cluster yet"
	}
	return strings.Join(parts, "; ")
}

// moveGenerateName is the generateName of a move of the FleetVM name: the
// name and a dash, cut so the API server's five random characters keep it
// within a DNS label (63), and never ending in "-." or "--".
func moveGenerateName(name string) string {
	const maxBase = 63 - 5 - 1
	if len(name) > maxBase {
		name = strings.TrimRight(name[:maxBase], "-.")
	}
	return name + "-"
}

// followMove watches the move until it ends or bound passes, printing each
// change of phase or message. A watch, not a poll: a phase that lasts less
// than a poll interval is printed too. When the API server ends the watch
// (it does every few minutes), the move is read again and watched from
// there.
func (o *options) followMove(ctx context.Context, mv *fleetv1alpha1.FleetVirtualMachineMove, bound time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	f := &moveFollower{}
	last := mv
	for {
		m, err := o.watchMove(ctx, mv.Namespace, mv.Name, f)
		if m != nil {
			last = m
		}
		switch {
		case err != nil:
			return err
		case m != nil && m.Status.Phase.Terminal():
			return moveResult(o, m)
		case ctx.Err() != nil:
			what := "gave up after " + bound.String()
			if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
				what = "interrupted"
			}
			return fmt.Errorf("%s waiting for %s/%s to end (it is %s): the move goes on; see kubectl get fleetvirtualmachinemove -n %s %s",
				what, mv.Namespace, mv.Name, orUnknownPhase(last.Status.Phase), mv.Namespace, mv.Name)
		}
	}
}

// watchMove reads the move, then watches it from there, printing what f
// says, until it ends (returned), the watch ends (returned with the last
// state seen, no error) or something fails.
func (o *options) watchMove(ctx context.Context, ns, name string, f *moveFollower) (*fleetv1alpha1.FleetVirtualMachineMove, error) {
	byName := fields.OneTermEqualSelector("metadata.name", name)
	list := &fleetv1alpha1.FleetVirtualMachineMoveList{}
	if err := o.client.List(ctx, list, &client.ListOptions{Namespace: ns, FieldSelector: byName}); err != nil {
		if ctx.Err() != nil {
			return nil, nil
		}
		return nil, explainError(err, kindMove, ns, name)
	}
	if len(list.Items) == 0 {
		return nil, fmt.Errorf("%s %s/%s was deleted before it ended", kindMove, ns, name)
	}
	last := &list.Items[0]
	if o.printMove(f, last) {
		return last, nil
	}
	w, err := o.client.Watch(ctx, &fleetv1alpha1.FleetVirtualMachineMoveList{},
		&client.ListOptions{Namespace: ns, FieldSelector: byName, Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		if ctx.Err() != nil {
			return last, nil
		}
		return last, explainError(err, kindMove, ns, name)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Error:
			if err := apierrors.FromObject(ev.Object); !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
				return last, fmt.Errorf("watch %s %s/%s: %w", kindMove, ns, name, err)
			}
			return last, nil // too old a resourceVersion: read it again
		case watch.Deleted:
			return last, fmt.Errorf("%s %s/%s was deleted while it was %s", kindMove, ns, name, orUnknownPhase(last.Status.Phase))
		case watch.Added, watch.Modified:
			m, ok := ev.Object.(*fleetv1alpha1.FleetVirtualMachineMove)
			if !ok {
				continue
			}
			last = m
			if o.printMove(f, m) {
				return m, nil
			}
		}
	}
	return last, nil
}

// printMove prints what changed in m, and tells whether it ended.
func (o *options) printMove(f *moveFollower, m *fleetv1alpha1.FleetVirtualMachineMove) bool {
	line, ended := f.observe(m)
	if line != "" {
		_, _ = fmt.Fprintln(o.errOut, line)
	}
	return ended
}

// moveResult prints a move that succeeded, or returns why it failed.
func moveResult(o *options, m *fleetv1alpha1.FleetVirtualMachineMove) error {
	ref := "fleetvirtualmachinemove.fleetvm.io/" + m.Name
	if m.Status.Phase == fleetv1alpha1.MoveFailed {
		return fmt.Errorf("%s failed: %s; the VM is where it was", ref, cell(m.Status.Message))
	}
	_, _ = fmt.Fprintf(o.out, "%s Succeeded: %s/%s moved from %s to %s\n", ref, m.Namespace, m.Spec.FleetVirtualMachine, m.Spec.From,
		cell(moveTarget(m)))
	return nil
}

// moveFollower turns the states of one move, as they are seen, into the
// lines --wait prints: one per change of phase or message.
type moveFollower struct {
	seen           bool
	phase, message string
}

// observe returns the line to print for m ("" when nothing changed) and
// whether the move has ended.
func (f *moveFollower) observe(m *fleetv1alpha1.FleetVirtualMachineMove) (string, bool) {
	phase, message := string(m.Status.Phase), m.Status.Message
	ended := m.Status.Phase.Terminal()
	if f.seen && phase == f.phase && message == f.message {
		return "", ended
	}
	f.seen, f.phase, f.message = true, phase, message
	if phase == "" {
		return "waiting for the hub to start the move", ended
	}
	line := phase
	if message != "" {
		line += ": " + cell(message)
	}
	return line, ended
}

// moveTarget is the cluster a move goes to: the one chosen, or asked.
func moveTarget(m *fleetv1alpha1.FleetVirtualMachineMove) string {
	if m.Status.To != "" {
		return m.Status.To
	}
	return m.Spec.To
}

func orUnknownPhase(p fleetv1alpha1.MovePhase) string {
	if p == "" {
		return "not started by the hub yet"
	}
	return string(p)
}
