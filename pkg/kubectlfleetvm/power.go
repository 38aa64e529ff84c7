package kubectlfleetvm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// power is a fleet-wide power action.
type power string

const (
	powerStart   power = "start"
	powerStop    power = "stop"
	powerRestart power = "restart"
)

// target is the state every cluster must reach.
type target int

const (
	targetRunning target = iota
	targetStopped
)

func (t target) String() string {
	if t == targetStopped {
		return "stop"
	}
	return "run and be ready"
}

// restoreTimeout bounds putting runStrategy back after a failed restart,
// even when the user interrupted the command.
const restoreTimeout = 30 * time.Second

type powerOptions struct {
	wait    bool
	timeout time.Duration
}

func newPowerCommand(o *options, p power) *cobra.Command {
	po := &powerOptions{}
	cmd := &cobra.Command{
		Use:  string(p) + " NAME",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.complete(); err != nil {
				return err
			}
			switch p {
			case powerStart:
				return o.setRunStrategy(cmd.Context(), args[0], fleetv1alpha1.RunStrategyAlways, po)
			case powerStop:
				return o.setRunStrategy(cmd.Context(), args[0], fleetv1alpha1.RunStrategyHalted, po)
			default:
				return o.restart(cmd.Context(), args[0], po)
			}
		},
	}
	switch p {
	case powerStart:
		cmd.Short = "Start a FleetVirtualMachine on every cluster (runStrategy Always)"
		cmd.Long = `start sets spec.runStrategy to Always with a merge patch (field manager
kubectl-fleetvm); the hub delivers it to the VM on every cluster. Nothing else
in the object changes. With --wait, it waits until every cluster reports the VM
Running and ready.`
	case powerStop:
		cmd.Short = "Stop a FleetVirtualMachine on every cluster (runStrategy Halted)"
		cmd.Long = `stop sets spec.runStrategy to Halted with a merge patch (field manager
kubectl-fleetvm); the hub delivers it to the VM on every cluster. Nothing else
in the object changes. With --wait, it waits until every cluster reports the VM
Stopped.`
	case powerRestart:
		cmd.Short = "Restart a FleetVirtualMachine on every cluster (stop, wait, start)"
		cmd.Long = `restart stops the VM on every cluster (runStrategy Halted), waits until every
cluster the VM is placed on reports it Stopped, then puts the runStrategy it had
back (Always or RerunOnFailure). If that does not happen within --timeout, or the
command is interrupted, the runStrategy is put back at once: a failed restart
never leaves the VM stopped. If someone else changes runStrategy meanwhile, their
change wins and the restart stops. Clusters leaving the placement (grace period)
are not waited for. The VM is down everywhere at the same time: this is a
fleet-wide restart, not a rolling one.`
		po.timeout = 10 * time.Minute
	}
	if p != powerRestart {
		cmd.Flags().BoolVar(&po.wait, "wait", false, "Wait until every cluster reports the new power state.")
		po.timeout = 5 * time.Minute
	} else {
		cmd.Flags().BoolVar(&po.wait, "wait", false, "After starting again, wait until every cluster reports the VM Running and ready.")
	}
	cmd.Flags().DurationVar(&po.timeout, "timeout", po.timeout, "How long to wait for the clusters.")
	cmd.Example = fmt.Sprintf("  kubectl fleetvm %s -n vms rhel9", p)
	return cmd
}

// setRunStrategy is start and stop: one merge patch of spec.runStrategy.
func (o *options) setRunStrategy(ctx context.Context, name string, want fleetv1alpha1.RunStrategy, po *powerOptions) error {
	key := client.ObjectKey{Namespace: o.namespace, Name: name}
	fvm := &fleetv1alpha1.FleetVirtualMachine{}
	if err := o.client.Get(ctx, key, fvm); err != nil {
		return explainError(err, kindFVM, o.namespace, name)
	}
	ref := "fleetvirtualmachine.fleetvm.io/" + name
	was := runStrategyOf(fvm)
	if fvm.Spec.RunStrategy == want {
		_, _ = fmt.Fprintf(o.out, "%s already has runStrategy %s\n", ref, want)
	} else {
		patch, err := runStrategyPatch(want, "")
		if err != nil {
			return err
		}
		if err := o.client.Patch(ctx, fvm, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager)); err != nil {
			return explainError(err, kindFVM, o.namespace, name)
		}
		verb := "started"
		if want == fleetv1alpha1.RunStrategyHalted {
			verb = "stopped"
		}
		_, _ = fmt.Fprintf(o.out, "%s %s: runStrategy %s (was %s)\n", ref, verb, want, was)
	}
	if !po.wait {
		return nil
	}
	t := targetRunning
	if want == fleetv1alpha1.RunStrategyHalted {
		t = targetStopped
	}
	if err := o.waitFor(ctx, key, fvm.Generation, want, t, po.timeout); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(o.out, "%s: every cluster reports %s\n", ref, reachedWord(t))
	return nil
}

// restart stops the VM everywhere, waits for every cluster to report it
// Stopped, and puts the runStrategy back. It never leaves the VM stopped
// on failure, and never overwrites someone else's runStrategy change.
func (o *options) restart(ctx context.Context, name string, po *powerOptions) error {
	key := client.ObjectKey{Namespace: o.namespace, Name: name}
	ref := "fleetvirtualmachine.fleetvm.io/" + name
	fvm := &fleetv1alpha1.FleetVirtualMachine{}
	if err := o.client.Get(ctx, key, fvm); err != nil {
		return explainError(err, kindFVM, o.namespace, name)
	}
	original := runStrategyOf(fvm)
	switch original {
	case fleetv1alpha1.RunStrategyHalted:
		return fmt.Errorf("%s/%s is stopped on purpose (runStrategy Halted): use 'kubectl fleetvm start %s'", o.namespace, name, name)
	case fleetv1alpha1.RunStrategyManual:
		return fmt.Errorf("%s/%s has runStrategy Manual: KubeVirt leaves such a VM stopped after a stop, so a fleet-wide restart "+
			"through runStrategy cannot start it again; restart it on each cluster (virtctl restart) or set runStrategy Always first", o.namespace, name)
	}
	active := activeClusters(fvm)
	if len(active) == 0 {
		return fmt.Errorf("%s/%s is not on any cluster yet (status.clusters is empty): nothing to restart", o.namespace, name)
	}

	stopped, err := o.swapRunStrategy(ctx, key, original, fleetv1alpha1.RunStrategyHalted)
	if err != nil {
		return err
	}
	_, _ = fmt.Fprintf(o.out, "%s stopping on %d clusters (runStrategy Halted, was %s)\n", ref, len(active), original)

	if err := o.waitFor(ctx, key, stopped.Generation, fleetv1alpha1.RunStrategyHalted, targetStopped, po.timeout); err != nil {
		var changed *changedError
		if errors.As(err, &changed) {
			return fmt.Errorf("restart of %s/%s abandoned: %w", o.namespace, name, err)
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restoreTimeout)
		defer cancel()
		if _, rerr := o.swapRunStrategy(rctx, key, fleetv1alpha1.RunStrategyHalted, original); rerr != nil {
			return fmt.Errorf("restart of %s/%s failed: %w; putting runStrategy %s back failed too: %w", o.namespace, name, err, original, rerr)
		}
		return fmt.Errorf("restart of %s/%s failed: %w; runStrategy is back to %s", o.namespace, name, err, original)
	}

	started, err := o.swapRunStrategy(ctx, key, fleetv1alpha1.RunStrategyHalted, original)
	if err != nil {
		return fmt.Errorf("restart of %s/%s: the VM is stopped on every cluster, but starting it again failed: %w", o.namespace, name, err)
	}
	_, _ = fmt.Fprintf(o.out, "%s restarted: stopped on every cluster, runStrategy back to %s\n", ref, original)
	if !po.wait {
		return nil
	}
	if err := o.waitFor(ctx, key, started.Generation, original, targetRunning, po.timeout); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(o.out, "%s: every cluster reports %s\n", ref, reachedWord(targetRunning))
	return nil
}

// changedError says someone else set runStrategy while the plugin was
// working: their change wins.
type changedError struct {
	expected, found fleetv1alpha1.RunStrategy
}

func (e *changedError) Error() string {
	return fmt.Sprintf("runStrategy was changed to %s by someone else (expected %s): leaving it as is", e.found, e.expected)
}

// swapRunStrategy sets runStrategy to `to` only if it is still `from`: a
// merge patch carrying the resourceVersion it read, retried on conflict.
func (o *options) swapRunStrategy(ctx context.Context, key client.ObjectKey, from, to fleetv1alpha1.RunStrategy) (*fleetv1alpha1.FleetVirtualMachine, error) {
	fvm := &fleetv1alpha1.FleetVirtualMachine{}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := o.client.Get(ctx, key, fvm); err != nil {
			return explainError(err, kindFVM, key.Namespace, key.Name)
		}
		if got := runStrategyOf(fvm); got != from {
			return &changedError{expected: from, found: got}
		}
		patch, err := runStrategyPatch(to, fvm.ResourceVersion)
		if err != nil {
			return err
		}
		return o.client.Patch(ctx, fvm, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager))
	})
	if err != nil {
		return nil, fmt.Errorf("set runStrategy %s on %s/%s: %w", to, key.Namespace, key.Name, err)
	}
	return fvm, nil
}

// runStrategyPatch is a JSON merge patch of spec.runStrategy; with a
// resourceVersion, the API server refuses it (Conflict) if the object
// changed since it was read.
func runStrategyPatch(rs fleetv1alpha1.RunStrategy, resourceVersion string) ([]byte, error) {
	p := map[string]any{"spec": map[string]any{"runStrategy": rs}}
	if resourceVersion != "" {
		p["metadata"] = map[string]any{"resourceVersion": resourceVersion}
	}
	b, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode runStrategy patch: %w", err)
	}
	return b, nil
}

// waitFor polls the FleetVirtualMachine until every cluster reached t in a
// status that describes at least generation, spec.runStrategy stops being
// want (someone else changed it), or timeout passes.
func (o *options) waitFor(ctx context.Context, key client.ObjectKey, generation int64, want fleetv1alpha1.RunStrategy, t target, timeout time.Duration) error {
	var (
		pending []string
		last    error
		shown   string
	)
	err := wait.PollUntilContextTimeout(ctx, o.pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		fvm := &fleetv1alpha1.FleetVirtualMachine{}
		if err := o.client.Get(ctx, key, fvm); err != nil {
			if apierrors.IsNotFound(err) {
				return false, explainError(err, kindFVM, key.Namespace, key.Name)
			}
			if !ending(ctx) {
				last = err
			}
			return false, nil
		}
		last = nil
		if got := runStrategyOf(fvm); got != want {
			return false, &changedError{expected: want, found: got}
		}
		var done bool
		done, pending = progress(fvm, generation, t)
		if now := strings.Join(pending, ", "); !done && now != shown {
			_, _ = fmt.Fprintf(o.errOut, "waiting for %s/%s to %s: %s\n", key.Namespace, key.Name, t, now)
			shown = now
		}
		return done, nil
	})
	if err == nil {
		return nil
	}
	var changed *changedError
	if errors.As(err, &changed) || apierrors.IsNotFound(err) || !wait.Interrupted(err) {
		return err
	}
	msg := fmt.Sprintf("gave up after %s waiting for %s/%s to %s on every cluster", timeout, key.Namespace, key.Name, t)
	if ctx.Err() != nil {
		msg = fmt.Sprintf("interrupted while waiting for %s/%s to %s on every cluster", key.Namespace, key.Name, t)
	}
	if len(pending) > 0 {
		msg += "; still waiting for " + strings.Join(pending, ", ")
	}
	if last != nil {
		return fmt.Errorf("%s (last error: %w)", msg, last)
	}
	return errors.New(msg)
}

// ending tells whether ctx is done or at its deadline: a read failing then
// failed because the wait itself ended (the rate limiter refuses a request
// past the deadline before the context reports it).
func ending(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	deadline, ok := ctx.Deadline()
	return ok && !time.Now().Before(deadline)
}

// progress tells whether every cluster the VM is placed on reached t, and
// names the ones that have not.
func progress(fvm *fleetv1alpha1.FleetVirtualMachine, generation int64, t target) (bool, []string) {
	if fvm.Status.ObservedGeneration < generation {
		return false, []string{fmt.Sprintf("the hub controller to observe generation %d (status is at %d)", generation, fvm.Status.ObservedGeneration)}
	}
	active := activeClusters(fvm)
	if len(active) == 0 {
		if t == targetStopped {
			return true, nil
		}
		return false, []string{"a cluster to be placed on"}
	}
	var pending []string
	for _, c := range active {
		if !reached(c, t) {
			pending = append(pending, fmt.Sprintf("%s (%s)", c.Cluster, orUnknown(string(c.Phase))))
		}
	}
	return len(pending) == 0, pending
}

func reached(c fleetv1alpha1.ClusterStatus, t target) bool {
	if t == targetStopped {
		return c.Phase == fleetv1alpha1.ClusterPhaseStopped
	}
	return c.Phase == fleetv1alpha1.ClusterPhaseRunning && c.Ready
}

func reachedWord(t target) string {
	if t == targetStopped {
		return "the VM Stopped"
	}
	return "the VM Running and ready"
}

// activeClusters are the clusters the VM is placed on: every status entry
// but those leaving or being removed, whose VM goes.
func activeClusters(fvm *fleetv1alpha1.FleetVirtualMachine) []fleetv1alpha1.ClusterStatus {
	return slices.DeleteFunc(slices.Clone(fvm.Status.Clusters), func(c fleetv1alpha1.ClusterStatus) bool {
		return c.Phase == fleetv1alpha1.ClusterPhaseLeaving || c.Phase == fleetv1alpha1.ClusterPhaseRemoving ||
			c.LeavingSince != nil || c.RemovingSince != nil
	})
}

func orUnknown(s string) string {
	if s == "" {
		return string(fleetv1alpha1.ClusterPhaseUnknown)
	}
	return s
}
