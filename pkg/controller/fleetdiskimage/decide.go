package fleetdiskimage

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	workv1 "open-cluster-management.io/api/work/v1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// observed is everything one reconcile of a FleetDiskImage decides from,
// gathered by the controller before anything is written.
type observed struct {
	Now       time.Time
	Retention time.Duration
	Usage     Usage
	// Wanted are the clusters whose FleetVirtualMachines list the image.
	Wanted map[string]struct{}
	// Works are the image's ManifestWorks by cluster.
	Works map[string]*workv1.ManifestWork
	// Previous is the status as read, by cluster.
	Previous map[string]fleetv1alpha1.ImageClusterStatus
	// Untrusted says, for a cluster whose word cannot be trusted for
	// pruning (unavailable, no or stale inventory), why; absent: trusted.
	Untrusted map[string]string
}

// step is what to do on one cluster, and the status entry it shows. An
// Ensure entry's phase comes from the ManifestWork once it is written.
type step struct {
	Entry fleetv1alpha1.ImageClusterStatus
	// Ensure: create the ManifestWork or bring its spec up to date.
	Ensure bool
	// Prune: delete the ManifestWork; PruneEvent is the event to record.
	Prune      *workv1.ManifestWork
	PruneEvent string
}

// plan decides, for every cluster that needs the image or holds a copy,
// whether to distribute it, keep it, or prune it, and when to look again:
// a copy is pruned only when no FleetVirtualMachine wants it there, no VM
// references it, the cluster's inventory is fresh and trusted, and it has
// been unused for the retention period.
func plan(in observed) (steps []step, requeue time.Duration) {
	names := map[string]struct{}{}
	for c := range in.Wanted {
		names[c] = struct{}{}
	}
	for c := range in.Works {
		names[c] = struct{}{}
	}
	for _, cluster := range slices.Sorted(maps.Keys(names)) {
		e := fleetv1alpha1.ImageClusterStatus{Cluster: cluster, References: in.Usage.ByCluster[cluster]}
		for _, u := range in.Usage.Users {
			if strings.HasPrefix(u, cluster+": ") && len(e.Users) < 10 {
				e.Users = append(e.Users, strings.TrimPrefix(u, cluster+": "))
			}
		}
		_, want := in.Wanted[cluster]
		// Unset while in use; set once, when the copy is first seen unused,
		// so the status does not change (and is not rewritten) on every pass.
		switch {
		case want || e.References > 0:
		case in.Previous[cluster].LastReferencedTime != nil:
			e.LastReferencedTime = in.Previous[cluster].LastReferencedTime
		default:
			e.LastReferencedTime = &metav1.Time{Time: in.Now.Truncate(time.Second)}
		}
		work := in.Works[cluster]
		s := step{}
		switch {
		case work != nil && work.DeletionTimestamp != nil:
			e.Phase, e.Message = fleetv1alpha1.ImagePhasePruning, "removing the image from the cluster"
		case !want && e.References == 0 && work != nil:
			if why := in.Untrusted[cluster]; why != "" {
				e.Phase, _, _ = importState(work)
				e.Progress, e.Message = "", "unused, but not pruned: "+why
				break
			}
			unusedFor := in.Now.Sub(e.LastReferencedTime.Time)
			if unusedFor < in.Retention {
				e.Phase, e.Progress, _ = importState(work)
				e.Message = fmt.Sprintf("unused since %s; pruned after the retention period (%s)", e.LastReferencedTime.UTC().Format(time.RFC3339), in.Retention)
				requeue = minPositive(requeue, in.Retention-unusedFor)
				break
			}
			s.Prune = work
			s.PruneEvent = fmt.Sprintf("Removed from cluster %s: unused for %s (retention %s)", cluster, unusedFor.Truncate(time.Second), in.Retention)
			e.Phase, e.Message = fleetv1alpha1.ImagePhasePruning, fmt.Sprintf("unused for longer than the retention period (%s); removing it", in.Retention)
		default:
			s.Ensure = true
		}
		s.Entry = e
		steps = append(steps, s)
	}
	return steps, requeue
}

// summarize writes the status from the entries: totals and conditions.
func summarize(fdi *fleetv1alpha1.FleetDiskImage, entries []fleetv1alpha1.ImageClusterStatus, usage Usage, wanted map[string]struct{}) {
	fdi.Status.ObservedGeneration = fdi.Generation
	fdi.Status.Clusters = entries
	fdi.Status.Totals = fleetv1alpha1.DiskImageTotals{Clusters: int32(len(entries)), References: usage.Total()}
	var notReady []string
	for _, e := range entries {
		if e.Phase == fleetv1alpha1.ImagePhaseReady {
			fdi.Status.Totals.Ready++
		} else if _, want := wanted[e.Cluster]; want {
			notReady = append(notReady, fmt.Sprintf("%s (%s)", e.Cluster, e.Phase))
		}
	}
	setConditions(fdi, usage, notReady, len(wanted))
}

// deletionRecheck is how often a deletion that waits for a cluster's word
// looks again: the clusters' availability is not watched here, and a
// fresh inventory that does not list the image does not wake it.
const deletionRecheck = time.Minute

// deletion is what deleting a FleetDiskImage does now.
type deletion struct {
	// Remove are the copies to remove now.
	Remove []*workv1.ManifestWork
	// Entries show every copy still on a cluster, by cluster.
	Entries []fleetv1alpha1.ImageClusterStatus
	// Waiting is empty when the deletion only waits for copies being
	// removed; otherwise it says, bounded, which copies it keeps and why.
	Waiting string
	// Done: no copy is left on any cluster; the finalizer may go.
	Done    bool
	Requeue time.Duration
}

// planDeletion decides which copies of a FleetDiskImage being deleted go
// now, by the prune rules less the retention period: a copy stays while
// a FleetVirtualMachine wants it or a VM references it on its cluster, and
// while the cluster's word cannot be trusted (unavailable, no or stale
// inventory): the reference count it shows may be old, and a ManifestWork
// deleted for an unreachable cluster removes the image there when the
// cluster comes back, whatever its VMs use by then. The deletion completes
// once every copy is gone.
func planDeletion(in observed) deletion {
	var d deletion
	var kept []string
	for _, cluster := range slices.Sorted(maps.Keys(in.Works)) {
		work := in.Works[cluster]
		e := fleetv1alpha1.ImageClusterStatus{Cluster: cluster, References: in.Usage.ByCluster[cluster],
			LastReferencedTime: in.Previous[cluster].LastReferencedTime}
		_, want := in.Wanted[cluster]
		switch why := in.Untrusted[cluster]; {
		case work.DeletionTimestamp != nil:
			e.Phase, e.Message = fleetv1alpha1.ImagePhasePruning, "removing the image from the cluster"
		case want || e.References > 0:
			e.Phase, e.Progress, _ = importState(work)
			e.Message = "the FleetDiskImage is being deleted; kept while it is in use here"
			kept = append(kept, cluster+" (in use)")
		case why != "":
			e.Phase, e.Progress, _ = importState(work)
			e.Message = "the FleetDiskImage is being deleted; not removed here yet: " + why
			kept = append(kept, fmt.Sprintf("%s (%s)", cluster, why))
		default:
			d.Remove = append(d.Remove, work)
			e.Phase, e.Message = fleetv1alpha1.ImagePhasePruning, "the FleetDiskImage is being deleted; removing it"
		}
		d.Entries = append(d.Entries, e)
	}
	d.Done = len(in.Works) == 0
	if len(kept) > 0 {
		d.Waiting = fmt.Sprintf("waiting to remove the image from %d clusters where it cannot go yet: %s", len(kept), names(kept, 5))
		d.Requeue = deletionRecheck
	}
	return d
}
