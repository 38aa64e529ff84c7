package coalesce

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// recordingQueue records what a handler queues, and when it asks for it.
type recordingQueue struct {
	queue
	now, after []reconcile.Request
	delays     []time.Duration
}

func (q *recordingQueue) Add(item reconcile.Request) { q.now = append(q.now, item) }
func (q *recordingQueue) AddAfter(item reconcile.Request, d time.Duration) {
	q.after, q.delays = append(q.after, item), append(q.delays, d)
}

var key = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "web"}}

func toKey(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{key} }

// TestAll: every event queues delay later, never at once.
func TestAll(t *testing.T) {
	const delay = 3 * time.Second
	h := All(handler.EnqueueRequestsFromMapFunc(toKey), delay)
	obj := &fleetv1alpha1.FleetVirtualMachine{}
	ctx := context.Background()
	q := &recordingQueue{}
	h.Create(ctx, event.CreateEvent{Object: obj}, q)
	h.Create(ctx, event.CreateEvent{Object: obj, IsInInitialList: true}, q)
	h.Update(ctx, event.UpdateEvent{ObjectOld: obj, ObjectNew: obj}, q)
	h.Delete(ctx, event.DeleteEvent{Object: obj}, q)
	h.Generic(ctx, event.GenericEvent{Object: obj}, q)
	if len(q.now) != 0 || len(q.after) != 5 {
		t.Fatalf("queued %v at once and %v later, want none and 5", q.now, q.after)
	}
	for i, d := range q.delays {
		if d != delay || q.after[i] != key {
			t.Errorf("queued %v %s later, want %v %s later", q.after[i], d, key, delay)
		}
	}
}

// TestCreates: a create queues delay later; an update, a delete or a
// create of the informer's initial list (the process starting) at once.
func TestCreates(t *testing.T) {
	const delay = 3 * time.Second
	h := Creates(handler.EnqueueRequestsFromMapFunc(toKey), delay)
	obj := &fleetv1alpha1.VMReport{}
	ctx := context.Background()

	q := &recordingQueue{}
	h.Create(ctx, event.CreateEvent{Object: obj}, q)
	if len(q.now) != 0 || len(q.after) != 1 || q.after[0] != key || q.delays[0] != delay {
		t.Errorf("create: queued at once %v, later %v after %v; want %v after %s only", q.now, q.after, q.delays, key, delay)
	}
	q = &recordingQueue{}
	h.Update(ctx, event.UpdateEvent{ObjectOld: obj, ObjectNew: obj}, q)
	h.Delete(ctx, event.DeleteEvent{Object: obj}, q)
	h.Create(ctx, event.CreateEvent{Object: obj, IsInInitialList: true}, q)
	if len(q.now) != 3 || len(q.after) != 0 {
		t.Errorf("update, delete and the initial list's create: queued at once %v, later %v; want all at once", q.now, q.after)
	}
}
