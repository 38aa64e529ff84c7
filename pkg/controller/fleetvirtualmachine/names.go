package fleetvirtualmachine

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

const (
	// maxNameLength keeps generated names valid as label values: OCM labels
	// PlacementDecisions with their Placement's name.
	maxNameLength = 63
	hashLength    = 8
)

// ChildName is the name of a FleetVirtualMachine's Placement and
// ApplicationSet in the Argo CD namespace: "fvm-<namespace>.<name>".
// Namespaces hold no dot, so the first dot splits the two and no two
// FleetVirtualMachines share a name (team-a/x is fvm-team-a.x, team/a-x is
// fvm-team.a-x). Past 63 characters it is shortened and ends with a hash of
// the full key; every object found by name is checked for its owner
// before it is changed.
func ChildName(key types.NamespacedName) string {
	return boundedName("fvm-"+key.Namespace+"."+key.Name, key.String())
}

// sharedName is the name of the shared Placement and GitOpsCluster of a
// cluster set: "fleetvm-<set>".
func sharedName(clusterSet string) string {
	return boundedName("fleetvm-"+clusterSet, clusterSet)
}

func boundedName(name, key string) string {
	if len(name) <= maxNameLength {
		return name
	}
	sum := sha256.Sum256([]byte(key))
	h := hex.EncodeToString(sum[:])[:hashLength]
	prefix := strings.TrimRight(name[:maxNameLength-hashLength-1], "-.")
	return prefix + "-" + h
}
