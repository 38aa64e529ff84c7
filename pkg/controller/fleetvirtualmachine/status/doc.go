// Package status computes a FleetVirtualMachine's status from what the
// controller read and decided: pure functions with no client.
//
//   - Compute (status.go) builds the whole status from Inputs: one entry
//     per cluster of the placement decision, the summary, and every owned
//     condition (Placed, Delivered, Ready, Available, Degraded, Confined),
//     keeping lastTransitionTimes when nothing changed.
//   - bounds.go keeps the status within the CRD's limits whatever the
//     fleet: messages truncated, names counted past the first, entries
//     compacted past the first detailed ones.
//   - ExclusionCounts (exclusions.go) turns the placement explanation
//     into status.placement.excluded.
//
// It imports the placement core (its Outcome is an input) and nothing of
// the controller.
package status
