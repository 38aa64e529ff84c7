package fleetvirtualmachine

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/event"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// alarms wake a FleetVirtualMachine's reconcile when a grace period ends,
// on the reconciler's own clock: with a fake clock in tests, stepping it
// past the grace period fires the alarm (controller-runtime's RequeueAfter
// would wait real time). One alarm per FleetVirtualMachine and purpose;
// setting it again replaces it.
type alarms struct {
	clock  clock.WithDelayedExecution
	events chan event.GenericEvent

	mu     sync.Mutex
	timers map[alarmKey]*alarm
}

// alarmPurpose tells a FleetVirtualMachine's alarms apart: each is set by
// its own step of the reconcile.
type alarmPurpose int

const (
	// alarmGrace ends a leaving cluster's grace period (placement.Decide).
	alarmGrace alarmPurpose = iota
	// alarmOverlay ends a relabelled cluster's wait before its overlay
	// switches (placement.ChooseOverlay).
	alarmOverlay
	// alarmMove ends a move's timeout (move.Step).
	alarmMove
	// alarmRollout ends a rollout's soak or progress deadline
	// (rollout.Decide).
	alarmRollout
)

type alarmKey struct {
	fvm     types.NamespacedName
	purpose alarmPurpose
}

type alarm struct{ timer clock.Timer }

func newAlarms(c clock.WithDelayedExecution) *alarms {
	return &alarms{clock: c, events: make(chan event.GenericEvent, 64), timers: map[alarmKey]*alarm{}}
}

// set wakes key after d when a grace period ends; d <= 0 clears that
// alarm.
func (a *alarms) set(key types.NamespacedName, d time.Duration) {
	a.setFor(key, alarmGrace, d)
}

// setFor wakes key after d, for purpose; d <= 0 clears that alarm. A nil
// alarms (a Reconciler used without SetupWithManager) does nothing.
func (a *alarms) setFor(fvm types.NamespacedName, purpose alarmPurpose, d time.Duration) {
	if a == nil {
		return
	}
	key := alarmKey{fvm: fvm, purpose: purpose}
	a.mu.Lock()
	defer a.mu.Unlock()
	if old, ok := a.timers[key]; ok {
		old.timer.Stop()
		delete(a.timers, key)
	}
	if d <= 0 {
		return
	}
	al := &alarm{}
	a.timers[key] = al
	// The alarm fires on a goroutine of its own: a fake clock runs the
	// function while it holds its lock (Step), and setFor holds a.mu while
	// it asks that clock for timers, so taking a.mu there could deadlock
	// the hub and everything on that clock.
	al.timer = a.clock.AfterFunc(d, func() { go a.fire(key, al) })
}

// fire forgets the alarm unless it was replaced, and wakes its
// FleetVirtualMachine.
func (a *alarms) fire(key alarmKey, al *alarm) {
	a.mu.Lock()
	if a.timers[key] == al {
		delete(a.timers, key)
	}
	a.mu.Unlock()
	a.events <- event.GenericEvent{Object: &fleetv1alpha1.FleetVirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: key.fvm.Namespace, Name: key.fvm.Name},
	}}
}
