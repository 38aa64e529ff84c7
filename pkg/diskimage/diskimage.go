// Package diskimage names what a FleetDiskImage becomes on a managed
// cluster, so that the hub's controllers, its webhook and the agents'
// image IDs agree.
//
// A FleetDiskImage ns/name is imported on each cluster that needs it into a
// CDI DataVolume, and published as a CDI DataSource of the same name, in one
// well-known namespace of the cluster (DefaultNamespace unless the hub is
// told otherwise). VMs boot from it through a dataVolumeTemplate whose
// sourceRef names that DataSource, so KubeVirt itself holds the VM until the
// import is done.
package diskimage

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// DefaultNamespace is the namespace on the managed clusters where images
// are imported.
const DefaultNamespace = "fleetvm-images"

// Finalizer holds a FleetDiskImage while VMs reference it and until its
// copies on the clusters are removed.
const Finalizer = "fleetvm.io/image-in-use"

// Labels and annotations of the ManifestWorks that carry images.
const (
	// AnnotationImage names the FleetDiskImage ("namespace/name").
	AnnotationImage = "fleetvm.io/image"
)

// ObjectName is the name of the DataVolume and DataSource of the image on
// a cluster: "<namespace>.<name>". Namespaces hold no dot, so images of
// team-a/x and team/a-x never share one. Past 63 characters it is
// shortened and ends with a hash of the whole key.
func ObjectName(key types.NamespacedName) string {
	return shorten(key.Namespace+"."+key.Name, 63)
}

// WorkName is the name of the ManifestWork carrying the image to a
// cluster: "fleetvm-image-<namespace>.<name>".
func WorkName(key types.NamespacedName) string {
	return shorten("fleetvm-image-"+key.Namespace+"."+key.Name, 253)
}

// ScopedName is the name, in the image namespace of each cluster, of a
// Secret or ConfigMap a FleetDiskImage of namespace ns refers to as name:
// "<ns>.<name>". Every namespace's images are imported in one namespace of
// the clusters; the prefix keeps a team from naming another team's
// credentials there.
func ScopedName(ns, name string) string {
	if name == "" {
		return ""
	}
	return shorten(ns+"."+name, 253)
}

// ImageID is how the agents' inventories name the image: the DataSource
// VMs clone it from.
func ImageID(imageNamespace string, key types.NamespacedName) string {
	return fmt.Sprintf("datasource:%s/%s", imageNamespace, ObjectName(key))
}

func shorten(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	h := hex.EncodeToString(sum[:])[:10]
	// The cut must not leave a dash or dot before the hash's dash.
	return strings.TrimRight(s[:limit-11], "-.") + "-" + h
}
