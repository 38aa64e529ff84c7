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

// arrival is what one FleetVirtualMachine's copies take: the clusters its
// status says they arrive on, and the clusters a reconcile picked for it
// (Assume) that no status from the watch has listed yet. A cluster in
// both is counted once.
type arrival struct {
	clusters []string
	assumed  []string
	resources
}

// counted are the clusters an arrival takes room on.
func (a arrival) counted() []string {
	out := slices.Clone(a.clusters)
	for _, c := range a.assumed {
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

type resources struct{ cpu, mem int64 }

func NewArriving() *Arriving {
	return &Arriving{by: map[types.NamespacedName]arrival{}, settling: map[string][]resources{}, cpu: map[string]int64{}, mem: map[string]int64{}}
}

// ArrivingClusters are the clusters a FleetVirtualMachine's status lists
// whose copy is placed and not on a node yet (arriving), and those whose
// copy is on a node (landed). A halted VM's copies take no room: none. A
// FleetVirtualMachine being deleted has none arriving: they go too. A
// copy Stopped there is arriving when the run strategy starts it again
// (Always, RerunOnFailure): a new VM shows Stopped until virt-controller
// writes its status (KubeVirt's VirtualMachine CRD defaults
// status.printableStatus to Stopped), and a VM shows it between a stop
// and the next start (a rollout's restart). Counting such a copy out let
// the hub fill its room with another while it was about to start (the
// VM-safety suite's burst, under load). A Manual VM stopped stays
// stopped.
func ArrivingClusters(fvm *fleetv1alpha1.FleetVirtualMachine) (arriving, landed []string) {
	if fvm.Spec.RunStrategy == fleetv1alpha1.RunStrategyHalted {
		return nil, nil
	}
	deleting := fvm.DeletionTimestamp != nil
	restarts := fvm.Spec.RunStrategy == fleetv1alpha1.RunStrategyAlways || fvm.Spec.RunStrategy == fleetv1alpha1.RunStrategyRerunOnFailure
	for _, c := range fvm.Status.Clusters {
		if c.LeavingSince != nil || c.RemovingSince != nil {
			continue
		}
		switch c.Phase {
		case fleetv1alpha1.ClusterPhaseStopped:
			if restarts && !deleting {
				arriving = append(arriving, c.Cluster)
			}
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

// Set records, from the status this controller just wrote, the clusters
// a FleetVirtualMachine of shape is arriving on (none, or no shape: it is
// forgotten), and those it landed on: a copy that stops arriving there
// settles until the cluster's next score; elsewhere it is counted out at
// once. The clusters it assumed stay counted until the watch shows a
// status that lists them (Observe) or a reconcile records a status that
// does not (Keep).
func (a *Arriving) Set(key types.NamespacedName, clusters, landed []string, shape capacity.Shape, ok bool) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	next := arrival{clusters: clusters, assumed: a.by[key].assumed, resources: resourcesOf(shape)}
	a.update(key, a.arriving(key, next, ok), landed)
}

// Observe records a FleetVirtualMachine as the watch delivers it, as Set
// does; listed are the clusters its status names (any phase). An
// assumption ends once the watch shows a status that lists its cluster:
// that status counts the copy from then on. A watch event can be older
// than the status a reconcile just wrote (the cache is updated before its
// handlers run), so it does not end an assumption whose cluster it does
// not list: counting the copy out there until the newer event came let a
// second reconcile fill the same room.
func (a *Arriving) Observe(key types.NamespacedName, clusters, landed, listed []string, shape capacity.Shape, ok bool) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	next := arrival{clusters: clusters, resources: resourcesOf(shape)}
	for _, c := range a.by[key].assumed {
		if !slices.Contains(listed, c) {
			next.assumed = append(next.assumed, c)
		}
	}
	a.update(key, a.arriving(key, next, ok), landed)
}

// Forget counts out a deleted FleetVirtualMachine's copies that never
// landed, assumed or not; its landed ones settle.
func (a *Arriving) Forget(key types.NamespacedName, landed []string) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.update(key, arrival{}, landed)
}

// Assume takes room on a cluster for a copy of a FleetVirtualMachine of
// shape that a reconcile picks there, if the cluster's score (fit VMs of
// shape) less the copies arriving there still lets it in: the check and
// the count are one step, so reconciles running side by side cannot both
// take the last room (kube-scheduler assumes a pod on its node the same
// way before binding it). fits and held as Fits says; a cluster already
// counted for key fits.
func (a *Arriving) Assume(key types.NamespacedName, cluster string, shape capacity.Shape, fit int32) (fits, held bool) {
	if a == nil {
		return fit >= 1, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	cur := a.by[key]
	if slices.Contains(cur.counted(), cluster) {
		return true, false
	}
	if fits, held = a.fits(cluster, shape, fit); !fits {
		return false, held
	}
	r := resourcesOf(shape)
	if r.cpu <= 0 && r.mem <= 0 {
		return true, false // takes no room
	}
	next := arrival{clusters: cur.clusters, assumed: append(slices.Clone(cur.assumed), cluster), resources: r}
	a.update(key, next, nil)
	return true, false
}

// Keep ends the assumptions of key on clusters that listed does not name:
// the reconcile that made them recorded a status without them, or
// recorded none (listed is then the status it read). Each reconcile of a
// FleetVirtualMachine ends with it.
func (a *Arriving) Keep(key types.NamespacedName, listed []string) {
	if a == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	cur, had := a.by[key]
	if !had || len(cur.assumed) == 0 {
		return
	}
	next := cur
	next.assumed = slices.DeleteFunc(slices.Clone(cur.assumed), func(c string) bool { return !slices.Contains(listed, c) })
	a.update(key, next, nil)
}

// arriving is next as it counts: no clusters from a status without a
// shape or whose shape takes no room; assumptions alone keep the
// resources they took.
func (a *Arriving) arriving(key types.NamespacedName, next arrival, ok bool) arrival {
	if !ok || next.cpu <= 0 && next.mem <= 0 {
		next.clusters = nil
	}
	if len(next.clusters) == 0 {
		next.resources = a.by[key].resources
	}
	return next
}

// update replaces key's arrival with next: clusters it no longer counts
// settle where landed, and are counted out elsewhere.
func (a *Arriving) update(key types.NamespacedName, next arrival, landed []string) {
	old, had := a.by[key]
	was, now := old.counted(), next.counted()
	for _, c := range now {
		switch {
		case !had || !slices.Contains(was, c):
			a.add(c, next.resources)
		case old.resources != next.resources:
			// A new shape on the same cluster: it arrives instead of
			// the old one, which never landed.
			a.add(c, next.resources)
			a.sub(c, old.resources)
		}
	}
	for _, c := range was {
		switch {
		case slices.Contains(now, c):
		case slices.Contains(landed, c):
			a.settling[c] = append(a.settling[c], old.resources)
		default:
			a.sub(c, old.resources)
		}
	}
	if len(now) == 0 {
		delete(a.by, key)
		return
	}
	next.clusters = slices.Clone(next.clusters)
	a.by[key] = next
}

func resourcesOf(shape capacity.Shape) resources {
	return resources{cpu: shape.CPU.MilliValue(), mem: shape.Memory.Value()}
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

// add counts r on a cluster.
func (a *Arriving) add(cluster string, r resources) {
	a.cpu[cluster] += r.cpu
	a.mem[cluster] += r.mem
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
	defer a.mu.Unlock()
	return a.slots(cluster, shape)
}

func (a *Arriving) slots(cluster string, shape capacity.Shape) int32 {
	cpu, mem := a.cpu[cluster], a.mem[cluster]
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
	if a == nil {
		return fit >= 1, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.fits(cluster, shape, fit)
}

func (a *Arriving) fits(cluster string, shape capacity.Shape, fit int32) (fits, held bool) {
	if fit < 1 {
		return false, false
	}
	if fit >= capacity.MaxScore || fit-a.slots(cluster, shape) >= 1 {
		return true, false
	}
	return false, true
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
