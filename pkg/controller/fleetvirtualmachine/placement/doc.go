// Package placement is the placement core of the FleetVirtualMachine
// controller: pure functions, with no client, that say where a VM is and
// goes.
//
//   - Decide (decide.go) is the one rule that removes a VM: who stays,
//     who leaves, who is removed now, who is added, and when to look again.
//   - IntentFor (intent.go) says whether the user's intent (cluster sets,
//     environment, selector) includes a cluster.
//   - Pick (pick.go) chooses a FleetVirtualMachine's new clusters from its
//     shared candidate Placement's decision, balanced by ClusterLoad (or
//     by free capacity first: FreeCapacity); it ranks a move's targets
//     too, and kubectl fleetvm drain --dry-run a drain's likely ones.
//   - ChooseOverlay (overlay.go) keeps a git source's overlay until a
//     relabelled cluster's new environment has held for the grace period.
//
// The controller reads the hub into their inputs and acts on their
// outputs; every case is unit-tested here, and Decide is fuzzed.
package placement
