package placement

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/capacity"
)

func shapeOf(cpu, mem string) capacity.Shape {
	return capacity.Shape{CPU: resource.MustParse(cpu), Memory: resource.MustParse(mem)}
}

// TestArrivingBurst: 100 one-CPU FleetVirtualMachines picked one after
// the other, as a burst is, from a candidate decision that holds one
// cluster whose score (not renewed during the burst) says 80 fit. The
// first 80 go there; the other 20 are held back, not placed where they
// would be Unschedulable. Without the arrivals all 100 went there.
func TestArrivingBurst(t *testing.T) {
	shape := shapeOf("1", "1Gi")
	for _, tc := range []struct {
		name     string
		arriving *Arriving
		placed   int
	}{
		{name: "arrivals counted", arriving: NewArriving(), placed: 80},
		{name: "score alone", arriving: nil, placed: 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			load := NewClusterLoad()
			placed, held := 0, 0
			for i := range 100 {
				key := types.NamespacedName{Namespace: "restore", Name: fmt.Sprintf("vm-%03d", i)}
				heldNow := false
				got := Pick(PickInput{Key: key, Desired: ptr.To[int32](1), Candidates: []string{"prod-c"}, Load: load.Of,
					Fits: func(c string) bool {
						fits, h := tc.arriving.Fits(c, shape, 80)
						heldNow = heldNow || h
						return fits
					}})
				if len(got) == 0 {
					if !heldNow && tc.arriving != nil {
						t.Errorf("%s: not placed and not held by arrivals", key)
					}
					held++
					continue
				}
				placed++
				load.Set(key, got)
				tc.arriving.Set(key, got, nil, shape, true)
			}
			if placed != tc.placed || held != 100-tc.placed {
				t.Errorf("placed %d, held %d; want %d, %d", placed, held, tc.placed, 100-tc.placed)
			}
		})
	}
}

// TestArrivingUntilScored: 15 copies arrive on a cluster whose score
// says 15 fit; 10 report running before the agent scores again. Counting
// them out at that report let a burst under load put a 16th there (the
// VM-safety suite, 1 run in 9): they count until the hub sees the
// cluster's next score, which shows them.
func TestArrivingUntilScored(t *testing.T) {
	shape := shapeOf("1", "1536Mi")
	a := NewArriving()
	key := func(i int) types.NamespacedName {
		return types.NamespacedName{Namespace: "burst", Name: fmt.Sprintf("vm-%02d", i)}
	}
	for i := range 15 {
		a.Set(key(i), []string{"prod-a"}, nil, shape, true)
	}
	for i := range 10 {
		a.Set(key(i), nil, []string{"prod-a"}, shape, true) // Running
	}
	if fits, held := a.Fits("prod-a", shape, 15); fits || !held {
		t.Fatalf("before the next score: fits %v held %v, want held", fits, held)
	}
	a.Scored("prod-a") // the score now says 5 fit
	if fits, _ := a.Fits("prod-a", shape, 5); fits {
		t.Errorf("after the next score, 5 arriving where 5 fit: fits")
	}
	if fits, _ := a.Fits("prod-a", shape, 6); !fits {
		t.Errorf("after the next score, 5 arriving where 6 fit: does not fit")
	}
}

// TestArrivingSlots: arrivals take room in VMs of the asked shape by CPU
// or memory, whichever takes more; once landed they settle until the
// cluster's next score, and one that went before it landed is counted out
// at once.
func TestArrivingSlots(t *testing.T) {
	a := NewArriving()
	a.Set(types.NamespacedName{Name: "big"}, []string{"a", "b"}, nil, shapeOf("4", "2Gi"), true)
	a.Set(types.NamespacedName{Name: "fat"}, []string{"a"}, nil, shapeOf("500m", "9Gi"), true)
	a.Set(types.NamespacedName{Name: "git"}, []string{"a"}, nil, capacity.Shape{Networks: []string{"ns/net"}}, true)
	a.Set(types.NamespacedName{Name: "noshape"}, []string{"a"}, nil, capacity.Shape{}, false)
	got := map[string]int32{
		"a 1 CPU 1Gi":   a.Slots("a", shapeOf("1", "1Gi")),  // 4.5 CPU, 11 Gi: 11
		"a 2 CPU 16Gi":  a.Slots("a", shapeOf("2", "16Gi")), // 3 by CPU, 1 by memory
		"b 1 CPU 1Gi":   a.Slots("b", shapeOf("1", "1Gi")),  // 4 by CPU
		"c 1 CPU 1Gi":   a.Slots("c", shapeOf("1", "1Gi")),  // none
		"a no capacity": a.Slots("a", capacity.Shape{Networks: []string{"ns/net"}}),
	}
	want := map[string]int32{"a 1 CPU 1Gi": 11, "a 2 CPU 16Gi": 3, "b 1 CPU 1Gi": 4, "c 1 CPU 1Gi": 0, "a no capacity": 0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("slots (-want,+got):\n%s", diff)
	}
	// big lands everywhere: it settles until the hub sees each cluster's
	// next score. fat goes from a to b before it landed on a: it never
	// took room on a.
	a.Set(types.NamespacedName{Name: "big"}, nil, []string{"a", "b"}, capacity.Shape{}, false)
	a.Set(types.NamespacedName{Name: "fat"}, []string{"b"}, nil, shapeOf("500m", "9Gi"), true)
	if got := a.Slots("a", shapeOf("1", "1Gi")); got != 4 {
		t.Errorf("a before its next score: %d slots, want 4 (big settling)", got)
	}
	a.Scored("a")
	if got := a.Slots("a", shapeOf("1", "1Gi")); got != 0 {
		t.Errorf("a after its next score: %d slots, want 0", got)
	}
	if got := a.Slots("b", shapeOf("1", "1Gi")); got != 11 {
		t.Errorf("b before its next score: %d slots, want 11 (big's 2Gi settling, fat's 9Gi arriving)", got)
	}
	a.Scored("b")
	if got := a.Slots("b", shapeOf("1", "1Gi")); got != 9 {
		t.Errorf("b after its next score: %d slots, want 9 (fat's memory)", got)
	}
	a.Scored("b")
	if got := a.Slots("b", shapeOf("1", "1Gi")); got != 9 {
		t.Errorf("b after another score: %d slots, want 9 (fat still arriving)", got)
	}
	// A score at OCM's cap says "at least 100": arrivals are not taken
	// from it.
	for i := range 200 {
		a.Set(types.NamespacedName{Name: fmt.Sprintf("n-%d", i)}, []string{"b"}, nil, shapeOf("1", "1Gi"), true)
	}
	if fits, held := a.Fits("b", shapeOf("1", "1Gi"), capacity.MaxScore); !fits || held {
		t.Errorf("a capped score: fits %v held %v, want it to fit", fits, held)
	}
	if fits, held := a.Fits("b", shapeOf("1", "1Gi"), 0); fits || held {
		t.Errorf("a score of 0: fits %v held %v, want neither", fits, held)
	}
}

// TestArrivingClusters: a copy arrives until it is on a node (Running,
// Stopping: landed; Failed or Unknown take no room the score does not
// show, nor does Stopped unless the run strategy starts the VM again),
// and not while it leaves; a halted VM's copies take no room.
func TestArrivingClusters(t *testing.T) {
	now := metav1.Now()
	fvm := &fleetv1alpha1.FleetVirtualMachine{Status: fleetv1alpha1.FleetVirtualMachineStatus{Clusters: []fleetv1alpha1.ClusterStatus{
		{Cluster: "pending", Phase: fleetv1alpha1.ClusterPhasePending},
		{Cluster: "image", Phase: fleetv1alpha1.ClusterPhaseWaitingForImage},
		{Cluster: "provisioning", Phase: fleetv1alpha1.ClusterPhaseProvisioning},
		{Cluster: "starting", Phase: fleetv1alpha1.ClusterPhaseStarting},
		{Cluster: "running", Phase: fleetv1alpha1.ClusterPhaseRunning},
		{Cluster: "stopping", Phase: fleetv1alpha1.ClusterPhaseStopping},
		{Cluster: "failed", Phase: fleetv1alpha1.ClusterPhaseFailed},
		{Cluster: "stopped", Phase: fleetv1alpha1.ClusterPhaseStopped},
		{Cluster: "unknown", Phase: fleetv1alpha1.ClusterPhaseUnknown},
		{Cluster: "leaving", Phase: fleetv1alpha1.ClusterPhasePending, LeavingSince: &now},
	}}}
	arriving, landed := ArrivingClusters(fvm)
	if diff := cmp.Diff([]string{"pending", "image", "provisioning", "starting"}, arriving); diff != "" {
		t.Errorf("arriving (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"running", "stopping"}, landed); diff != "" {
		t.Errorf("landed (-want,+got):\n%s", diff)
	}
	fvm.DeletionTimestamp = &now
	arriving, landed = ArrivingClusters(fvm)
	if arriving != nil || len(landed) != 2 {
		t.Errorf("deleting: arriving %v, landed %v; want none arriving, 2 landed", arriving, landed)
	}
	fvm.DeletionTimestamp = nil
	// A copy Stopped before its first start, or between a stop and the
	// next start, arrives when its run strategy starts it.
	for _, rs := range []fleetv1alpha1.RunStrategy{fleetv1alpha1.RunStrategyAlways, fleetv1alpha1.RunStrategyRerunOnFailure} {
		fvm.Spec.RunStrategy = rs
		if arriving, _ := ArrivingClusters(fvm); !slices.Contains(arriving, "stopped") {
			t.Errorf("%s: a Stopped copy is not arriving (%v)", rs, arriving)
		}
	}
	fvm.Spec.RunStrategy = fleetv1alpha1.RunStrategyManual
	if arriving, _ := ArrivingClusters(fvm); slices.Contains(arriving, "stopped") {
		t.Errorf("Manual: a Stopped copy is arriving (%v)", arriving)
	}
	fvm.Spec.RunStrategy = fleetv1alpha1.RunStrategyHalted
	if arriving, landed := ArrivingClusters(fvm); arriving != nil || landed != nil {
		t.Errorf("halted: arriving %v, landed %v; want none", arriving, landed)
	}
}

// TestArrivingGoneBeforeLanding: copies that never landed (their
// FleetVirtualMachine was deleted while they were Pending, or they failed
// to start) never took room: they are counted out at once, not at the
// next score, which a cluster without agent traffic may not write for a
// while.
func TestArrivingGoneBeforeLanding(t *testing.T) {
	shape := shapeOf("1", "1Gi")
	a := NewArriving()
	for i := range 3 {
		a.Set(types.NamespacedName{Name: fmt.Sprintf("vm-%d", i)}, []string{"prod-a"}, nil, shape, true)
	}
	if fits, held := a.Fits("prod-a", shape, 3); fits || !held {
		t.Fatalf("3 arriving where 3 fit: fits %v held %v, want held", fits, held)
	}
	a.Set(types.NamespacedName{Name: "vm-0"}, nil, nil, capacity.Shape{}, false) // deleted
	a.Set(types.NamespacedName{Name: "vm-1"}, nil, nil, shape, true)             // Failed
	if got := a.Slots("prod-a", shape); got != 1 {
		t.Errorf("after one deleted and one failed before landing: %d slots, want 1", got)
	}
	a.Set(types.NamespacedName{Name: "vm-2"}, []string{"prod-a"}, nil, shapeOf("2", "1Gi"), true) // resized while arriving
	if got := a.Slots("prod-a", shape); got != 2 {
		t.Errorf("after a resize while arriving: %d slots, want 2", got)
	}
}

// TestArrivingAssumeSideBySide: 50 reconciles running side by side pick
// the same cluster, whose score says 10 fit. Checking the room and
// counting the copy in one step (Assume) lets exactly 10 in; checking
// with Fits and counting at the status write, as the hub did, let every
// reconcile between a check and its write take the last room again (the
// VM-safety suite: a 16th copy on a cluster with room for 15, once under
// load).
func TestArrivingAssumeSideBySide(t *testing.T) {
	shape := shapeOf("1", "1536Mi")
	a := NewArriving()
	var wg sync.WaitGroup
	var mu sync.Mutex
	placed, held := 0, 0
	for i := range 50 {
		wg.Go(func() {
			fits, h := a.Assume(types.NamespacedName{Namespace: "burst", Name: fmt.Sprintf("vm-%02d", i)}, "prod-a", shape, 10)
			mu.Lock()
			defer mu.Unlock()
			if fits {
				placed++
			}
			if h {
				held++
			}
		})
	}
	wg.Wait()
	if placed != 10 || held != 40 {
		t.Errorf("placed %d, held %d; want 10, 40", placed, held)
	}
	if got := a.Slots("prod-a", shape); got != 10 {
		t.Errorf("%d slots taken, want 10", got)
	}
}

// TestArrivingAssumed: the room a reconcile takes for a copy (Assume)
// stays taken until the watch shows a status that lists the copy; a watch
// event older than the status the reconcile wrote does not free it. A
// reconcile that records no status with the copy (it failed, or its
// decision did not add the cluster) frees it, and so does a deletion.
func TestArrivingAssumed(t *testing.T) {
	shape := shapeOf("1", "1Gi")
	vm := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "burst", Name: name} }
	fitsOne := func(a *Arriving, name string) bool {
		t.Helper()
		fits, _ := a.Assume(vm(name), "prod-a", shape, 1) // room for 1
		if fits {
			a.Keep(vm(name), nil) // a probe: given back at once
		}
		return fits
	}

	a := NewArriving()
	if fits, held := a.Assume(vm("a"), "prod-a", shape, 1); !fits || held {
		t.Fatalf("the first pick: fits %v held %v, want it to fit", fits, held)
	}
	if fits, held := a.Assume(vm("a"), "prod-a", shape, 1); !fits || held {
		t.Errorf("the same VM again: fits %v held %v, want it to fit (counted once)", fits, held)
	}
	if fitsOne(a, "b") {
		t.Fatal("a second VM took the room the first one assumed")
	}
	// a's reconcile writes its status (Pending on prod-a) and records it.
	a.Set(vm("a"), []string{"prod-a"}, nil, shape, true)
	a.Keep(vm("a"), []string{"prod-a"})
	if got := a.Slots("prod-a", shape); got != 1 {
		t.Errorf("assumed and recorded: %d slots, want 1 (counted once)", got)
	}
	// The watch delivers a's previous status, without prod-a, after the
	// write: the room stays taken.
	a.Observe(vm("a"), nil, nil, nil, capacity.Shape{}, false)
	if fitsOne(a, "b") {
		t.Fatal("an older status from the watch freed the room a took")
	}
	// Then the status a wrote: it counts the copy from now on.
	a.Observe(vm("a"), []string{"prod-a"}, nil, []string{"prod-a"}, shape, true)
	if got := a.Slots("prod-a", shape); got != 1 {
		t.Errorf("seen by the watch: %d slots, want 1", got)
	}
	// The copy fails to start: the room is free at once.
	a.Observe(vm("a"), nil, nil, []string{"prod-a"}, shape, true)
	if !fitsOne(a, "b") {
		t.Error("a failed copy still holds the room")
	}

	// A reconcile that assumed, then recorded nothing (its status write
	// was refused): the status it read keeps nothing.
	a = NewArriving()
	a.Assume(vm("c"), "prod-a", shape, 1)
	a.Keep(vm("c"), nil)
	if !fitsOne(a, "b") {
		t.Error("a reconcile that recorded nothing still holds the room")
	}
	// A FleetVirtualMachine deleted with an assumption.
	a.Assume(vm("d"), "prod-a", shape, 1)
	a.Forget(vm("d"), nil)
	if !fitsOne(a, "b") {
		t.Error("a deleted FleetVirtualMachine still holds the room")
	}
	// One that landed before it went settles until the next score.
	a.Assume(vm("e"), "prod-a", shape, 1)
	a.Keep(vm("e"), []string{"prod-a"})
	a.Forget(vm("e"), []string{"prod-a"})
	if fitsOne(a, "b") {
		t.Error("a landed copy's room was freed before the next score")
	}
	a.Scored("prod-a")
	if !fitsOne(a, "b") {
		t.Error("after the next score the room is still taken")
	}
}
