package kubectlfleetvm

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/explain"
)

func newExplainCommand(o *options) *cobra.Command {
	envLabel := "env"
	cmd := &cobra.Command{
		Use:   "explain NAME",
		Short: "Say, for every cluster it could use, why a FleetVirtualMachine was placed there or not",
		Long: `explain lists every cluster of the cluster sets bound to the FleetVirtualMachine's
namespace that it asks for, with the first reason that keeps the VM off it:
environment label, clusterSelector, a taint it does not tolerate, the fleetvm
agent not reporting, a network on no node, no node with room, or none (the
cluster qualifies; enough were chosen). It works from what the OCM scheduler
sees: the clusters' labels and taints and the agents' fleetvm-capacity scores.
It needs read access to ManagedClusters, ManagedClusterSets and the scores in
the cluster namespaces. For a FleetVirtualMachine with spec.rollout whose latest
revision has not reached every cluster, it then lists those clusters with why
each waits (as kubectl fleetvm rollout status does).`,
		Example: `  kubectl fleetvm explain win10 -n vms`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.complete(); err != nil {
				return err
			}
			fvm := &fleetv1alpha1.FleetVirtualMachine{}
			if err := o.client.Get(cmd.Context(), client.ObjectKey{Namespace: o.namespace, Name: args[0]}, fvm); err != nil {
				return explainError(err, kindFVM, o.namespace, args[0])
			}
			in, err := explain.Read(cmd.Context(), o.client, fvm, envLabel)
			if err != nil {
				return err
			}
			in.Now = o.now()
			verdicts, err := explain.Explain(in)
			if err != nil {
				return err
			}
			if err := writeExplain(o.out, verdicts); err != nil {
				return err
			}
			return o.explainRolloutOf(cmd.Context(), fvm)
		},
	}
	cmd.Flags().StringVar(&envLabel, "environment-label", envLabel, "The cluster label that holds the environment (the hub's --environment-label).")
	return cmd
}

// writeExplain prints one row per cluster, then the counts per reason.
func writeExplain(out io.Writer, verdicts []explain.Verdict) error {
	tw := newTable(out)
	_, _ = fmt.Fprintln(tw, "CLUSTER\tREASON\tDETAIL")
	for _, v := range verdicts {
		_, _ = fmt.Fprintf(tw, "%s\t%s\t%s\n", v.Cluster, v.Reason, v.Detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	counts := explain.Summarize(verdicts, 0)
	slices.SortStableFunc(counts, func(a, b explain.Count) int { return b.Count - a.Count })
	_, err := fmt.Fprintf(out, "\n%d clusters: %s\n", len(verdicts), summaryLine(counts))
	return err
}

func summaryLine(counts []explain.Count) string {
	if len(counts) == 0 {
		return "none in the cluster sets bound to the namespace"
	}
	s := ""
	for i, c := range counts {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%d %s", c.Count, c.Reason)
	}
	return s
}

// explainRolloutOf says, for a rollout that has not finished, where each
// cluster it has not finished with stands and why.
func (o *options) explainRolloutOf(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine) error {
	st := fvm.Status.Rollout
	if fvm.Spec.Rollout == nil || st == nil || !slices.ContainsFunc(fvm.Status.Clusters, func(c fleetv1alpha1.ClusterStatus) bool { return c.Rollout != nil }) {
		return nil
	}
	why, err := o.explainRollout(ctx, fvm)
	if err != nil {
		return err
	}
	_, _ = fmt.Fprintf(o.out, "\nrollout of revision %d: %s", st.Revision, orUnknown(string(st.Phase)))
	if st.Message != "" {
		_, _ = fmt.Fprintf(o.out, " (%s)", st.Message)
	}
	_, _ = fmt.Fprintln(o.out)
	if why.note != "" {
		_, _ = fmt.Fprintln(o.out, why.note)
	}
	return writeRolloutClusters(o.out, fvm, why, o.now())
}
