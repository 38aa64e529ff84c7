package fleetvirtualmachine

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestAlarmFiresWhileAnotherIsSet: a fake clock runs a due alarm's function
// inside Step, holding its own lock, while a reconcile may hold the alarms'
// lock to set another (and waits for the clock's). Step must not need the
// alarms' lock, and the alarm still wakes its FleetVirtualMachine once the
// other is set.
func TestAlarmFiresWhileAnotherIsSet(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Now())
	a := newAlarms(clock)
	key := types.NamespacedName{Namespace: "ns", Name: "web"}
	a.set(key, time.Second)

	a.mu.Lock() // another reconcile inside setFor
	stepped := make(chan struct{})
	go func() {
		clock.Step(2 * time.Second)
		close(stepped)
	}()
	select {
	case <-stepped:
	case <-time.After(10 * time.Second):
		a.mu.Unlock()
		t.Fatal("the clock's Step waited for the alarms' lock: a reconcile setting an alarm would deadlock with it")
	}
	a.mu.Unlock()

	select {
	case e := <-a.events:
		if got := (types.NamespacedName{Namespace: e.Object.GetNamespace(), Name: e.Object.GetName()}); got != key {
			t.Fatalf("the alarm woke %s, want %s", got, key)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the alarm never woke its FleetVirtualMachine")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.timers) != 0 {
		t.Errorf("the fired alarm is still kept: %v", a.timers)
	}
}
