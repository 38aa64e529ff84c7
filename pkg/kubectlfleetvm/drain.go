package kubectlfleetvm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/drain"
	"github.com/fleetvm/fleetvm/pkg/explain"
)

const kindCluster = "ManagedCluster"

type drainOptions struct {
	dryRun, wait bool
	timeout      time.Duration
	limits       drain.Limits
	envLabel     string
}

func newDrainCommand(o *options) *cobra.Command {
	do := &drainOptions{timeout: time.Hour, limits: drain.DefaultLimits, envLabel: "env"}
	cmd := &cobra.Command{
		Use:   "drain CLUSTER",
		Short: "Move every FleetVirtualMachine copy off a managed cluster, and place no new one on it",
		Long: `drain puts the taint fleetvm.io/drain (effect NoSelectIfNew) on the ManagedCluster,
keeping its other taints; it writes nothing when the taint is there already.
The hub then moves each FleetVirtualMachine copy off the cluster with a
FleetVirtualMachineMove (labelled fleetvm.io/drain=CLUSTER), a few at a time,
and places no new copy on it. Other Placements keep what they selected there.

drain prints one row per copy still on the cluster and per move of the drain,
and a summary. With --wait it prints them again whenever they change, until the
drain ends: no move runs or waits to start, and no copy is left but those whose
move failed, which the hub does not try again (then it exits non-zero). It
waits at most --timeout; the drain goes on after. undrain takes the taint off.

--dry-run writes nothing and prints the plan: the copies in waves within the
limits (--per-cluster, --per-node: give fleetvm-hub's --drain-moves-per-cluster
and --drain-moves-per-node if it does not run with the defaults), each with the method it would move by and the cluster it would
likely go to, or why it cannot move. The likely target is the one the hub would
pick for a move now: among the clusters kubectl fleetvm explain says qualify
(not holding a copy, not draining), ranked as for a new copy by the FleetVM's
prioritizer (Balance, Steady: fewest FleetVMs, counting the copies planned
before; FreeCapacity: most free CPU and memory first), ties spread by a hash
of the FleetVM's namespace and name.`,
		Example: `  kubectl fleetvm drain prod-a --dry-run
  kubectl fleetvm drain prod-a --wait`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := do.validate(); err != nil {
				return err
			}
			if err := o.complete(); err != nil {
				return err
			}
			if do.dryRun {
				return o.drainPlan(cmd.Context(), args[0], do)
			}
			return o.drain(cmd.Context(), args[0], do)
		},
	}
	cmd.Flags().BoolVar(&do.dryRun, "dry-run", false, "Write nothing; print which copies would move in which wave, how, and likely where.")
	cmd.Flags().BoolVar(&do.wait, "wait", false, "Follow the drain until no copy is left on the cluster and no move runs.")
	cmd.Flags().DurationVar(&do.timeout, "timeout", do.timeout, "How long --wait follows the drain.")
	cmd.Flags().IntVar(&do.limits.PerCluster, "per-cluster", do.limits.PerCluster, "With --dry-run: how many moves off the cluster run at once (fleetvm-hub's --drain-moves-per-cluster).")
	cmd.Flags().IntVar(&do.limits.PerNode, "per-node", do.limits.PerNode, "With --dry-run: how many moves leave one node at once (fleetvm-hub's --drain-moves-per-node).")
	cmd.Flags().StringVar(&do.envLabel, "environment-label", do.envLabel, "With --dry-run: the cluster label that holds the environment (the hub's --environment-label).")
	return cmd
}

func (do *drainOptions) validate() error {
	switch {
	case do.dryRun && do.wait:
		return errors.New("--dry-run and --wait do not go together: a dry run starts nothing to wait for")
	case do.limits.PerCluster < 1:
		return fmt.Errorf("--per-cluster must be at least 1, not %d", do.limits.PerCluster)
	case do.limits.PerNode < 1:
		return fmt.Errorf("--per-node must be at least 1, not %d", do.limits.PerNode)
	case do.wait && do.timeout <= 0:
		return fmt.Errorf("--timeout must be positive, not %s", do.timeout)
	}
	return nil
}

func newUndrainCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "undrain CLUSTER",
		Short: "Take the drain taint off a managed cluster: no new move starts, new copies may land on it",
		Long: `undrain removes the taint fleetvm.io/drain from the ManagedCluster, keeping its
other taints; it writes nothing when the taint is not there. The hub starts no
new move off the cluster: the drain's moves not started yet are deleted, those
under way finish (or roll back) as they would, and copies already moved stay
where they went.`,
		Example: `  kubectl fleetvm undrain prod-a`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.complete(); err != nil {
				return err
			}
			return o.undrain(cmd.Context(), args[0])
		},
	}
}

// drain puts the taint on, prints the progress and, with --wait, follows it.
func (o *options) drain(ctx context.Context, cluster string, do *drainOptions) error {
	ref := "managedcluster.cluster.open-cluster-management.io/" + cluster
	changed, err := o.setDrainTaint(ctx, cluster, true)
	if err != nil {
		return err
	}
	if changed {
		_, _ = fmt.Fprintf(o.out, "%s draining: taint %s:%s added; the hub moves its FleetVM copies off it, a few at a time\n\n",
			ref, fleetv1alpha1.DrainTaintKey, clusterv1.TaintEffectNoSelectIfNew)
	} else {
		_, _ = fmt.Fprintf(o.out, "%s is draining already (taint %s)\n\n", ref, fleetv1alpha1.DrainTaintKey)
	}
	if !do.wait {
		rows, counts, err := o.readDrain(ctx, cluster)
		if err != nil {
			return err
		}
		if err := writeDrainProgress(o.out, cluster, rows, counts); err != nil {
			return err
		}
		if counts.ended() {
			_, _ = fmt.Fprintf(o.out, "\n%s\n", drainOutcome(cluster, counts))
		}
		return nil
	}
	return o.followDrain(ctx, cluster, do.timeout)
}

// followDrain prints the drain's progress whenever it changes, until it
// ends or timeout passes. A drain that ends with copies left (their moves
// failed) is an error.
func (o *options) followDrain(ctx context.Context, cluster string, timeout time.Duration) error {
	var (
		shown  string
		counts drainCounts
		last   error
	)
	err := wait.PollUntilContextTimeout(ctx, o.pollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		rows, c, err := o.readDrain(ctx, cluster)
		switch {
		case err != nil && lasting(err):
			return false, err
		case err != nil:
			if !ending(ctx) {
				last = err
			}
			return false, nil
		}
		last, counts = nil, c
		var b bytes.Buffer
		if err := writeDrainProgress(&b, cluster, rows, counts); err != nil {
			return false, err
		}
		if now := b.String(); now != shown {
			if shown != "" {
				_, _ = fmt.Fprintln(o.out)
			}
			_, _ = fmt.Fprint(o.out, now)
			shown = now
		}
		return counts.ended(), nil
	})
	switch {
	case err == nil && counts.drained():
		_, _ = fmt.Fprintf(o.out, "\n%s\n", drainOutcome(cluster, counts))
		return nil
	case err == nil:
		return errors.New(drainOutcome(cluster, counts))
	case !wait.Interrupted(err):
		return err
	}
	what := fmt.Sprintf("gave up after %s", timeout)
	if ctx.Err() != nil {
		what = "interrupted"
	}
	msg := fmt.Sprintf("%s waiting for %s to drain (moving %d, waiting %d, failed %d): the drain goes on", what, cluster,
		counts.Moving, counts.Waiting, counts.Failed)
	if last != nil {
		return fmt.Errorf("%s (last error: %w)", msg, last)
	}
	return errors.New(msg)
}

// readDrain reads the copies on the cluster (of every FleetVM, in every
// namespace) and the drain's moves, and lays out the progress.
func (o *options) readDrain(ctx context.Context, cluster string) ([]drainRow, drainCounts, error) {
	fvms, err := o.allFVMs(ctx)
	if err != nil {
		return nil, drainCounts{}, err
	}
	moves := &fleetv1alpha1.FleetVirtualMachineMoveList{}
	if err := o.client.List(ctx, moves, client.MatchingLabels{fleetv1alpha1.LabelDrain: cluster}); err != nil {
		return nil, drainCounts{}, explainError(err, kindMove, "", "")
	}
	rows, counts := drainProgress(drain.CopiesOn(fvms, cluster), moves.Items)
	return rows, counts, nil
}

func (o *options) allFVMs(ctx context.Context) ([]fleetv1alpha1.FleetVirtualMachine, error) {
	list := &fleetv1alpha1.FleetVirtualMachineList{}
	if err := o.client.List(ctx, list); err != nil {
		return nil, explainError(err, kindFVM, "", "")
	}
	return list.Items, nil
}

// undrain takes the taint off.
func (o *options) undrain(ctx context.Context, cluster string) error {
	ref := "managedcluster.cluster.open-cluster-management.io/" + cluster
	changed, err := o.setDrainTaint(ctx, cluster, false)
	if err != nil {
		return err
	}
	if !changed {
		_, _ = fmt.Fprintf(o.out, "%s is not draining (no taint %s): nothing to do\n", ref, fleetv1alpha1.DrainTaintKey)
		return nil
	}
	_, _ = fmt.Fprintf(o.out, "%s undrained: taint %s removed. The hub starts no new move: moves not started yet are deleted, "+
		"moves under way finish (kubectl get fleetvirtualmachinemoves -A -l %s=%s), and new copies may be placed on it again.\n",
		ref, fleetv1alpha1.DrainTaintKey, fleetv1alpha1.LabelDrain, cluster)
	return nil
}

// setDrainTaint puts the drain taint on the cluster (on) or takes it off,
// keeping every other taint: a merge patch of spec.taints carrying the
// resourceVersion it read, read again and retried on conflict. It writes
// nothing when the taint is already as asked, and says whether it wrote.
func (o *options) setDrainTaint(ctx context.Context, name string, on bool) (bool, error) {
	mc := &clusterv1.ManagedCluster{}
	changed := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := o.client.Get(ctx, client.ObjectKey{Name: name}, mc); err != nil {
			return clusterError(err, name)
		}
		taints, differ := drainTaints(mc.Spec.Taints, on, o.now())
		if changed = differ; !differ {
			return nil
		}
		patch, err := taintsPatch(taints, mc.ResourceVersion)
		if err != nil {
			return err
		}
		return o.client.Patch(ctx, mc, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldManager))
	})
	if err != nil {
		verb := "add the taint " + fleetv1alpha1.DrainTaintKey + " to"
		if !on {
			verb = "remove the taint " + fleetv1alpha1.DrainTaintKey + " from"
		}
		return false, fmt.Errorf("%s %s %s: %w", verb, kindCluster, name, err)
	}
	return changed, nil
}

// lasting tells an error that reading again will not cure: no right to
// read, or no such API. A wait stops at it instead of running out its
// timeout.
func lasting(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || meta.IsNoMatchError(err) || isCRDMissing(err)
}

// clusterError turns API errors about a ManagedCluster into messages that
// name it.
func clusterError(err error, name string) error {
	switch {
	case apierrors.IsNotFound(err) && !isCRDMissing(err):
		return fmt.Errorf("%s %q not found (kubectl get managedclusters lists them)", kindCluster, name)
	case meta.IsNoMatchError(err) || isCRDMissing(err):
		return fmt.Errorf("the OCM cluster API (%s) is not installed: is the kubeconfig context the OCM hub? (%w)", kindCluster, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("not allowed to read or change %s %q: %w", kindCluster, name, err)
	}
	return err
}

// drainPlan prints what draining the cluster would do, writing nothing.
func (o *options) drainPlan(ctx context.Context, cluster string, do *drainOptions) error {
	mc := &clusterv1.ManagedCluster{}
	if err := o.client.Get(ctx, client.ObjectKey{Name: cluster}, mc); err != nil {
		return clusterError(err, cluster)
	}
	fvms, err := o.allFVMs(ctx)
	if err != nil {
		return err
	}
	in := planInput{Cluster: cluster, Limits: do.limits, FVMs: fvms,
		Verdicts: map[types.NamespacedName][]explain.Verdict{}, Scores: map[string]map[string]int32{}, Draining: map[string]bool{}, Live: map[string]bool{}}
	if draining(mc.Spec.Taints) {
		in.Draining[cluster] = true
	}
	in.Live[cluster] = mc.Labels[fleetv1alpha1.LabelLiveMigration] == "true"
	// Every FleetVM with a copy on the cluster is explained; most read the
	// same cluster sets, clusters and scores, so each is read once.
	reader := newMemoReader(o.client)
	now := o.now()
	for _, c := range drain.CopiesOn(fvms, cluster) {
		key := types.NamespacedName{Namespace: c.Namespace, Name: c.FleetVM}
		fvm := findFVM(fvms, key)
		ein, err := explain.Read(ctx, reader, fvm, do.envLabel)
		if err != nil {
			return fmt.Errorf("explain %s %s: %w", kindFVM, key, err)
		}
		ein.Now = now
		verdicts, err := explain.Explain(ein)
		if err != nil {
			return fmt.Errorf("explain %s %s: %w", kindFVM, key, err)
		}
		in.Verdicts[key] = verdicts
		for _, cl := range ein.Clusters {
			if draining(cl.Taints) {
				in.Draining[cl.Name] = true
			}
			in.Live[cl.Name] = cl.Labels[fleetv1alpha1.LabelLiveMigration] == "true"
			if !cl.Expired(now) {
				in.Scores[cl.Name] = cl.Scores
			}
		}
	}
	if in.Draining[cluster] {
		_, _ = fmt.Fprintf(o.out, "%s is draining already: kubectl fleetvm drain %s shows how far it got. The plan as if it started now:\n\n", cluster, cluster)
	}
	return writeDrainPlan(o.out, cluster, do.limits, planDrain(in))
}

func findFVM(fvms []fleetv1alpha1.FleetVirtualMachine, key types.NamespacedName) *fleetv1alpha1.FleetVirtualMachine {
	for i := range fvms {
		if fvms[i].Namespace == key.Namespace && fvms[i].Name == key.Name {
			return &fvms[i]
		}
	}
	return nil
}
