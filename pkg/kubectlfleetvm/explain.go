package kubectlfleetvm

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/capacity"
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
the cluster namespaces.`,
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
			in, err := readExplainInput(cmd.Context(), o.client, fvm, envLabel)
			if err != nil {
				return err
			}
			in.Now = o.now()
			verdicts, err := explain.Explain(in)
			if err != nil {
				return err
			}
			return writeExplain(o.out, verdicts)
		},
	}
	cmd.Flags().StringVar(&envLabel, "environment-label", envLabel, "The cluster label that holds the environment (the hub's --environment-label).")
	return cmd
}

// readExplainInput gathers what the scheduler sees for fvm: the clusters
// of the sets it asks for that are bound to its namespace, their capacity
// scores, and where the VM was placed and runs.
func readExplainInput(ctx context.Context, c client.Client, fvm *fleetv1alpha1.FleetVirtualMachine, envLabel string) (explain.Input, error) {
	p := fvm.Spec.Placement
	in := explain.Input{
		EnvironmentLabel: envLabel, Environment: p.Environment, Selector: p.ClusterSelector, Tolerations: p.Tolerations,
	}
	if shape, ok := capacity.ShapeOf(fvm); ok {
		in.Shape = &shape
	}
	if fvm.Status.Placement != nil {
		in.Decided = fvm.Status.Placement.DecidedClusters
	}
	for _, cs := range fvm.Status.Clusters {
		if cs.Phase != fleetv1alpha1.ClusterPhaseLeaving && cs.Phase != fleetv1alpha1.ClusterPhaseRemoving {
			in.Running = append(in.Running, cs.Cluster)
		}
	}
	sets := p.ClusterSets
	if len(sets) == 0 {
		sets = []string{"default"}
	}
	seen := map[string]bool{}
	for _, set := range sets {
		// Only sets bound to the namespace count, as for the hub.
		if err := c.Get(ctx, client.ObjectKey{Namespace: fvm.Namespace, Name: set}, &clusterv1beta2.ManagedClusterSetBinding{}); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return in, fmt.Errorf("get ManagedClusterSetBinding %s/%s: %w", fvm.Namespace, set, err)
		}
		members, err := setMembers(ctx, c, set)
		if err != nil {
			return in, err
		}
		for _, mc := range members {
			if seen[mc.Name] {
				continue
			}
			seen[mc.Name] = true
			cl := explain.Cluster{Name: mc.Name, Labels: mc.Labels, Taints: mc.Spec.Taints}
			score := &clusterv1alpha1.AddOnPlacementScore{}
			switch err := c.Get(ctx, client.ObjectKey{Namespace: mc.Name, Name: fleetv1alpha1.CapacityScoreName}, score); {
			case apierrors.IsNotFound(err):
			case err != nil:
				return in, fmt.Errorf("get AddOnPlacementScore %s/%s: %w", mc.Name, fleetv1alpha1.CapacityScoreName, err)
			default:
				cl.Scores = map[string]int32{}
				for _, s := range score.Status.Scores {
					cl.Scores[s.Name] = s.Value
				}
				if score.Status.ValidUntil != nil {
					cl.ValidUntil = score.Status.ValidUntil.Time
				}
			}
			in.Clusters = append(in.Clusters, cl)
		}
	}
	return in, nil
}

// setMembers lists the ManagedClusters of a ManagedClusterSet, by its
// selector: the cluster-set label (the default) or a label selector.
func setMembers(ctx context.Context, c client.Client, set string) ([]clusterv1.ManagedCluster, error) {
	mcs := &clusterv1beta2.ManagedClusterSet{}
	if err := c.Get(ctx, client.ObjectKey{Name: set}, mcs); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get ManagedClusterSet %s: %w", set, err)
	}
	sel := labels.SelectorFromSet(labels.Set{clusterv1beta2.ClusterSetLabel: set})
	if cs := mcs.Spec.ClusterSelector; cs.SelectorType == clusterv1beta2.LabelSelector {
		s, err := metav1.LabelSelectorAsSelector(cs.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("ManagedClusterSet %s selector: %w", set, err)
		}
		sel = s
	}
	var list clusterv1.ManagedClusterList
	if err := c.List(ctx, &list, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("list ManagedClusters of set %s: %w", set, err)
	}
	return list.Items, nil
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
