package placement

import (
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/capacity"
)

// Arriving counts, per cluster, the CPU and memory of the copies the hub
// placed there that are not on a node yet: recorded, but still Pending,
// WaitingForImage, Provisioning or Starting. The agent's capacity score
// does not show them until their instance is scheduled and the agent
// scores again, so without them a burst of FleetVirtualMachines would all
// fit into the room one score shows: 100 one-CPU VMs placed in a second
// on a cluster whose score says 80 fit, 20 of them Unschedulable there
// while other clusters had room. kube-scheduler does the same with the
// pods it has assumed on a node until its informer sees them bound.
//
// It is counted from each FleetVirtualMachine's status (the watch and
// this controller's own status writes), so a hub that restarts counts
// again what its clusters have not reported running. A copy that lands
// (its cluster reports it Running or Stopping: on a node) is still
// counted, settling, until the hub sees the cluster's next score: a
// report that says the VM runs comes before the score that shows its pod,
// and counting it out at the report let a burst under load overfill the
// cluster again (1 run in 9 of the VM-safety suite). Agents write their
// score at least every half validity, so a settling copy is counted out
// within about 90 s even when the cluster's capacity did not change. A
// copy that stops arriving without landing (it failed, stopped, went, or
// its FleetVirtualMachine was deleted) never took room there: it is
// counted out at once. So is a halted VM's copy, which takes no room.
type Arriving struct {
	mu       sync.Mutex
	by       map[types.NamespacedName]arrival
	settling map[string][]resources // by cluster
	cpu      map[string]int64       // millicores, by cluster
	mem      map[string]int64       // bytes, by cluster
}

type arrival struct {
	clusters []string
	resources
}

type resources struct{ cpu, mem int64 }

func NewArriving() *Arriving {
	return &Arriving{by: map[types.NamespacedName]arrival{}, settling: map[string][]resources{}, cpu: map[string]int64{}, mem: map[string]int64{}}
}

// ArrivingClusters are the clusters a FleetVirtualMachine's status lists
// whose copy is placed and not on a node yet (arriving), and those whose
// copy is on a node (landed). A halted VM's copies take no room: none. A
// FleetVirtualMachine being deleted has none arriving: they go too.
func ArrivingClusters(fvm *fleetv1alpha1.FleetVirtualMachine) (arriving, landed []string) {
	if fvm.Spec.RunStrategy == fleetv1alpha1.RunStrategyHalted {
		return nil, nil
	}
	deleting := fvm.DeletionTimestamp != nil
	for _, c := range fvm.Status.Clusters {
		if c.LeavingSince != nil || c.RemovingSince != nil {
			continue
		}
		switch c.Phase {
		case fleetv1alpha1.ClusterPhasePending, fleetv1alpha1.ClusterPhaseWaitingForImage,
			fleetv1alpha1.ClusterPhaseProvisioning, fleetv1alpha1.ClusterPhaseStarting:
			if !deleting {
				arriving = append(arriving, c.Cluster)
			}
		case fleetv1alpha1.ClusterPhaseRunning, fleetv1alpha1.ClusterPhaseStopping:
			landed = append(landed, c.Cluster)
		}
	}
	return arriving, landed
}

// Set records the clusters a FleetVirtualMachine of shape is arriving on
// (none, or no shape: it is forgotten), and those it landed on: a copy
// that stops arriving there settles until the cluster's next score;
// elsewhere it is counted out at once.
func (a *Arriving) Set(key types.NamespacedName, clusters, landed []string, shape capacity.Shape, ok bool) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	cpu, mem := shape.CPU.MilliValue(), shape.Memory.Value()
	if !ok || cpu <= 0 && mem <= 0 {
		clusters = nil
	}
	old, had := a.by[key]
	for _, c := range clusters {
		if !had || !slices.Contains(old.clusters, c) {
			a.cpu[c] += cpu
			a.mem[c] += mem
		}
	}
	for _, c := range old.clusters {
		switch {
		case slices.Contains(clusters, c):
		case slices.Contains(landed, c):
			a.settling[c] = append(a.settling[c], old.resources)
		default:
			a.sub(c, old.resources)
		}
	}
	if len(clusters) == 0 {
		delete(a.by, key)
		return
	}
	if had && (old.cpu != cpu || old.mem != mem) {
		// A new shape on the same clusters: it arrives instead of the
		// old one, which never landed.
		for _, c := range clusters {
			if slices.Contains(old.clusters, c) {
				a.cpu[c] += cpu
				a.mem[c] += mem
				a.sub(c, old.resources)
			}
		}
	}
	a.by[key] = arrival{clusters: slices.Clone(clusters), resources: resources{cpu: cpu, mem: mem}}
}

// Scored counts out the copies settling on a cluster: the hub saw a score
// the cluster's agent wrote after they stopped arriving, which shows
// them.
func (a *Arriving) Scored(cluster string) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.settling[cluster] {
		a.sub(cluster, r)
	}
	delete(a.settling, cluster)
}

// sub counts r out of a cluster.
func (a *Arriving) sub(cluster string, r resources) {
	if a.cpu[cluster] -= r.cpu; a.cpu[cluster] <= 0 {
		delete(a.cpu, cluster)
	}
	if a.mem[cluster] -= r.mem; a.mem[cluster] <= 0 {
		delete(a.mem, cluster)
	}
}

// Slots is how many VMs of shape the copies arriving on a cluster take
// from the room its score shows: their CPU and their memory in VMs of
// that shape, whichever is more, rounded up. A shape without CPU and
// memory (a VM from git, fitted by its networks only) takes none.
func (a *Arriving) Slots(cluster string, shape capacity.Shape) int32 {
	if a == nil {
		return 0
	}
	a.mu.Lock()
	cpu, mem := a.cpu[cluster], a.mem[cluster]
	a.mu.Unlock()
	var slots int64
	if per := shape.CPU.MilliValue(); per > 0 {
		slots = max(slots, ceilDiv(cpu, per))
	}
	if per := shape.Memory.Value(); per > 0 {
		slots = max(slots, ceilDiv(mem, per))
	}
	return int32(min(slots, int64(capacity.MaxScore)+1))
}

// Fits tells whether a VM of shape fits a cluster whose score says fit of
// them do, once the copies arriving there are taken from it; held: the
// score alone would let it in. A score at OCM's cap (capacity.MaxScore)
// says "at least that many": arrivals are not taken from it.
func (a *Arriving) Fits(cluster string, shape capacity.Shape, fit int32) (fits, held bool) {
	if fit < 1 {
		return false, false
	}
	if fit >= capacity.MaxScore || fit-a.Slots(cluster, shape) >= 1 {
		return true, false
	}
	return false, true
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
