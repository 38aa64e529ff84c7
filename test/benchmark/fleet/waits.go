package fleet

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The wait profile says where fleetvm-hub's reconcile workers spend the
// burst: it samples the hub's goroutines (pprof, debug=1) every
// waitSampleEvery and sorts every worker goroutine of the
// FleetVirtualMachine controller into what it is doing at that moment.
// A CPU profile shows where the hub computes; this shows where its workers
// wait, which is what bounds a burst when the hub's CPU is mostly idle.

const waitSampleEvery = 250 * time.Millisecond

// Where a busy worker is, in the order classify tests them.
const (
	waitRateLimiter = "client-side rate limiter"
	waitRequest     = "API request in flight"
	waitLock        = "lock or channel"
	waitRunning     = "running or runnable"
)

var waitKinds = []string{waitRateLimiter, waitRequest, waitLock, waitRunning}

// waitProfile accumulates samples; start it with sampleWaits.
type waitProfile struct {
	mu      sync.Mutex
	samples int
	// kinds counts busy worker goroutines per kind over all samples;
	// where counts them per innermost FleetVM frame and kind.
	kinds map[string]int
	where map[string]int
}

// sampleWaits samples the hub's goroutines until the returned function is
// called, which returns what was seen.
func (h *hubProcess) sampleWaits(ctx context.Context) func() *waitProfile {
	p := &waitProfile{kinds: map[string]int{}, where: map[string]int{}}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(waitSampleEvery)
		defer t.Stop()
		for {
			if dump, err := h.goroutines(ctx); err == nil {
				p.add(dump)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() *waitProfile {
		cancel()
		<-done
		return p
	}
}

// goroutines reads the hub's goroutine profile in its text form.
func (h *hubProcess) goroutines(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.pprofURL+"goroutine?debug=1", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", req.URL, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// add sorts the worker goroutines of one dump.
func (p *waitProfile) add(dump string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.samples++
	for _, st := range parseStacks(dump) {
		if !isFleetVMWorker(st.frames) {
			continue
		}
		kind := classify(st.frames)
		p.kinds[kind] += st.count
		p.where[innermostFleetVM(st.frames)+" — "+kind] += st.count
	}
}

// stack is one entry of a debug=1 goroutine profile: how many goroutines
// share it, and its function names, innermost first.
type stack struct {
	count  int
	frames []string
}

// parseStacks reads a debug=1 goroutine profile: each entry starts with
// "N @ 0x...", then one "#\t0x...\tfunction+0x..\tfile:line" line a frame.
func parseStacks(dump string) []stack {
	var out []stack
	sc := bufio.NewScanner(strings.NewReader(dump))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if n, _, ok := strings.Cut(line, " @ "); ok {
			if c, err := strconv.Atoi(n); err == nil {
				out = append(out, stack{count: c})
			}
			continue
		}
		if len(out) == 0 || !strings.HasPrefix(line, "#\t") {
			continue
		}
		fields := strings.Split(line, "\t")
		if len(fields) < 3 {
			continue
		}
		fn, _, _ := strings.Cut(fields[2], "+0x")
		out[len(out)-1].frames = append(out[len(out)-1].frames, fn)
	}
	return out
}

const fleetVMController = "github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine"

// isFleetVMWorker: a worker goroutine of controller-runtime's controller
// inside the FleetVirtualMachine reconciler (a busy one: an idle worker
// waits on its queue, with no reconciler frame).
func isFleetVMWorker(frames []string) bool {
	worker, fleetVM := false, false
	for _, f := range frames {
		worker = worker || strings.Contains(f, "controller-runtime/pkg/internal/controller.(*Controller[...]).processNextWorkItem")
		fleetVM = fleetVM || strings.HasPrefix(f, fleetVMController+".")
	}
	return worker && fleetVM
}

// classify says what a worker goroutine is doing, from its frames.
func classify(frames []string) string {
	has := func(parts ...string) bool {
		for _, f := range frames {
			for _, p := range parts {
				if strings.Contains(f, p) {
					return true
				}
			}
		}
		return false
	}
	switch {
	case has("flowcontrol.", "golang.org/x/time/rate.(*Limiter).Wait"):
		return waitRateLimiter
	case has("net/http.(*persistConn).roundTrip", "net/http.(*Transport).roundTrip", "http2.(*ClientConn).RoundTrip",
		"http2.(*clientStream)", "http2.(*ClientConn).roundTrip"):
		return waitRequest
	case has("sync.(*Mutex).Lock", "sync.(*RWMutex).", "runtime.chanrecv", "runtime.chansend", "runtime.selectgo", "sync.(*WaitGroup).Wait"):
		return waitLock
	default:
		return waitRunning
	}
}

// innermostFleetVM names the innermost frame of FleetVM's own code.
func innermostFleetVM(frames []string) string {
	for _, f := range frames {
		if strings.HasPrefix(f, "github.com/fleetvm/fleetvm/") {
			return strings.TrimPrefix(f, "github.com/fleetvm/fleetvm/")
		}
	}
	return "(outside FleetVM)"
}

// addRows puts the wait profile into the report: how many of the
// FleetVirtualMachine workers were busy on average, each kind's share of
// their busy time, and the frames where busy workers were seen most.
func (p *waitProfile) addRows(r *Report, prefix string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	busy := 0
	for _, n := range p.kinds {
		busy += n
	}
	if busy == 0 || p.samples == 0 {
		return
	}
	r.add(prefix+": wait profile samples", float64(p.samples), "samples")
	r.add(prefix+": FleetVirtualMachine workers busy, on average", round(float64(busy)/float64(p.samples), 2), "workers")
	for _, k := range waitKinds {
		r.add(prefix+": busy workers' time: "+k, round(100*float64(p.kinds[k])/float64(busy), 1), "%")
	}
	keys := slices.Collect(maps.Keys(p.where))
	slices.SortFunc(keys, func(a, b string) int {
		if p.where[a] != p.where[b] {
			return p.where[b] - p.where[a]
		}
		return strings.Compare(a, b)
	})
	for _, k := range keys[:min(len(keys), 10)] {
		r.add(prefix+": busy workers at "+k, round(100*float64(p.where[k])/float64(busy), 1), "% of busy")
	}
}
