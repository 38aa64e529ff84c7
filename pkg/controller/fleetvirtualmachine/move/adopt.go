package move

import (
	"strings"

	"k8s.io/apimachinery/pkg/types"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// Frozen are the copies a move held that no move of the VM holds now,
// with the run strategy each is kept in: a FleetVirtualMachine deleted
// with deletionPolicy Orphan in the middle of a move and created again,
// or a hub restored from a backup taken mid-move, finds the move's
// copies on the clusters. The hub adopts them, but never starts one
// that a lost move held stopped, or as a receiver: started with the
// fleet's run strategy, a source and a target would run at once, or a
// source whose disks are behind its target's.
//
// A copy is frozen while its cluster reports it under a hold
// (AnnotationHold) of a move not in active, in the run strategy the
// hold gave it (Halted, Manual or WaitAsReceiver), and another copy of
// the VM is present: it stays as it is until the operator removes the
// copy not wanted. A lone copy is the VM, and follows the fleet.
func Frozen(copies map[string]Copy, active []types.UID) map[string]fleetv1alpha1.RunStrategy {
	present := 0
	for _, c := range copies {
		if c.Present {
			present++
		}
	}
	if present < 2 {
		return nil
	}
	out := map[string]fleetv1alpha1.RunStrategy{}
	for cluster, c := range copies {
		if !c.Present || c.Removing || c.Hold == "" || heldBy(c.Hold, active) {
			continue
		}
		switch rs := fleetv1alpha1.RunStrategy(c.RunStrategy); rs {
		case fleetv1alpha1.RunStrategyHalted, fleetv1alpha1.RunStrategyManual, RunStrategyWaitAsReceiver:
			out[cluster] = rs
		}
	}
	return out
}

// heldBy tells whether hold is a hold of one of the moves (HoldOf).
func heldBy(hold string, moves []types.UID) bool {
	for _, uid := range moves {
		if strings.HasPrefix(hold, string(uid)+".") {
			return true
		}
	}
	return false
}
