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

// drainState is where one copy of a drain stands, for the summary.
type drainState int

const (
	stateWaiting drainState = iota
	stateMoving
	stateMoved
	stateFailed
)

// drainRow is one line of a drain's progress: a copy still on the cluster
// with no move yet, or a move the drain made.
type drainRow struct {
	Namespace, FleetVM, Node, To, Method, Phase, Message string
	state                                                drainState
}

// drainCounts is the summary of a drain's progress.
type drainCounts struct {
	Moved, Moving, Waiting, Failed int
}

// done tells whether a drain has ended: no copy left on the cluster and
// no move running.
func drainDone(copies []drain.Copy, counts drainCounts) bool {
	return len(copies) == 0 && counts.Moving == 0
}

// drainProgress lists a drain's moves (those labelled with the cluster)
// and the copies on the cluster that no move is for yet, sorted by
// namespace and FleetVM, with the counts per state.
func drainProgress(copies []drain.Copy, moves []fleetv1alpha1.FleetVirtualMachineMove) ([]drainRow, drainCounts) {
	node := map[types.NamespacedName]string{}
	for _, c := range copies {
		node[types.NamespacedName{Namespace: c.Namespace, Name: c.FleetVM}] = c.Node
	}
	var rows []drainRow
	var counts drainCounts
	moved := map[types.NamespacedName]bool{}
	sorted := slices.Clone(moves)
	slices.SortFunc(sorted, func(a, b fleetv1alpha1.FleetVirtualMachineMove) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	for i := range sorted {
		m := &sorted[i]
		key := types.NamespacedName{Namespace: m.Namespace, Name: m.Spec.FleetVirtualMachine}
		moved[key] = true
		r := drainRow{
			Namespace: m.Namespace, FleetVM: m.Spec.FleetVirtualMachine, Node: node[key],
			To: moveTarget(m), Method: moveMethod(m), Phase: string(m.Status.Phase), Message: m.Status.Message,
		}
		switch m.Status.Phase {
		case fleetv1alpha1.MoveSucceeded:
			r.state = stateMoved
			counts.Moved++
		case fleetv1alpha1.MoveFailed:
			r.state = stateFailed
			counts.Failed++
		default:
			r.state = stateMoving
			counts.Moving++
		}
		rows = append(rows, r)
	}
	for _, c := range copies {
		if moved[types.NamespacedName{Namespace: c.Namespace, Name: c.FleetVM}] {
			continue
		}
		rows = append(rows, drainRow{Namespace: c.Namespace, FleetVM: c.FleetVM, Node: c.Node, Phase: "Waiting",
			Message: "no move yet: the hub starts a few at a time", state: stateWaiting})
		counts.Waiting++
	}
	// Stable: a FleetVM's moves stay in the order they were made.
	slices.SortStableFunc(rows, func(a, b drainRow) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.FleetVM, b.FleetVM))
	})
	return rows, counts
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
