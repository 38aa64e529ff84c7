// Package delivery is what FleetVM writes for Argo CD and reads back from
// it, as pure functions with no client.
//
//   - Renderer.ApplicationSet (applicationset.go) builds a
//     FleetVirtualMachine's ApplicationSet: a list generator of the
//     clusters the placement decided, an inline template through the
//     fleetvm-vm chart or a git source with its overlay, the sync policy,
//     and the fields KubeVirt fills in left out of Argo CD's diff.
//   - ChildName and SharedName (names.go) name the objects in the Argo CD
//     namespace so that no two namespaces' names collide; OwnerLabels and
//     OwnerKey (labels.go) tie them to their FleetVirtualMachine.
//   - StateOf and RemovalBlocked (appstate.go) read an Application's sync,
//     health and errors, and whether Argo CD could remove its VM, from the
//     hub's view of an Application (package argoapp).
//   - NextRefresh (refresh.go) says when to ask Argo CD to refresh an
//     ApplicationSet whose Application is missing.
//
// The controller writes what these build (gitops.go) and owns the client.
package delivery
