package runner

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

const (
	// IndexMoveFleetVM indexes FleetVirtualMachineMoves by the
	// FleetVirtualMachine they move.
	IndexMoveFleetVM = "fleetvm.io/move-fleetvm"
	// IndexMoveNotStarted indexes FleetVirtualMachineMoves not started
	// yet (status.phase "" or Pending: "true"), so a score, decision or
	// cluster event reads those few, not every move ever made.
	IndexMoveNotStarted = "fleetvm.io/move-not-started"
)

// NotStarted tells whether a move has not left Pending.
func NotStarted(m *fleetv1alpha1.FleetVirtualMachineMove) bool {
	return m.Status.Phase == "" || m.Status.Phase == fleetv1alpha1.MovePending
}

// SetupIndexes registers the indexes the Runner lists by.
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &fleetv1alpha1.FleetVirtualMachineMove{}, IndexMoveFleetVM, moveFleetVM); err != nil {
		return fmt.Errorf("index %s: %w", IndexMoveFleetVM, err)
	}
	if err := indexer.IndexField(ctx, &fleetv1alpha1.FleetVirtualMachineMove{}, IndexMoveNotStarted, moveNotStarted); err != nil {
		return fmt.Errorf("index %s: %w", IndexMoveNotStarted, err)
	}
	if err := indexer.IndexField(ctx, &workv1.ManifestWork{}, IndexMoveWork, moveWork); err != nil {
		return fmt.Errorf("index %s: %w", IndexMoveWork, err)
	}
	return nil
}

func moveFleetVM(o client.Object) []string {
	return []string{o.(*fleetv1alpha1.FleetVirtualMachineMove).Spec.FleetVirtualMachine}
}

func moveNotStarted(o client.Object) []string {
	if NotStarted(o.(*fleetv1alpha1.FleetVirtualMachineMove)) {
		return []string{"true"}
	}
	return nil
}

func moveWork(o client.Object) []string {
	if k := WorkKey(o); k != "" {
		return []string{k}
	}
	return nil
}

// FleetVMsNotStarted are the FleetVirtualMachines with a move that has
// not started: its target may qualify now. It reads only those moves
// (IndexMoveNotStarted), straight from the cache without copies: ended
// moves stay until their TTL and a fleet's history must not cost every
// score, decision or cluster event.
func FleetVMsNotStarted(ctx context.Context, c client.Client) []reconcile.Request {
	list := &fleetv1alpha1.FleetVirtualMachineMoveList{}
	if err := c.List(ctx, list, client.MatchingFields{IndexMoveNotStarted: "true"}, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "list the FleetVirtualMachineMoves not started")
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		m := &list.Items[i]
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: m.Namespace, Name: m.Spec.FleetVirtualMachine}})
	}
	return out
}
