package placement

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/capacity"
)

// FleetVirtualMachines whose Placements would be the same (the same bound cluster sets, environment, selector,
// tolerations and VM shape) share one candidate Placement without
// numberOfClusters: the OCM scheduler decides every cluster that qualifies
// and fits, once for all of them, and the hub picks each
// FleetVirtualMachine's clusters from that decision. This file holds the
// pick: a pure function, and the count of FleetVirtualMachines per cluster
// it balances by.

// PickInput is what one FleetVirtualMachine's clusters are picked from.
type PickInput struct {
	// Key spreads ties: FleetVirtualMachines created together, which see
	// the same loads, do not all pick the same cluster.
	Key types.NamespacedName
	// Desired is spec.placement.clusters; nil: every candidate.
	Desired *int32
	// Candidates is the candidate Placement's decision.
	Candidates []string
	// Placed are the clusters the VM is placed on (recorded, neither
	// leaving nor removed).
	Placed []string
	// Load is how many FleetVirtualMachines are on a cluster.
	Load func(cluster string) int
	// Fits says whether the agent's current score still lets the VM in
	// (the decision was made on the scores of its last schedule).
	Fits func(cluster string) bool
	// Unscored says whether the cluster's agent reports a valid score that
	// does not list the VM's shape yet: it has not scored a shape new to it
	// (nil: never).
	Unscored func(cluster string) bool
	// Free ranks by free capacity first (the FreeCapacity prioritizer);
	// nil ranks by load only.
	Free func(cluster string) int32
}

// Pick returns the clusters the VM should be on, sorted: the ones
// it is placed on, then the candidates it fits on, fewest
// FleetVirtualMachines first, until it has as many as it asks for. The
// decision (decide.go) keeps placed clusters whatever this says, and adds
// from it only while copies are missing.
func Pick(in PickInput) []string {
	out := slices.Clone(in.Placed)
	need := -1
	if in.Desired != nil {
		need = max(int(*in.Desired)-len(out), 0)
	}
	if need == 0 {
		// Placed as asked: nothing to rank (most reconciles).
		slices.Sort(out)
		return out
	}
	type ranked struct {
		name string
		free int32
		load int
		tie  uint64
	}
	// Sized once: a FleetVirtualMachine waiting for room ranks every
	// candidate on each reconcile.
	rest := make([]ranked, 0, len(in.Candidates))
	for _, c := range in.Candidates {
		if slices.Contains(out, c) {
			continue
		}
		r := ranked{name: c, load: in.Load(c), tie: tieBreak(in.Key, c)}
		if in.Free != nil {
			r.free = in.Free(c)
		}
		rest = append(rest, r)
	}
	slices.SortFunc(rest, func(a, b ranked) int {
		return cmp.Or(cmp.Compare(b.free, a.free), cmp.Compare(a.load, b.load), cmp.Compare(a.tie, b.tie), cmp.Compare(a.name, b.name))
	})
	for _, r := range rest {
		if need == 0 {
			break
		}
		if !in.Fits(r.name) {
			continue
		}
		out = append(out, r.name)
		need--
	}
	slices.Sort(out)
	return out
}

// FreeCapacity is PickInput.Free for a FleetVirtualMachine's prioritizer:
// for FreeCapacity, a cluster's free CPU plus free memory as its agent's
// capacity score gives them (score returns the valid score's values; nil,
// none or expired, ranks 0); for any other prioritizer nil, so Pick ranks
// by load only.
func FreeCapacity(p fleetv1alpha1.Prioritizer, score func(cluster string) map[string]int32) func(cluster string) int32 {
	if p != fleetv1alpha1.PrioritizerFreeCapacity {
		return nil
	}
	return func(cluster string) int32 {
		s := score(cluster)
		return s[capacity.ScoreCPUFree] + s[capacity.ScoreMemoryFree]
	}
}

func tieBreak(key types.NamespacedName, cluster string) uint64 {
	sum := sha256.Sum256([]byte(key.String() + "/" + cluster))
	return binary.BigEndian.Uint64(sum[:8])
}

// ClusterLoad counts the FleetVirtualMachines recorded on each cluster,
// from the watch of FleetVirtualMachines and from this controller's own
// status writes (so reconciles running side by side see each other's
// picks before the cache does).
type ClusterLoad struct {
	mu    sync.Mutex
	by    map[types.NamespacedName][]string
	count map[string]int
}

func NewClusterLoad() *ClusterLoad {
	return &ClusterLoad{by: map[types.NamespacedName][]string{}, count: map[string]int{}}
}

// Set records the clusters a FleetVirtualMachine is on (nil: none).
func (l *ClusterLoad) Set(key types.NamespacedName, clusters []string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.by[key] {
		if l.count[c]--; l.count[c] <= 0 {
			delete(l.count, c)
		}
	}
	if len(clusters) == 0 {
		delete(l.by, key)
		return
	}
	l.by[key] = slices.Clone(clusters)
	for _, c := range clusters {
		l.count[c]++
	}
}

// Of returns how many FleetVirtualMachines are on a cluster.
func (l *ClusterLoad) Of(cluster string) int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count[cluster]
}
