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
	return all{h, delay}
}

type all struct {
	handler.EventHandler
	delay time.Duration
}

func (a all) Create(ctx context.Context, e event.CreateEvent, q queue) {
	a.EventHandler.Create(ctx, e, later{q, a.delay})
}
func (a all) Update(ctx context.Context, e event.UpdateEvent, q queue) {
	a.EventHandler.Update(ctx, e, later{q, a.delay})
}
func (a all) Delete(ctx context.Context, e event.DeleteEvent, q queue) {
	a.EventHandler.Delete(ctx, e, later{q, a.delay})
}
func (a all) Generic(ctx context.Context, e event.GenericEvent, q queue) {
	a.EventHandler.Generic(ctx, e, later{q, a.delay})
}

// Creates passes h's create events to the queue delay later, and every
// other event at once: for children created in a burst (one per cluster,
// moments apart) whose later changes matter at once. The creates of the
// informer's initial list (the process starting) go at once too: they
// meet the owner's own in the queue, which keeps one, where a later one
// would be a second reconcile of every owner.
func Creates(h handler.EventHandler, delay time.Duration) handler.EventHandler {
	return creates{h, delay}
}

type creates struct {
	handler.EventHandler
	delay time.Duration
}

func (c creates) Create(ctx context.Context, e event.CreateEvent, q queue) {
	if e.IsInInitialList {
		c.EventHandler.Create(ctx, e, q)
		return
	}
	c.EventHandler.Create(ctx, e, later{q, c.delay})
}

// later adds delay later.
type later struct {
	queue
	delay time.Duration
}

func (q later) Add(item reconcile.Request) { q.AddAfter(item, q.delay) }
