package fleet

import (
	"context"
	"fmt"
	"sync"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// massDeletion deletes every FleetVirtualMachine of the burst at once, as
// deleting their namespace does (the namespace controller deletes each
// kind's collection), and measures until the hub has taken them all apart
// (their policy is Delete: each Application deleted with Argo CD's
// resources finalizer, each VM gone from its cluster and no longer
// reported, then the finalizer off): how long until the last is gone, and
// what the hub wrote and read for it per FleetVM. The hub's work per
// FleetVM must not grow with the namespace's size.
func (h *harness) massDeletion(ctx context.Context) error {
	var keys []string
	for k, f := range h.fvms.snapshot() {
		if f.Namespace == burstNS {
			keys = append(keys, k)
		}
	}
	n := len(keys)
	if n == 0 {
		return fmt.Errorf("no FleetVM of the burst to delete")
	}
	gone := make(map[string]chan time.Time, n)
	chans := make([]<-chan time.Time, 0, n)
	for _, k := range keys {
		gone[k] = make(chan time.Time, 1)
		chans = append(chans, gone[k])
	}
	var mu sync.Mutex
	left := n
	inf, err := h.cache.GetInformer(ctx, &fleetv1alpha1.FleetVirtualMachine{})
	if err != nil {
		return err
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{DeleteFunc: func(o any) {
		if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		f, ok := o.(*fleetv1alpha1.FleetVirtualMachine)
		if !ok {
			return
		}
		if ch := gone[keyOf(f)]; ch != nil {
			select {
			case ch <- time.Now():
				mu.Lock()
				left--
				mu.Unlock()
			default:
			}
		}
	}})
	if err != nil {
		return err
	}
	defer func() { _ = inf.RemoveEventHandler(reg) }()

	before, err := readHubCounts(ctx, h.kube)
	if err != nil {
		return err
	}
	cpuBefore, _ := readProc(h.hub.pid())
	vmsBefore := h.agents.vmsDeleted.Load()
	splitBefore := readCPUSplit(h.hub.pid())
	t0 := time.Now()
	if prefix := h.cfg.DeletionCPUProfile; prefix != "" {
		defer h.cpuProfiles(ctx, prefix, h.cfg.DeletionCPUProfileWindow)()
	}
	// The API server ends a collection's deletion at its request timeout
	// (a minute: it deletes one object after the other) and the namespace
	// controller asks again, each time going on from what is left; so does
	// this, within the scenario's bound.
	var collectionTries int
	for {
		collectionTries++
		delErr := h.admin.DeleteAllOf(ctx, &fleetv1alpha1.FleetVirtualMachine{}, client.InNamespace(burstNS))
		if delErr == nil {
			break
		}
		if ctx.Err() != nil || time.Since(t0) > h.cfg.Timeout {
			return fmt.Errorf("delete the FleetVMs of namespace %s (%d requests): %w", burstNS, collectionTries, delErr)
		}
		h.logf("mass deletion: delete the collection again: %v", delErr)
	}
	h.report.add("mass deletion: requests to delete the collection", float64(collectionTries), "requests")
	progress := h.progress(ctx, "mass deletion", func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("%d of %d gone", n-left, n)
	})
	times, err := awaitAll(ctx, chans, h.cfg.Timeout)
	progress()
	r := h.report
	label := "mass deletion"
	r.add(label+": FleetVMs deleted at once", float64(n), "FleetVMs")
	r.add(label+": FleetVMs gone", float64(countSet(times)), "FleetVMs")
	if err != nil {
		return fmt.Errorf("FleetVMs not gone: %w", err)
	}
	splitAfter := readCPUSplit(h.hub.pid())
	after, quiet := h.waitHubQuiet(ctx)
	cpuAfter, _ := readProc(h.hub.pid())
	var took []time.Duration
	for _, t := range times {
		took = append(took, t.Sub(t0))
	}
	delta := after.sub(before)
	r.addDuration(label+": all gone", percentile(took, 100))
	r.addDuration(label+": per FleetVM p50", percentile(took, 50))
	r.add(label+": VMs deleted from the clusters", float64(h.agents.vmsDeleted.Load()-vmsBefore), "VMs")
	r.add(label+": hub writes per FleetVM (API server count, without events)", round(delta.writesExceptEvents()/float64(n), 2), "writes/FleetVM")
	for _, c := range delta.classes() {
		if c != "events" {
			r.add(label+": hub writes per FleetVM: "+c, round(delta.Writes[c]/float64(n), 2), "writes/FleetVM")
			if d := delta.Deletes[c]; d != 0 {
				r.add(label+": hub writes per FleetVM: "+c+", of which deletions", round(d/float64(n), 2), "writes/FleetVM")
			}
		}
	}
	r.add(label+": hub reads from the API server per FleetVM (not from its cache)", round(delta.Reads/float64(n), 2), "requests/FleetVM")
	if !quiet {
		r.add(label+": hub still busy 10 min after the last was gone", 1, "flag")
	}
	r.addDuration(label+": hub CPU time", cpuAfter.CPU-cpuBefore.CPU)
	addCPURows(r, label, splitBefore, splitAfter)
	h.logf("mass deletion: %d FleetVMs gone in %s", n, percentile(took, 100).Truncate(time.Millisecond))
	h.memory("mass deletion")
	return nil
}
