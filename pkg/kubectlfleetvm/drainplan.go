package kubectlfleetvm

import (
	"fmt"
	"io"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/drain"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/move"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/placement"
	"github.com/fleetvm/fleetvm/pkg/explain"
)

// The plan drain --dry-run prints, as a pure function of what it read.

// planInput is what drain --dry-run plans from.
type planInput struct {
	// Cluster is the cluster to drain.
	Cluster string
	Limits  drain.Limits
	// FVMs are every FleetVirtualMachine, in every namespace: their copies
	// on Cluster are planned, and each counts towards the load of every
	// cluster its status lists, as the hub's placement.ClusterLoad counts.
	FVMs []fleetv1alpha1.FleetVirtualMachine
	// Verdicts are pkg/explain's, per cluster, for each FleetVM with a copy
	// on Cluster.
	Verdicts map[types.NamespacedName][]explain.Verdict
	// Scores are the fleetvm-capacity score values of the clusters
	// explained, nil for one with none or with an expired one: what the
	// hub's pick ranks by for the FreeCapacity prioritizer.
	Scores map[string]map[string]int32
	// Draining are the clusters with the drain taint.
	Draining map[string]bool
	// Live are the clusters that offer decentralized live migration.
	Live map[string]bool
}

// planRow is one copy in the plan of a drain.
type planRow struct {
	Wave int
	drain.Copy
	// Method is how the copy would move; empty when it cannot.
	Method fleetv1alpha1.MoveMethod
	// To is the likely target; empty when there is none.
	To string
	// Reason says why the copy cannot move, or has no target.
	Reason string
}

// planDrain plans a drain as drain.Waves does: the copies on the cluster
// in waves within the limits, each with the method it would move by
// (move.MethodFor with Auto; Live for Cold when both clusters offer it)
// and a likely target (pickTarget). A copy given a target counts on it
// for the rows after, as the hub counts a FleetVM on the cluster its move
// goes to.
func planDrain(in planInput) []planRow {
	byKey := map[types.NamespacedName]*fleetv1alpha1.FleetVirtualMachine{}
	load := placement.NewClusterLoad()
	for i := range in.FVMs {
		f := &in.FVMs[i]
		key := types.NamespacedName{Namespace: f.Namespace, Name: f.Name}
		byKey[key] = f
		load.Set(key, statusClusters(f))
	}
	var rows []planRow
	for w, wave := range drain.Waves(drain.CopiesOn(in.FVMs, in.Cluster), in.Limits) {
		for _, c := range wave {
			key := types.NamespacedName{Namespace: c.Namespace, Name: c.FleetVM}
			fvm := byKey[key]
			r := planRow{Wave: w + 1, Copy: c}
			method, refused := move.MethodFor(fvm, fleetv1alpha1.MoveMethodAuto)
			if refused != "" {
				r.Reason = refused
				rows = append(rows, r)
				continue
			}
			r.Method = method
			if r.To = pickTarget(fvm, in.Cluster, in.Verdicts[key], in.Draining, in.Scores, load); r.To == "" {
				r.Reason = fmt.Sprintf("no other cluster qualifies (kubectl fleetvm explain %s -n %s)", c.FleetVM, c.Namespace)
			} else {
				// A FleetVM has one copy on the cluster, so one row.
				load.Set(key, append(statusClusters(fvm), r.To))
				if method == fleetv1alpha1.MoveMethodCold && in.Live[in.Cluster] && in.Live[r.To] {
					// As the hub decides: Live when both offer it.
					r.Method = fleetv1alpha1.MoveMethodLive
				}
			}
			rows = append(rows, r)
		}
	}
	return rows
}

// pickTarget is the likely target of fvm's copy on from, chosen as the
// hub chooses a move's target: the candidates are the clusters
// pkg/explain says qualify for the FleetVM (NotNeeded: the scheduler's
// predicates and the agent's current score, the hub's fit), less those
// holding a copy of it (a leaving one too), those being drained, and
// from; placement.Pick ranks them, as for a new copy, and the first is
// the target. Pick ranks by the FleetVM's prioritizer: FreeCapacity by
// the free CPU and memory of the scores as read now (the copies planned
// before are not taken off them: the agent scores again once they land);
// every prioritizer then by load, the FleetVMs on a cluster with the
// copies planned before counted; ties by a hash of the FleetVM's key.
func pickTarget(fvm *fleetv1alpha1.FleetVirtualMachine, from string, verdicts []explain.Verdict,
	draining map[string]bool, scores map[string]map[string]int32, load *placement.ClusterLoad) string {
	var candidates []string
	for _, v := range verdicts {
		holds := slices.ContainsFunc(fvm.Status.Clusters, func(c fleetv1alpha1.ClusterStatus) bool { return c.Cluster == v.Cluster })
		if v.Reason != explain.NotNeeded || holds || draining[v.Cluster] || v.Cluster == from {
			continue
		}
		candidates = append(candidates, v.Cluster)
	}
	if len(candidates) == 0 {
		return ""
	}
	best := placement.Pick(placement.PickInput{
		Key: types.NamespacedName{Namespace: fvm.Namespace, Name: fvm.Name}, Desired: ptr.To[int32](1), Candidates: candidates,
		Load: load.Of, Fits: func(string) bool { return true }, // explain's NotNeeded is the fit
		Free: placement.FreeCapacity(fvm.Spec.Placement.Prioritizer, func(c string) map[string]int32 { return scores[c] }),
	})
	if len(best) == 0 {
		return ""
	}
	return best[0]
}

// statusClusters are the clusters fvm's status lists.
func statusClusters(fvm *fleetv1alpha1.FleetVirtualMachine) []string {
	out := make([]string, 0, len(fvm.Status.Clusters)+1)
	for _, c := range fvm.Status.Clusters {
		out = append(out, c.Cluster)
	}
	return out
}

// writeDrainPlan prints the plan of a drain: a header, one row per copy,
// and a summary.
func writeDrainPlan(out io.Writer, cluster string, limits drain.Limits, rows []planRow) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintf(out, "Dry run, nothing changed: no FleetVirtualMachine has a copy on %s, so draining it moves nothing.\n", cluster)
		return err
	}
	waves := rows[len(rows)-1].Wave
	_, _ = fmt.Fprintf(out, "Dry run, nothing changed. Draining %s would move %s in %s "+
		"(at most %d at a time, %d from one node).\n\n", cluster, counted(len(rows), "copy", "copies"), counted(waves, "wave", "waves"),
		limits.PerCluster, limits.PerNode)
	tw := newTable(out)
	row(tw, "WAVE", "NAMESPACE", "FLEETVM", "NODE", "METHOD", "TO", "REASON")
	targets, stuck := 0, 0
	for _, r := range rows {
		row(tw, itoa(r.Wave), r.Namespace, r.FleetVM, r.Node, string(r.Method), r.To, r.Reason)
		if r.To != "" {
			targets++
		} else {
			stuck++
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(out, "\nSummary: %s, %d with a target, %d cannot move\n", counted(len(rows), "copy", "copies"), targets, stuck)
	return err
}
