package hub

import (
	"fmt"
	"runtime"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
)

// TestEventCorrelatorIsBounded: the hub's event correlator keeps under
// 1.5 MiB after 10,000 FleetVMs had their one Event each, where
// client-go's default keeps several, and it still counts an object's
// repeated Event instead of sending it again.
func TestEventCorrelatorIsBounded(t *testing.T) {
	event := func(i int) *corev1.Event {
		now := metav1.Now()
		name := fmt.Sprintf("vm-%05d", i)
		return &corev1.Event{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", name, i), Namespace: "team-a"},
			InvolvedObject: corev1.ObjectReference{Kind: "FleetVirtualMachine", APIVersion: "fleetvm.io/v1alpha1",
				Namespace: "team-a", Name: name, UID: "385fd36b-039b-46cc-b165-b2d465efe3a5", ResourceVersion: "8767"},
			Type: corev1.EventTypeNormal, Reason: "AllReady", Message: "ready on all 3 clusters",
			Source: corev1.EventSource{Component: "fleetvm-hub"}, Count: 1, FirstTimestamp: now, LastTimestamp: now,
		}
	}
	held := func(opts record.CorrelatorOptions) (float64, *record.EventCorrelator) {
		before := heapInUse()
		c := record.NewEventCorrelatorWithOptions(opts)
		for i := range 10000 {
			if _, err := c.EventCorrelate(event(i)); err != nil {
				t.Fatal(err)
			}
		}
		after := heapInUse()
		return float64(int64(after)-int64(before)) / (1 << 20), c
	}

	defaults, dc := held(record.CorrelatorOptions{})
	hubs, c := held(EventCorrelation)
	runtime.KeepAlive(dc)
	t.Logf("held after 10,000 objects' Events: %.2f MiB by client-go's default, %.2f MiB by the hub's", defaults, hubs)
	if defaults < 4 {
		t.Fatalf("client-go's default correlator held %.2f MiB, expected several: the measure does not see the caches", defaults)
	}
	if hubs > 1.5 {
		t.Errorf("the hub's correlator held %.2f MiB, want under 1.5", hubs)
	}

	again, err := c.EventCorrelate(event(9999))
	if err != nil {
		t.Fatal(err)
	}
	if again.Skip || again.Event.Count != 2 || again.Patch == nil {
		t.Errorf("a repeated Event: skip %v, count %d, patch %q; want it counted in a patch of the first", again.Skip, again.Event.Count, again.Patch)
	}
	runtime.KeepAlive(c)
}

// heapInUse is the heap's live bytes after a collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
