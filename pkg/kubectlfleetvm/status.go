package kubectlfleetvm

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

const kindFVM = "FleetVirtualMachine"

// conditionOrder is the order conditions are shown in.
var conditionOrder = []string{
	fleetv1alpha1.ConditionReady,
	fleetv1alpha1.ConditionPlaced,
	fleetv1alpha1.ConditionDelivered,
	fleetv1alpha1.ConditionAvailable,
	fleetv1alpha1.ConditionDegraded,
}

func newStatusCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status [NAME]",
		Short: "Show a FleetVirtualMachine on every cluster, or one line per FleetVirtualMachine",
		Example: `  # every FleetVirtualMachine in the namespace, one line each
  kubectl fleetvm status -n vms

  # every copy of one, cluster by cluster
  kubectl fleetvm status -n vms rhel9`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.complete(); err != nil {
				return err
			}
			if len(args) == 1 {
				if o.allNamespaces {
					return fmt.Errorf("a NAME and --all-namespaces do not go together: give -n NAMESPACE instead")
				}
				return o.statusOne(cmd.Context(), args[0])
			}
			return o.statusList(cmd.Context())
		},
	}
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "List FleetVirtualMachines in all namespaces.")
	return cmd
}

func (o *options) statusOne(ctx context.Context, name string) error {
	fvm := &fleetv1alpha1.FleetVirtualMachine{}
	if err := o.client.Get(ctx, client.ObjectKey{Namespace: o.namespace, Name: name}, fvm); err != nil {
		return explainError(err, kindFVM, o.namespace, name)
	}
	// Before fillFromReports, which makes brief entries look detailed.
	if err := o.fillConsoles(ctx, fvm, brief); err != nil {
		_, _ = fmt.Fprintf(o.errOut, "Clusters shown in brief have no console link: %v\n", err)
	}
	if err := o.fillFromReports(ctx, fvm); err != nil {
		_, _ = fmt.Fprintf(o.errOut, "Clusters shown in brief stay brief: cannot read the agents' VMReports: %v\n", err)
	}
	return writeStatus(o.out, fvm, o.now())
}

// brief tells an entry the status keeps compact: on a large fleet only
// the entries needing attention, and the first others, carry details.
func brief(c fleetv1alpha1.ClusterStatus) bool {
	return c.LastTransitionTime == nil && c.Message == "" && c.PrintableStatus == ""
}

// fillFromReports completes the entries the status keeps brief from the
// VMReports the clusters' agents write on the hub (one list call): the
// VM's printableStatus, node and IP addresses. An unreachable cluster's
// entry is never brief, so no stale report is shown.
func (o *options) fillFromReports(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine) error {
	if !slices.ContainsFunc(fvm.Status.Clusters, brief) {
		return nil
	}
	byCluster, err := o.reportedVMs(ctx, fvm)
	if err != nil {
		return err
	}
	for i, c := range fvm.Status.Clusters {
		if vm, ok := byCluster[c.Cluster]; ok && brief(c) && c.Phase != fleetv1alpha1.ClusterPhaseUnknown {
			fvm.Status.Clusters[i].PrintableStatus = vm.PrintableStatus
			fvm.Status.Clusters[i].Node = vm.Node
			fvm.Status.Clusters[i].IPAddresses = vm.IPAddresses
			fvm.Status.Clusters[i].Message = "from the cluster's VMReport"
		}
	}
	return nil
}

// reportedVMs reads, by cluster, the VM each cluster's agent reports for
// the FleetVirtualMachine (its VMReports on the hub, one list call).
func (o *options) reportedVMs(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine) (map[string]fleetv1alpha1.VMState, error) {
	reports := &fleetv1alpha1.VMReportList{}
	if err := o.client.List(ctx, reports, client.MatchingFields{"metadata.name": fvm.Namespace + "." + fvm.Name}); err != nil {
		return nil, err
	}
	byCluster := map[string]fleetv1alpha1.VMState{}
	for _, r := range reports.Items {
		if r.Spec.FleetVM.Namespace == fvm.Namespace && r.Spec.FleetVM.Name == fvm.Name && len(r.Spec.VMs) > 0 {
			byCluster[r.Namespace] = r.Spec.VMs[0]
		}
	}
	return byCluster, nil
}

func (o *options) statusList(ctx context.Context) error {
	list := &fleetv1alpha1.FleetVirtualMachineList{}
	if err := o.client.List(ctx, list, client.InNamespace(o.listNamespace())); err != nil {
		return explainError(err, kindFVM, o.listNamespace(), "")
	}
	if len(list.Items) == 0 {
		_, _ = fmt.Fprintln(o.errOut, noneFound("FleetVirtualMachines", o.listNamespace()))
		return nil
	}
	return writeList(o.out, list.Items, o.allNamespaces, o.now())
}

func noneFound(what, namespace string) string {
	if namespace == "" {
		return fmt.Sprintf("No %s found.", what)
	}
	return fmt.Sprintf("No %s found in namespace %q.", what, namespace)
}

// writeStatus prints one FleetVirtualMachine: a header, one row per
// cluster, the summary and the conditions.
func writeStatus(out io.Writer, fvm *fleetv1alpha1.FleetVirtualMachine, now time.Time) error {
	st := fvm.Status
	_, _ = fmt.Fprintf(out, "FleetVirtualMachine %s/%s  runStrategy %s  generation %d, status observed %d\n",
		fvm.Namespace, fvm.Name, runStrategyOf(fvm), fvm.Generation, st.ObservedGeneration)
	switch {
	case st.ObservedGeneration == 0 && len(st.Conditions) == 0:
		_, _ = fmt.Fprintln(out, "No status yet: the FleetVM hub controller has not reconciled this object.")
		return nil
	case st.ObservedGeneration < fvm.Generation:
		_, _ = fmt.Fprintf(out, "The status below is for generation %d: the hub controller has not caught up with generation %d yet.\n",
			st.ObservedGeneration, fvm.Generation)
	}
	_, _ = fmt.Fprintln(out)

	if len(st.Clusters) == 0 {
		_, _ = fmt.Fprintln(out, "No clusters: the placement has decided none yet.")
	} else {
		tw := newTable(out)
		row(tw, "CLUSTER", "ENV", "PHASE", "READY", "NODE", "IPS", "SYNC/HEALTH", "SINCE", "MESSAGE")
		for _, c := range st.Clusters {
			row(tw, c.Cluster, c.Environment, string(c.Phase), fmt.Sprint(c.Ready), c.Node, join(c.IPAddresses),
				syncHealth(c.SyncStatus, c.Health), age(now, c.LastTransitionTime), c.Message)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if err := writeConsoles(out, st.Clusters); err != nil {
			return err
		}
	}
	s := st.Summary
	_, _ = fmt.Fprintf(out, "\nSummary: desired %d, placed %d, ready %d, running %d, stopped %d, failed %d, unknown %d\n",
		s.Desired, s.Placed, s.Ready, s.Running, s.Stopped, s.Failed, s.Unknown)

	if len(st.Conditions) > 0 {
		_, _ = fmt.Fprintln(out)
		tw := newTable(out)
		row(tw, "CONDITION", "STATUS", "REASON", "MESSAGE")
		for _, c := range sortedConditions(fvm) {
			row(tw, c.Type, c.Status, c.Reason, c.Message)
		}
		return tw.Flush()
	}
	return nil
}

// writeConsoles prints each copy's link to its VM page on its cluster's
// console, when any cluster has one: a table of its own, as links are
// long.
func writeConsoles(out io.Writer, clusters []fleetv1alpha1.ClusterStatus) error {
	if !slices.ContainsFunc(clusters, func(c fleetv1alpha1.ClusterStatus) bool { return c.ConsoleURL != "" }) {
		return nil
	}
	_, _ = fmt.Fprintln(out)
	tw := newTable(out)
	row(tw, "CLUSTER", "CONSOLE")
	for _, c := range clusters {
		row(tw, c.Cluster, c.ConsoleURL)
	}
	return tw.Flush()
}

// writeList prints one line per FleetVirtualMachine.
func writeList(out io.Writer, items []fleetv1alpha1.FleetVirtualMachine, allNamespaces bool, now time.Time) error {
	items = slices.Clone(items)
	slices.SortFunc(items, func(a, b fleetv1alpha1.FleetVirtualMachine) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	tw := newTable(out)
	header := []string{"NAME", "RUNSTRATEGY", "DESIRED", "PLACED", "READY", "RUNNING", "STOPPED", "FAILED", "UNKNOWN", "STATUS", "AGE"}
	if allNamespaces {
		header = append([]string{"NAMESPACE"}, header...)
	}
	row(tw, header...)
	for i := range items {
		fvm := &items[i]
		s := fvm.Status.Summary
		cells := []string{fvm.Name, string(runStrategyOf(fvm)), itoa(s.Desired), itoa(s.Placed), itoa(s.Ready),
			itoa(s.Running), itoa(s.Stopped), itoa(s.Failed), itoa(s.Unknown), readyReason(fvm), age(now, &fvm.CreationTimestamp)}
		if allNamespaces {
			cells = append([]string{fvm.Namespace}, cells...)
		}
		row(tw, cells...)
	}
	return tw.Flush()
}

// readyReason is what the STATUS column of `kubectl get fvm` shows: the
// Ready condition's reason, marked when the status is stale.
func readyReason(fvm *fleetv1alpha1.FleetVirtualMachine) string {
	c := meta.FindStatusCondition(fvm.Status.Conditions, fleetv1alpha1.ConditionReady)
	if c == nil {
		return "NoStatus"
	}
	if fvm.Status.ObservedGeneration < fvm.Generation {
		return c.Reason + " (outdated)"
	}
	return c.Reason
}

func sortedConditions(fvm *fleetv1alpha1.FleetVirtualMachine) []conditionView {
	var out []conditionView
	for _, c := range fvm.Status.Conditions {
		out = append(out, conditionView{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message})
	}
	rank := func(t string) int {
		if i := slices.Index(conditionOrder, t); i >= 0 {
			return i
		}
		return len(conditionOrder)
	}
	slices.SortStableFunc(out, func(a, b conditionView) int {
		if d := rank(a.Type) - rank(b.Type); d != 0 {
			return d
		}
		return strings.Compare(a.Type, b.Type)
	})
	return out
}

type conditionView struct {
	Type, Status, Reason, Message string
}

func syncHealth(sync, health string) string {
	if sync == "" && health == "" {
		return none
	}
	return cell(sync) + "/" + cell(health)
}

// runStrategyOf is the runStrategy in effect: the API defaults it to Always.
func runStrategyOf(fvm *fleetv1alpha1.FleetVirtualMachine) fleetv1alpha1.RunStrategy {
	if fvm.Spec.RunStrategy == "" {
		return fleetv1alpha1.RunStrategyAlways
	}
	return fvm.Spec.RunStrategy
}
