// Package coalesce delays the events of a watch, so that a burst of them
// wakes one reconcile: the workqueue keeps one item, at the earliest time
// asked, however many events add it meanwhile.
package coalesce

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// All passes every event of h to the queue delay later.
func All(h handler.EventHandler, delay time.Duration) handler.EventHandler {
	return delayed{h, delay, true}
}

// Creates passes h's create events to the queue delay later, and every
// other event at once: for children created in a burst (one per cluster,
// moments apart) whose later changes matter at once. The creates of the
// informer's initial list (the process starting) go at once too: they
// meet the owner's own in the queue, which keeps one, where a later one
// would be a second reconcile of every owner.
func Creates(h handler.EventHandler, delay time.Duration) handler.EventHandler {
	return delayed{h, delay, false}
}

// delayed passes creates later (but the initial list's, unless all), and
// the other events later only if all.
type delayed struct {
	handler.EventHandler
	delay time.Duration
	all   bool
}

func (d delayed) Create(ctx context.Context, e event.CreateEvent, q queue) {
	if d.all || !e.IsInInitialList {
		q = later{q, d.delay}
	}
	d.EventHandler.Create(ctx, e, q)
}
func (d delayed) Update(ctx context.Context, e event.UpdateEvent, q queue) {
	d.EventHandler.Update(ctx, e, d.others(q))
}
func (d delayed) Delete(ctx context.Context, e event.DeleteEvent, q queue) {
	d.EventHandler.Delete(ctx, e, d.others(q))
}
func (d delayed) Generic(ctx context.Context, e event.GenericEvent, q queue) {
	d.EventHandler.Generic(ctx, e, d.others(q))
}

// others is the queue of the events other than creates.
func (d delayed) others(q queue) queue {
	if d.all {
		return later{q, d.delay}
	}
	return q
}

// later adds delay later.
type later struct {
	queue
	delay time.Duration
}

func (q later) Add(item reconcile.Request) { q.AddAfter(item, q.delay) }
