package status

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// A FleetVirtualMachine's status must fit whatever the fleet: a status the
// API server refuses is never written, and nothing is delivered after it.
// Every message and list is bounded here, where it is built, by the
// limits of the CRD (apis/fleetvm/v1alpha1; a test compares them with the
// generated CRD).
const (
	// MaxConditionMessage is metav1.Condition's limit.
	MaxConditionMessage = 32768
	// maxEntryMessage is status.clusters[].message's limit.
	maxEntryMessage = 1024
	// maxExclusionDetail is status.placement.excluded[].detail's limit.
	maxExclusionDetail = 512
	// maxDecidedNames is status.placement.decidedClusters' limit: the
	// first names; decidedCount says how many.
	maxDecidedNames = 100

	// MaxErrorInMessage bounds an error or a message of another
	// component (the OCM scheduler's, an API server's) quoted in a
	// condition.
	MaxErrorInMessage = 2048

	// namesInMessage is how many names a message gives before "and N
	// more".
	namesInMessage = 10
	// detailedEntries is how many status.clusters entries carry the
	// details of their cluster (KubeVirt's state, Argo CD's, node, IPs,
	// console link, message, since when): those that need attention
	// first, then the others by name. Every other entry is compact: the
	// cluster, its environment, phase, ready, and when it started leaving
	// or being removed (the hub's record of where the VM is, never left
	// out).
	// About 140 bytes for a 63-character name: 5,000 clusters stay under
	// 1 MiB of JSON.
	detailedEntries = 50
)

// firstNames names the first n names and counts the rest: "a, b, c and
// 597 more".
func firstNames(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

// Truncate cuts s to at most limit characters (the unit of a CRD's
// maxLength), ending in "…" when cut. It never splits a character.
func Truncate(s string, limit int) string {
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	if limit <= 0 {
		return ""
	}
	i, n := 0, 0
	for i < len(s) && n < limit-1 {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		n++
	}
	return s[:i] + "…"
}

// attention ranks an entry for the details: lower is shown first.
// Failed, then unknown, then leaving or being removed, then every state
// short of what runStrategy asks for; settled entries last.
func attention(runStrategy fleetv1alpha1.RunStrategy, e fleetv1alpha1.ClusterStatus) int {
	switch {
	case e.Phase == fleetv1alpha1.ClusterPhaseFailed:
		return 0
	case e.Phase == fleetv1alpha1.ClusterPhaseUnknown:
		return 1
	case e.Phase == fleetv1alpha1.ClusterPhaseRemoving || e.Phase == fleetv1alpha1.ClusterPhaseLeaving:
		return 2
	case !settled(runStrategy, e):
		return 3
	}
	return 4
}

// compactEntries keeps the details of at most detailed entries, those
// that need attention first (then by name), and leaves every other entry
// compact. The list keeps every cluster, in its order.
func compactEntries(runStrategy fleetv1alpha1.RunStrategy, entries []fleetv1alpha1.ClusterStatus, detailed int) []fleetv1alpha1.ClusterStatus {
	if len(entries) <= detailed {
		return entries
	}
	order := make([]int, len(entries))
	for i := range order {
		order[i] = i
	}
	// entries are sorted by name: a stable sort keeps that within a rank.
	slices.SortStableFunc(order, func(a, b int) int {
		return attention(runStrategy, entries[a]) - attention(runStrategy, entries[b])
	})
	keep := make([]bool, len(entries))
	for _, i := range order[:detailed] {
		keep[i] = true
	}
	out := make([]fleetv1alpha1.ClusterStatus, len(entries))
	for i, e := range entries {
		if keep[i] {
			out[i] = e
			continue
		}
		out[i] = fleetv1alpha1.ClusterStatus{
			Cluster: e.Cluster, Environment: e.Environment, Phase: e.Phase, Ready: e.Ready,
			LeavingSince: e.LeavingSince, RemovingSince: e.RemovingSince,
			// The overlay's record (placement.ChooseOverlay) is kept for every cluster.
			PendingEnvironment: e.PendingEnvironment, PendingEnvironmentSince: e.PendingEnvironmentSince,
			// So is the rollout's (the controller's rollout plan).
			Rollout: e.Rollout,
		}
		if e.LeavingSince != nil {
			// Why it leaves is part of the decision's record (placement.Decide).
			out[i].Message = e.Message
		}
	}
	return out
}
