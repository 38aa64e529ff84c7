package drain

import (
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// AnnotationCluster on a drain's move holds the UID of the ManagedCluster
// whose drain made it; the label fleetv1alpha1.LabelDrain holds its name.
//
// A drain counts a move, and deletes it when the drain ends, only when it
// carries both, the UID that of the cluster as it is now (Made). The label
// alone is a name anyone who may create moves in a namespace can write:
// a team would take every slot of a drain with moves of its own, or keep
// its copies on the cluster with a move the drain would take for its own.
// Two guards stand against that:
//
//   - admission (pkg/webhook, MoveValidator) refuses the label and this
//     annotation, on create and on any change, from anyone but fleetvm-hub
//     itself;
//   - the UID is what the label cannot forge where admission is off
//     (--disable-webhooks, or the webhook set to Ignore while fleetvm-hub
//     is down): it is not in the cluster's name and no tenant object holds
//     it, and a team that cannot read ManagedClusters cannot learn it. It
//     also ties a move to one life of the cluster: a cluster deleted and
//     registered again under its name starts its drains with none of the
//     old one's moves.
//
// No field of a namespaced object is proof against its own namespace's
// writers when admission is off, so neither is this (a team that reads
// the ManagedCluster could copy its UID); admission is what makes it
// proof, the UID is what the controller checks whatever admission does.
// An ownerReference to the ManagedCluster would carry the same UID, but
// the garbage collector would then delete a drain's moves, started ones
// included, with the cluster: a move must end by its own protocol.
const AnnotationCluster = "fleetvm.io/drain-cluster"

// Made tells whether the drain of mc made m: the drain label names mc
// and the annotation holds mc's UID.
func Made(m *fleetv1alpha1.FleetVirtualMachineMove, mc *clusterv1.ManagedCluster) bool {
	return mc.UID != "" && m.Labels[fleetv1alpha1.LabelDrain] == mc.Name &&
		m.Annotations[AnnotationCluster] == string(mc.UID)
}

// madeByAnyDrainOf tells whether a drain of a cluster named cluster made
// m, in this life of the cluster or an earlier one: what a drain ends when
// its cluster is gone and its UID with it.
func madeByAnyDrainOf(m *fleetv1alpha1.FleetVirtualMachineMove, cluster string) bool {
	return m.Labels[fleetv1alpha1.LabelDrain] == cluster && m.Annotations[AnnotationCluster] != ""
}
