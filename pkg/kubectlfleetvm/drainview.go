package kubectlfleetvm

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/drain"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/move"
)

// This file holds what drain and undrain decide and print, as pure
// functions of what they read: the taint, and the progress of a drain.

// drainTaint is the taint that drains a cluster, added at now.
func drainTaint(now time.Time) clusterv1.Taint {
	return clusterv1.Taint{Key: fleetv1alpha1.DrainTaintKey, Effect: clusterv1.TaintEffectNoSelectIfNew, TimeAdded: metav1.NewTime(now)}
}

// isDrainTaint tells the drain taint by its key, whatever its effect.
func isDrainTaint(t clusterv1.Taint) bool { return t.Key == fleetv1alpha1.DrainTaintKey }

// draining tells whether a cluster with these taints is being drained.
func draining(taints []clusterv1.Taint) bool { return slices.ContainsFunc(taints, isDrainTaint) }

// drainTaints returns the taints a cluster should have: with the drain
// taint (on) or without it, every other taint as it was; and whether that
// differs from taints.
func drainTaints(taints []clusterv1.Taint, on bool, now time.Time) ([]clusterv1.Taint, bool) {
	if draining(taints) == on {
		return taints, false
	}
	out := slices.DeleteFunc(slices.Clone(taints), isDrainTaint)
	if on {
		out = append(out, drainTaint(now))
	}
	return out, true
}

// taintsPatch is a JSON merge patch of spec.taints (a list: the patch
// replaces it whole) that the API server refuses with a Conflict when the
// cluster changed since resourceVersion was read, so a taint someone else
// added meanwhile is never dropped.
func taintsPatch(taints []clusterv1.Taint, resourceVersion string) ([]byte, error) {
	if taints == nil {
		taints = []clusterv1.Taint{}
	}
	b, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": resourceVersion},
		"spec":     map[string]any{"taints": taints},
	})
	if err != nil {
		return nil, fmt.Errorf("encode taints patch: %w", err)
	}
	return b, nil
}

// drainRow is one line of a drain's progress: a copy still on the cluster
// with no move yet, or a move the drain made.
type drainRow struct {
	Namespace, FleetVM, Node, To, Method, Phase, Message string
}

// drainCounts is the summary of a drain's progress.
type drainCounts struct {
	Moved, Moving, Waiting, Failed int
	// Left are the copies still on the cluster; Stuck, those of them
	// whose last move failed: the hub does not try them again.
	Left, Stuck int
}

// ended tells whether the hub has nothing more to do for the drain: no
// move runs, none is still to start, and every copy left on the cluster
// is one whose move failed.
func (c drainCounts) ended() bool {
	return c.Waiting == 0 && c.Moving == 0 && c.Left == c.Stuck
}

// drained tells whether the drain ended with no copy left.
func (c drainCounts) drained() bool { return c.ended() && c.Left == 0 }

// drainProgress lists a drain's moves (those labelled with the cluster)
// and the copies on the cluster that no move is for yet, sorted by
// namespace and FleetVM, with the counts per state. A move whose copy has
// left shows the node the hub noted when it started it.
func drainProgress(copies []drain.Copy, moves []fleetv1alpha1.FleetVirtualMachineMove) ([]drainRow, drainCounts) {
	node := map[types.NamespacedName]string{}
	for _, c := range copies {
		node[types.NamespacedName{Namespace: c.Namespace, Name: c.FleetVM}] = c.Node
	}
	var rows []drainRow
	counts := drainCounts{Left: len(copies)}
	last := map[types.NamespacedName]fleetv1alpha1.MovePhase{}
	sorted := slices.Clone(moves)
	slices.SortFunc(sorted, func(a, b fleetv1alpha1.FleetVirtualMachineMove) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	for i := range sorted {
		m := &sorted[i]
		key := types.NamespacedName{Namespace: m.Namespace, Name: m.Spec.FleetVirtualMachine}
		last[key] = m.Status.Phase
		r := drainRow{
			Namespace: m.Namespace, FleetVM: m.Spec.FleetVirtualMachine, Node: node[key],
			To: moveTarget(m), Method: moveMethod(m), Phase: string(m.Status.Phase), Message: m.Status.Message,
		}
		if r.Node == "" {
			r.Node = m.Annotations[drain.AnnotationNode]
		}
		switch {
		case move.Active(m):
			counts.Moving++
		case m.Status.Phase == fleetv1alpha1.MoveFailed:
			counts.Failed++
		default:
			counts.Moved++
		}
		rows = append(rows, r)
	}
	for _, c := range copies {
		phase, ok := last[types.NamespacedName{Namespace: c.Namespace, Name: c.FleetVM}]
		switch {
		case !ok:
			rows = append(rows, drainRow{Namespace: c.Namespace, FleetVM: c.FleetVM, Node: c.Node, Phase: "Waiting",
				Message: "no move yet: the hub starts a few at a time"})
			counts.Waiting++
		case phase == fleetv1alpha1.MoveFailed:
			counts.Stuck++
		}
	}
	// Stable: a FleetVM's moves stay in the order they were made.
	slices.SortStableFunc(rows, func(a, b drainRow) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.FleetVM, b.FleetVM))
	})
	return rows, counts
}

// drainOutcome says how a drain that ended, ended.
func drainOutcome(cluster string, counts drainCounts) string {
	if counts.drained() {
		return fmt.Sprintf("%s is drained: no FleetVM copy left on it, no move running. "+
			"kubectl fleetvm undrain %s lets copies be placed on it again.", cluster, cluster)
	}
	return fmt.Sprintf("the drain of %s ended with %s still on it whose moves failed (see MESSAGE): the hub does not "+
		"try them again; kubectl fleetvm undrain %s, then drain it again, tries them again", cluster, counted(counts.Left, "copy", "copies"), cluster)
}

// writeDrainProgress prints the rows and the summary of a drain.
func writeDrainProgress(out io.Writer, cluster string, rows []drainRow, counts drainCounts) error {
	if len(rows) == 0 {
		_, err := fmt.Fprintf(out, "No FleetVirtualMachine has a copy on %s, and no drain move is for it.\n", cluster)
		return err
	}
	tw := newTable(out)
	row(tw, "NAMESPACE", "FLEETVM", "NODE", "TO", "METHOD", "PHASE", "MESSAGE")
	for _, r := range rows {
		row(tw, r.Namespace, r.FleetVM, r.Node, r.To, r.Method, r.Phase, r.Message)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(out, "\nSummary: moved %d, moving %d, waiting %d, failed %d\n", counts.Moved, counts.Moving, counts.Waiting, counts.Failed)
	return err
}

// moveMethod is the method of a move: the one chosen, or asked.
func moveMethod(m *fleetv1alpha1.FleetVirtualMachineMove) string {
	if m.Status.Method != "" {
		return string(m.Status.Method)
	}
	return string(m.Spec.Method)
}
