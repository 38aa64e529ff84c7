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

// TestDelayed: All queues every event delay later; Creates a create
// only, and an update, a delete, a generic event or a create of the
// informer's initial list (the process starting) at once.
func TestDelayed(t *testing.T) {
	const delay = 3 * time.Second
	obj := &fleetv1alpha1.VMReport{}
	events := []struct {
		name string
		send func(handler.EventHandler, queue)
	}{
		{"create", func(h handler.EventHandler, q queue) {
			h.Create(context.Background(), event.CreateEvent{Object: obj}, q)
		}},
		{"initial list's create", func(h handler.EventHandler, q queue) {
			h.Create(context.Background(), event.CreateEvent{Object: obj, IsInInitialList: true}, q)
		}},
		{"update", func(h handler.EventHandler, q queue) {
			h.Update(context.Background(), event.UpdateEvent{ObjectOld: obj, ObjectNew: obj}, q)
		}},
		{"delete", func(h handler.EventHandler, q queue) {
			h.Delete(context.Background(), event.DeleteEvent{Object: obj}, q)
		}},
		{"generic", func(h handler.EventHandler, q queue) {
			h.Generic(context.Background(), event.GenericEvent{Object: obj}, q)
		}},
	}
	for _, c := range []struct {
		name      string
		h         handler.EventHandler
		wantLater []bool // per event above
	}{
		{"All", All(handler.EnqueueRequestsFromMapFunc(toKey), delay), []bool{true, true, true, true, true}},
		{"Creates", Creates(handler.EnqueueRequestsFromMapFunc(toKey), delay), []bool{true, false, false, false, false}},
	} {
		for i, e := range events {
			q := &recordingQueue{}
			e.send(c.h, q)
			switch {
			case c.wantLater[i] && (len(q.now) != 0 || len(q.after) != 1 || q.after[0] != key || q.delays[0] != delay):
				t.Errorf("%s, %s: queued at once %v, later %v after %v; want %v after %s only", c.name, e.name, q.now, q.after, q.delays, key, delay)
			case !c.wantLater[i] && (len(q.now) != 1 || q.now[0] != key || len(q.after) != 0):
				t.Errorf("%s, %s: queued at once %v, later %v; want %v at once only", c.name, e.name, q.now, q.after, key)
			}
		}
	}
}
