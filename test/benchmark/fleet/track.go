package fleet

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// Every time in the benchmark is taken by the harness when its watch
// delivers the object (controller-runtime informers on the hub API
// server): what a user watching the hub would see.

// waitSet keeps the latest object of each key seen by a watch and wakes
// waiters whose condition becomes true.
type waitSet[T client.Object] struct {
	mu      sync.Mutex
	latest  map[string]T
	waiters map[string][]*waiter[T]
	// onEvent, if set, runs on every observed object (under mu).
	onEvent func(key string, obj T, at time.Time)
}

type waiter[T client.Object] struct {
	cond func(T) bool
	at   chan time.Time
}

func newWaitSet[T client.Object]() *waitSet[T] {
	return &waitSet[T]{latest: map[string]T{}, waiters: map[string][]*waiter[T]{}}
}

// observe records obj under key and wakes the waiters it satisfies.
func (w *waitSet[T]) observe(key string, obj T) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.latest[key] = obj
	if w.onEvent != nil {
		w.onEvent(key, obj, now)
	}
	ws := w.waiters[key]
	kept := ws[:0]
	for _, x := range ws {
		if x.cond(obj) {
			x.at <- now
			continue
		}
		kept = append(kept, x)
	}
	if len(kept) == 0 {
		delete(w.waiters, key)
	} else {
		w.waiters[key] = kept
	}
}

// wait returns a channel that receives the time cond first holds for the
// object under key; at once if it holds for the latest object seen.
func (w *waitSet[T]) wait(key string, cond func(T) bool) <-chan time.Time {
	x := &waiter[T]{cond: cond, at: make(chan time.Time, 1)}
	w.mu.Lock()
	defer w.mu.Unlock()
	if obj, ok := w.latest[key]; ok && cond(obj) {
		x.at <- time.Now()
		return x.at
	}
	w.waiters[key] = append(w.waiters[key], x)
	return x.at
}

// get returns the latest object seen under key.
func (w *waitSet[T]) get(key string) (T, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	obj, ok := w.latest[key]
	return obj, ok
}

// snapshot returns the latest objects.
func (w *waitSet[T]) snapshot() map[string]T {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]T, len(w.latest))
	for k, v := range w.latest {
		out[k] = v
	}
	return out
}

// awaitAll waits for every channel until the deadline; it returns the
// times, and an error naming how many did not arrive.
func awaitAll(ctx context.Context, chans []<-chan time.Time, timeout time.Duration) ([]time.Time, error) {
	out := make([]time.Time, len(chans))
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for i, ch := range chans {
		select {
		case t := <-ch:
			out[i] = t
		case <-deadline.C:
			missing := 0
			for j, c := range chans[i:] {
				select {
				case t := <-c:
					out[i+j] = t
				default:
					missing++
				}
			}
			return out, fmt.Errorf("%d of %d did not happen within %s", missing, len(chans), timeout)
		case <-ctx.Done():
			return out, ctx.Err()
		}
	}
	return out, nil
}

func keyOf(obj client.Object) string {
	return types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}.String()
}

// converged tells whether a FleetVirtualMachine is Placed, Delivered and
// its status aggregated: the hub has observed its generation, Placed,
// Delivered (an Application for every decided cluster) and Ready are
// True, and every desired copy is reported running and ready.
func converged(fvm *fleetv1alpha1.FleetVirtualMachine) bool {
	s := fvm.Status
	return s.ObservedGeneration == fvm.Generation &&
		meta.IsStatusConditionTrue(s.Conditions, fleetv1alpha1.ConditionPlaced) &&
		meta.IsStatusConditionTrue(s.Conditions, fleetv1alpha1.ConditionDelivered) &&
		meta.IsStatusConditionTrue(s.Conditions, fleetv1alpha1.ConditionReady) &&
		s.Summary.Desired > 0 && s.Summary.Ready >= s.Summary.Desired
}

// placed tells whether the hub shows the scheduler's decision.
func placed(fvm *fleetv1alpha1.FleetVirtualMachine) bool {
	return meta.IsStatusConditionTrue(fvm.Status.Conditions, fleetv1alpha1.ConditionPlaced)
}

// clusterShows tells whether the status entry of a cluster shows the
// printableStatus want.
func clusterShows(cluster, want string) func(*fleetv1alpha1.FleetVirtualMachine) bool {
	return func(fvm *fleetv1alpha1.FleetVirtualMachine) bool {
		for _, c := range fvm.Status.Clusters {
			if c.Cluster == cluster {
				return c.PrintableStatus == want
			}
		}
		return false
	}
}

// fvmTimes are the moments a FleetVirtualMachine reached each stage.
type fvmTimes struct {
	// created: the client's create call; placement: the hub's Placement
	// appeared; decided: the scheduler's PlacementDecision lists clusters;
	// placed: the hub's status shows Placed; converged: see converged.
	created, placement, decided, placed, converged time.Time
}

// stageRecorder records, for FleetVMs being created, when each stage was
// first seen.
type stageRecorder struct {
	mu    sync.Mutex
	times map[string]*fvmTimes
}

func (r *stageRecorder) created(key string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.times == nil {
		r.times = map[string]*fvmTimes{}
	}
	if t, ok := r.times[key]; ok {
		t.created = at
		return
	}
	r.times[key] = &fvmTimes{created: at}
}

func (r *stageRecorder) observe(key string, fvm *fleetv1alpha1.FleetVirtualMachine, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.times == nil {
		r.times = map[string]*fvmTimes{}
	}
	t := r.times[key]
	if t == nil {
		t = &fvmTimes{}
		r.times[key] = t
	}
	if t.placed.IsZero() && placed(fvm) {
		t.placed = at
	}
	if t.converged.IsZero() && converged(fvm) {
		t.converged = at
	}
}

// at records the first time of a stage set by set.
func (r *stageRecorder) at(key string, t time.Time, stage func(*fvmTimes) *time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.times == nil {
		r.times = map[string]*fvmTimes{}
	}
	ft := r.times[key]
	if ft == nil {
		ft = &fvmTimes{}
		r.times[key] = ft
	}
	if p := stage(ft); p.IsZero() {
		*p = t
	}
}

func (r *stageRecorder) snapshot() map[string]fvmTimes {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]fvmTimes, len(r.times))
	for k, v := range r.times {
		out[k] = *v
	}
	return out
}
