package delivery

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

const (
	// MaxNameLength keeps generated names valid as label values: OCM labels
	// PlacementDecisions with their Placement's name.
	MaxNameLength = 63
	HashLength    = 8
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

// SharedName is the name of the shared Placement and GitOpsCluster of a
// cluster set: "fleetvm-<set>".
func SharedName(clusterSet string) string {
	return boundedName("fleetvm-"+clusterSet, clusterSet)
}

func boundedName(name, key string) string {
	if len(name) <= MaxNameLength {
		return name
	}
	sum := sha256.Sum256([]byte(key))
	h := hex.EncodeToString(sum[:])[:HashLength]
	prefix := strings.TrimRight(name[:MaxNameLength-HashLength-1], "-.")
	return prefix + "-" + h
}
