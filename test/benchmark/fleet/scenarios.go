package fleet

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/test/fleetenv"
)

// definitions are printed with the table and saved in the JSON.
var definitions = []string{
	"fleet: N ManagedClusters in one cluster set, labels env (80% prod, 10% staging, 10% dev) and region (4); each FleetVM asks for 3 " +
		"clusters with env=prod, an inline VM of 1, 2 or 4 CPUs (three shapes, seeded before the burst so every agent already scores them). " +
		"Each cluster has 2-4 simulated nodes, times the node factor (settings): 2 when the burst puts more than 15 copies on each prod cluster, 3 above 30, so the fleet never fills.",
	"converged (burst): the FleetVM status has observedGeneration = generation, Placed, Delivered and Ready True, and summary.ready = desired: " +
		"the real OCM scheduler decided, the hub created the Placement and ApplicationSet, sees an Argo CD Application for every decided cluster " +
		"and a Running, ready VM report from each. This is stricter than 'ApplicationSet exists'.",
	"the OCM placement scheduler is the real one (open-cluster-management.io/ocm, in the harness process, one worker and the client limits of its command, 50 QPS and burst 100, as OCM runs it); " +
		"its runs and busy time come from its own metrics, and so does the split of a run's time: each filter and prioritizer plugin, " +
		"the CEL evaluations inside the Predicate filter (the rest of that filter is building the CEL environment, compiling and converting each cluster), " +
		"and bind (writing the PlacementDecision and the Placement's status).",
	"Applications are created by the harness's Argo CD stand-in from the ApplicationSet template when the ApplicationSet changes (not on " +
		"PlacementDecision changes, as Argo CD), already Synced/Healthy; their reconciledAt is refreshed every 3 minutes as Argo CD does. " +
		"VM reports and capacity scores are written by per-cluster agent stand-ins running fleetvm-agent's own code (pkg/agent/capacity, " +
		"pkg/agent/vmstatus) over simulated nodes; a VM is reported Running as soon as its Application exists (no boot time).",
	"times: from the client call that creates or changes the input to the moment the harness's watch on the hub sees the result.",
	"hub writes: create/update/patch/delete requests made as fleetvm-hub's own user, counted by the hub API server per resource " +
		"(API Priority and Fairness FlowSchemas matching that user, apiserver_flowcontrol_dispatched_requests_total; " +
		"apiserver_request_total has no user or user-agent label). Events are counted apart.",
	"admission: unless the settings say webhooks false (--disable-webhooks), fleetvm-hub serves its admission webhooks and the hub API server " +
		"calls them on every FleetVM create, as in a cluster: the validating webhook checks it, the mutating one adds the hub's finalizer. " +
		"The hub then writes no finalizer: its writes of fleetvirtualmachines (the object, not its status) are the finalizer's, 1 per FleetVM without the webhooks, 0 with them.",
	"physical limit: creates per second of a small custom resource (BenchItem) by the same number of client goroutines, on the same API " +
		"server, in the same run, right before the burst.",
	"memory: VmRSS and VmHWM (peak) of the fleetvm-hub process (/proc/<pid>/status) at the end of each scenario, and RssFile, the part of VmRSS that maps files (the binary); CPU: its user+system time. " +
		"The hub runs with the Go soft memory limit it sets itself under the container limit in the settings (GOMEMLIMIT = 80 % of it; the chart's is 512 MiB). " +
		"Live heap: the hub's go_memstats_heap_alloc_bytes right after the garbage collection of its heap profile, once the burst converged: what it holds, where RSS also holds the heap's growth between collections.",
}

// physicalLimit measures raw creates per second of a small custom resource.
func (h *harness) physicalLimit(ctx context.Context) error {
	const ns = "bench-raw"
	if err := h.fleet.Hub.EnsureNamespace(ctx, ns); err != nil {
		return err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "benchitems.bench.fleetvm.io"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "bench.fleetvm.io",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "benchitems", Singular: "benchitem", Kind: "BenchItem", ListKind: "BenchItemList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"value": {Type: "string"}}},
					},
				}},
			}},
		},
	}
	if err := h.admin.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create CRD %s: %w", crd.Name, err)
	}
	item := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "bench.fleetvm.io/v1", "kind": "BenchItem",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec":     map[string]any{"value": "x"},
		}}
		return u
	}
	if err := fleetenv.Eventually(ctx, 2*time.Minute, func() (bool, error) {
		err := h.create.Create(ctx, item("probe"))
		return err == nil || apierrors.IsAlreadyExists(err), err
	}); err != nil {
		return fmt.Errorf("BenchItem not served: %w", err)
	}
	n := h.cfg.FleetVMs
	start := time.Now()
	if err := fleetenv.Parallel(ctx, n, h.cfg.Concurrency, func(ctx context.Context, i int) error {
		return h.create.Create(ctx, item(fmt.Sprintf("item-%05d", i)))
	}); err != nil {
		return err
	}
	elapsed := time.Since(start)
	h.rawRate = float64(n) / elapsed.Seconds()
	h.report.add(fmt.Sprintf("physical limit: raw creates of a small custom resource (%d, %d clients)", n, h.cfg.Concurrency), round(h.rawRate, 1), "creates/s")
	h.logf("physical limit: %d BenchItems in %s", n, elapsed.Truncate(time.Millisecond))
	return nil
}

// burst creates M FleetVMs at once and waits until every one converged.
func (h *harness) burst(ctx context.Context) error {
	m := h.cfg.FleetVMs
	before, err := readHubCounts(ctx, h.kube)
	if err != nil {
		return err
	}
	cpuBefore, _ := readProc(h.hub.pid())
	selfBefore := h.hubSelfWrites(ctx)
	schedBefore, err := readSchedulerStats()
	if err != nil {
		return err
	}
	recBefore := h.hubReconcileStats(ctx)
	conflictsBefore, err := readConflicts(ctx, h.kube)
	if err != nil {
		return err
	}
	fvms := make([]*fleetv1alpha1.FleetVirtualMachine, m)
	converge := make([]<-chan time.Time, m)
	for i := range fvms {
		fvms[i] = newFleetVM(burstNS, fmt.Sprintf("vm-%04d", i), i, h.cfg.ClustersPerVM)
		converge[i] = h.fvms.wait(keyOf(fvms[i]), converged)
	}
	splitBefore := readCPUSplit(h.hub.pid())
	writesBefore, _ := apiWrites(ctx, h.kube)
	profiles := func() {}
	if h.cfg.BurstCPUProfile != "" {
		profiles = h.cpuProfiles(ctx, h.cfg.BurstCPUProfile, h.cfg.BurstCPUProfileWindow)
	}
	defer profiles()
	t0 := time.Now()
	if err := fleetenv.Parallel(ctx, m, h.cfg.Concurrency, func(ctx context.Context, i int) error {
		h.stages.created(keyOf(fvms[i]), time.Now())
		if err := h.create.Create(ctx, fvms[i]); err != nil {
			return fmt.Errorf("create FleetVM %s: %w", keyOf(fvms[i]), err)
		}
		return nil
	}); err != nil {
		return err
	}
	h.logf("burst: %d FleetVMs created in %s", m, time.Since(t0).Truncate(time.Millisecond))
	waits := h.hub.sampleWaits(ctx)

	progress := h.progress(ctx, "burst", func() string {
		n := 0
		for _, t := range h.stages.snapshot() {
			if !t.converged.IsZero() && !t.created.IsZero() {
				n++
			}
		}
		return fmt.Sprintf("%d of %d converged", n, m)
	})
	times, err := awaitAll(ctx, converge, h.cfg.Timeout)
	progress()
	waitProfile := waits()
	if err != nil {
		h.report.add("burst: FleetVMs converged", float64(countSet(times)), "FleetVMs")
		return fmt.Errorf("FleetVMs not converged: %w", err)
	}
	splitAfter := readCPUSplit(h.hub.pid())
	writesAfter, _ := apiWrites(ctx, h.kube)
	last := slices.MaxFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	total := last.Sub(t0)
	stages := h.stages.snapshot()
	var conv, placement, scheduled, rest []time.Duration
	for _, f := range fvms {
		t := stages[keyOf(f)]
		conv = append(conv, t.converged.Sub(t.created))
		if !t.placement.IsZero() {
			placement = append(placement, t.placement.Sub(t.created))
			if !t.decided.IsZero() {
				scheduled = append(scheduled, t.decided.Sub(t.placement))
			}
		}
		if !t.decided.IsZero() {
			rest = append(rest, t.converged.Sub(t.decided))
		}
	}
	sched, _ := readSchedulerStats()
	after, quiet := h.waitHubQuiet(ctx)
	cpuAfter, _ := readProc(h.hub.pid())
	selfAfter := h.hubSelfWrites(ctx)
	recAfter := h.hubReconcileStats(ctx)
	delta := after.sub(before)

	r := h.report
	r.add("burst: FleetVMs converged", float64(m), "FleetVMs")
	r.addDuration("burst: all converged (Placed+Delivered+status aggregated)", total)
	r.addDuration("burst: per FleetVM p50", percentile(conv, 50))
	r.addDuration("burst: per FleetVM p95", percentile(conv, 95))
	r.addDuration("burst: per FleetVM p99", percentile(conv, 99))
	for _, st := range []struct {
		name string
		ds   []time.Duration
	}{
		{"burst: stage 1, create to hub's Placement", placement},
		{"burst: stage 2, Placement to scheduler's decision", scheduled},
		{"burst: stage 3, decision to converged (hub, Argo CD and agent stand-ins)", rest},
	} {
		r.addDuration(st.name+" p50", percentile(st.ds, 50))
		r.addDuration(st.name+" p99", percentile(st.ds, 99))
	}
	schedDelta := sched.sub(schedBefore)
	r.add("burst: OCM scheduler runs per FleetVM", round(schedDelta.Runs/float64(m), 2), "runs/FleetVM")
	r.addDuration("burst: OCM scheduler busy (one worker), summed", schedDelta.Busy)
	r.schedulerPerRun("burst", schedDelta)
	// The runs the scheduler still makes after the last FleetVM
	// converged, until it idles: OCM schedules a Placement again after
	// writing its decision and status, and that run queues behind every
	// first run of the burst.
	if schedIdle, err := readSchedulerStats(); err == nil {
		tail := schedIdle.sub(sched)
		r.add("creation: OCM scheduler runs after convergence", tail.Runs, "runs")
		r.addDuration("creation: OCM scheduler busy after convergence, summed", tail.Busy)
		r.add("creation: OCM scheduler runs per FleetVM, until it idles", round(schedIdle.sub(schedBefore).Runs/float64(m), 2), "runs/FleetVM")
	}
	rate := float64(m) / total.Seconds()
	r.add("burst: convergence rate", round(rate, 2), "FleetVMs/s")
	if h.rawRate > 0 {
		r.add("burst: convergence rate / physical limit", round(100*rate/h.rawRate, 2), "%")
	}
	r.add("creation: hub writes per FleetVM (API server count, without events)", round(delta.writesExceptEvents()/float64(m), 2), "writes/FleetVM")
	// fleetvirtualmachines are the finalizer's writes: shown at 0 too,
	// where the webhook added it at admission.
	for _, c := range delta.classes("fleetvirtualmachines") {
		r.add("creation: hub writes per FleetVM: "+c, round(delta.Writes[c]/float64(m), 2), "writes/FleetVM")
	}
	r.add("creation: hub writes per FleetVM, events included: API server count", round(delta.totalWrites()/float64(m), 2), "writes/FleetVM")
	r.add("creation: hub writes per FleetVM, events included: the hub's own count", round((selfAfter-selfBefore)/float64(m), 2), "writes/FleetVM")
	if c, err := readConflicts(ctx, h.kube); err == nil {
		d := c.sub(conflictsBefore)
		r.add("creation: hub status writes refused 409 Conflict per FleetVM (stale cache)", round(d.fvmStatus/float64(m), 2), "writes/FleetVM")
		r.add("burst: OCM scheduler Placement status writes refused 409 Conflict", d.placementStatus, "writes")
	}
	r.add("creation: hub reads from the API server per FleetVM (not from its cache)", round(delta.Reads/float64(m), 2), "requests/FleetVM")
	if !quiet {
		r.add("creation: hub or OCM scheduler still busy 10 min after convergence", 1, "flag")
	}
	r.addDuration("burst: hub CPU time", cpuAfter.CPU-cpuBefore.CPU)
	addCPURows(r, "burst", splitBefore, splitAfter)
	addWriteRows(r, "burst", writesBefore, writesAfter, m)
	h.addReconcileRows("burst", recBefore, recAfter)
	waitProfile.addRows(r, "burst")
	h.memory("burst")
	h.liveHeap(ctx, "burst")
	if h.cfg.HubMetrics != "" {
		raw, err := fetchHTTP(ctx, h.hub.metricsURL)
		if err == nil {
			err = os.WriteFile(h.cfg.HubMetrics, raw, 0o600)
		}
		if err != nil {
			return fmt.Errorf("save the hub's /metrics: %w", err)
		}
	}
	h.logf("burst: converged in %s", total.Truncate(time.Millisecond))
	return nil
}

func countSet(ts []time.Time) int {
	n := 0
	for _, t := range ts {
		if !t.IsZero() {
			n++
		}
	}
	return n
}

// waitHubQuiet waits until neither the hub has written nor the OCM
// scheduler has run for the quiet window (at most 10 minutes: the
// scheduler's one worker may still hold a run per Placement when the
// last FleetVM converges) and returns the hub's counts then.
func (h *harness) waitHubQuiet(ctx context.Context) (hubCounts, bool) {
	window, bound := h.cfg.Quiet, 10*time.Minute
	last, err := readHubCounts(ctx, h.kube)
	lastSched, _ := readSchedulerStats()
	changed := time.Now()
	deadline := changed.Add(bound)
	for err == nil && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return last, false
		case <-time.After(min(2*time.Second, window/2)):
		}
		cur, e := readHubCounts(ctx, h.kube)
		if e != nil {
			return last, false
		}
		sched, _ := readSchedulerStats()
		if cur.totalWrites() != last.totalWrites() || sched.Runs != lastSched.Runs {
			changed = time.Now()
		}
		last, lastSched = cur, sched
		if time.Since(changed) >= window {
			return last, true
		}
	}
	return last, false
}

// progress logs a line every 15 s until the returned func is called.
func (h *harness) progress(ctx context.Context, what string, line func() string) func() {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		t := time.NewTicker(15 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				h.logf("%s: %s (load %s)", what, line(), loadAverage())
			}
		}
	}()
	return cancel
}

// memory adds the hub's RSS and peak RSS.
func (h *harness) memory(scenario string) {
	st, err := readProc(h.hub.pid())
	if err != nil {
		h.logf("read the hub's memory: %v", err)
		return
	}
	h.report.add("memory after "+scenario+": hub RSS", mib(st.RSS), "MiB")
	h.report.add("memory after "+scenario+": hub peak RSS (VmHWM)", mib(st.HWM), "MiB")
	h.report.add("memory after "+scenario+": hub RSS mapping files (the binary)", mib(st.RSSFile), "MiB")
}

// liveHeap adds what the hub's heap holds after a garbage collection:
// what it needs, where the RSS also holds what the Go runtime lets the
// heap grow to between collections. The collection is the heap profile's
// (written to cfg.HubHeapProfile when set).
func (h *harness) liveHeap(ctx context.Context, scenario string) {
	path := h.cfg.HubHeapProfile
	if path == "" {
		path = os.DevNull
	}
	if err := h.hub.saveHeapProfile(ctx, path); err != nil {
		h.logf("the hub's heap profile: %v", err)
		return
	}
	ss, err := scrapeHTTP(ctx, h.hub.metricsURL)
	if err != nil {
		h.logf("read the hub's metrics: %v", err)
		return
	}
	h.report.add("memory after "+scenario+": hub live heap after a GC", mib(int64(ss.sum("go_memstats_heap_alloc_bytes", nil))), "MiB")
}

// hubSelfWrites is the hub's own count of its mutating requests
// (client-go's rest_client_requests_total, events included).
func (h *harness) hubSelfWrites(ctx context.Context) float64 {
	ss, err := scrapeHTTP(ctx, h.hub.metricsURL)
	if err != nil {
		h.logf("read the hub's metrics: %v", err)
		return 0
	}
	var n float64
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		n += ss.sum("rest_client_requests_total", map[string]string{"method": m})
	}
	return n
}

// hubReconciles sums the hub's own reconcile counter of a controller.
func (h *harness) hubReconciles(ctx context.Context, controller string) (float64, error) {
	ss, err := scrapeHTTP(ctx, h.hub.metricsURL)
	if err != nil {
		return 0, err
	}
	return ss.sum("controller_runtime_reconcile_total", map[string]string{"controller": controller}), nil
}

// hubControllers are the hub's controllers, as its metrics name them.
var hubControllers = []string{"fleetvirtualmachine", "vmshapes", "fleetdiskimage"}

// reconcileStats are the hub's reconcile counts and time per controller.
type reconcileStats map[string]struct {
	Count float64
	Time  time.Duration
}

func (h *harness) hubReconcileStats(ctx context.Context) reconcileStats {
	out := reconcileStats{}
	ss, err := scrapeHTTP(ctx, h.hub.metricsURL)
	if err != nil {
		h.logf("read the hub's metrics: %v", err)
		return out
	}
	for _, c := range hubControllers {
		sel := map[string]string{"controller": c}
		out[c] = struct {
			Count float64
			Time  time.Duration
		}{
			Count: ss.sum("controller_runtime_reconcile_total", sel),
			Time:  time.Duration(ss.sum("controller_runtime_reconcile_time_seconds_sum", sel) * float64(time.Second)),
		}
	}
	return out
}

// addReconcileRows reports the hub's reconciles between two readings.
func (h *harness) addReconcileRows(prefix string, before, after reconcileStats) {
	for _, c := range hubControllers {
		n := after[c].Count - before[c].Count
		if n == 0 {
			continue
		}
		h.report.add(fmt.Sprintf("%s: hub reconciles, %s", prefix, c), n, "reconciles")
		h.report.addDuration(fmt.Sprintf("%s: hub reconcile time, %s", prefix, c), after[c].Time-before[c].Time)
	}
}

func (h *harness) loadWrites() int64 {
	return h.agents.scoreWrites.Load() + h.agents.reportWrites.Load() + h.argo.writes.Load()
}

// atRest idles and counts what the hub does meanwhile.
func (h *harness) atRest(ctx context.Context) error {
	before, err := readHubCounts(ctx, h.kube)
	if err != nil {
		return err
	}
	recBefore, err := h.hubReconciles(ctx, "fleetvirtualmachine")
	if err != nil {
		return err
	}
	cpuBefore, _ := readProc(h.hub.pid())
	loadBefore := h.loadWrites()
	schedBefore, _ := readSchedulerStats()
	h.logf("at rest for %s", h.cfg.Rest)
	var profiles func()
	if prefix := h.cfg.RestCPUProfile; prefix != "" {
		profiles = h.cpuProfiles(ctx, prefix, h.cfg.Rest)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(h.cfg.Rest):
	}
	if profiles != nil {
		// Both end with the window, about now.
		profiles()
	}
	after, err := readHubCounts(ctx, h.kube)
	if err != nil {
		return err
	}
	recAfter, err := h.hubReconciles(ctx, "fleetvirtualmachine")
	if err != nil {
		return err
	}
	cpuAfter, _ := readProc(h.hub.pid())
	delta := after.sub(before)
	label := fmt.Sprintf("at rest (%s)", h.cfg.Rest)
	r := h.report
	r.add(label+": hub writes", delta.writesExceptEvents(), "writes")
	for _, c := range delta.classes() {
		if c != "events" {
			r.add(label+": hub writes: "+c, delta.Writes[c], "writes")
		}
	}
	r.add(label+": hub events", delta.Writes["events"], "events")
	r.add(label+": hub FleetVM reconciles", recAfter-recBefore, "reconciles")
	r.add(label+": agent and Argo CD stand-in writes", float64(h.loadWrites()-loadBefore), "writes")
	if sched, err := readSchedulerStats(); err == nil {
		d := sched.sub(schedBefore)
		r.add(label+": OCM scheduler runs", d.Runs, "runs")
		r.addDuration(label+": OCM scheduler busy, summed", d.Busy)
		// Per FleetVM Placement (the burst's and the seeds'), and as a
		// share of the idle time of its one worker.
		placements := float64(h.cfg.FleetVMs + len(shapes))
		r.add(label+": OCM scheduler runs per FleetVM Placement", round(d.Runs/placements, 3), "runs/Placement")
		r.add(label+": OCM scheduler busy share", round(100*d.Busy.Seconds()/h.cfg.Rest.Seconds(), 2), "%")
		r.schedulerPerRun(label, d)
	}
	r.addDuration(label+": hub CPU time", cpuAfter.CPU-cpuBefore.CPU)
	h.memory("at rest")
	return nil
}

// statusLatency flips VM state in K reports at once and times the hub.
func (h *harness) statusLatency(ctx context.Context) error {
	before, err := readHubCounts(ctx, h.kube)
	if err != nil {
		return err
	}
	flips := 0
	for _, k := range h.cfg.StatusK {
		rounds := max(1, (h.cfg.StatusSamples+2*k-1)/(2*k))
		var samples []time.Duration
		for range rounds {
			var candidates []vmRef
			for _, v := range h.agents.vmsByState(true) {
				if v.FleetVM.Namespace == burstNS {
					candidates = append(candidates, v)
				}
			}
			if len(candidates) < k {
				return fmt.Errorf("with K=%d: only %d running VMs", k, len(candidates))
			}
			rand.Shuffle(len(candidates), func(i, j int) { candidates[i], candidates[j] = candidates[j], candidates[i] })
			picked := candidates[:k]
			for _, running := range []bool{false, true} {
				want := "Stopped"
				if running {
					want = "Running"
				}
				waits := make([]<-chan time.Time, k)
				for i, v := range picked {
					waits[i] = h.fvms.wait(v.FleetVM.String(), clusterShows(v.Cluster, want))
				}
				starts := make([]time.Time, k)
				if err := fleetenv.Parallel(ctx, k, h.cfg.Concurrency, func(ctx context.Context, i int) error {
					starts[i] = time.Now()
					return h.agents.setRunning(ctx, picked[i].Cluster, picked[i].FleetVM, running)
				}); err != nil {
					return err
				}
				times, err := awaitAll(ctx, waits, h.cfg.Timeout)
				if err != nil {
					return fmt.Errorf("with K=%d: the hub status did not show %s: %w", k, want, err)
				}
				for i := range times {
					samples = append(samples, times[i].Sub(starts[i]))
				}
				flips += k
			}
		}
		h.report.addDuration(fmt.Sprintf("status latency K=%d: p50 (%d flips)", k, len(samples)), percentile(samples, 50))
		h.report.addDuration(fmt.Sprintf("status latency K=%d: p99 (%d flips)", k, len(samples)), percentile(samples, 99))
	}
	after, _ := h.waitHubQuiet(ctx)
	delta := after.sub(before)
	h.report.add("status latency: hub writes per flipped report", round(delta.writesExceptEvents()/float64(flips), 2), "writes/flip")
	h.memory("status latency")
	return nil
}

// decisionChange relabels a cluster out of env=prod: the scheduler moves
// the FleetVMs placed there, and the hub must refresh their
// ApplicationSets. Done for the cluster with the fewest FleetVMs (at least
// one) and for the one with the most.
func (h *harness) decisionChange(ctx context.Context) error {
	byCluster := map[string][]*fleetv1alpha1.FleetVirtualMachine{}
	for _, fvm := range h.fvms.snapshot() {
		if fvm.Namespace != burstNS || fvm.Status.Placement == nil {
			continue
		}
		for _, c := range fvm.Status.Clusters {
			byCluster[c.Cluster] = append(byCluster[c.Cluster], fvm)
		}
	}
	if len(byCluster) == 0 {
		return fmt.Errorf("no FleetVM is placed")
	}
	names := make([]string, 0, len(byCluster))
	for c := range byCluster {
		names = append(names, c)
	}
	slices.SortFunc(names, func(a, b string) int {
		if d := len(byCluster[a]) - len(byCluster[b]); d != 0 {
			return d
		}
		return compareStrings(a, b)
	})
	rounds := []string{names[0]}
	if last := names[len(names)-1]; last != names[0] && h.cfg.DecisionRounds > 1 {
		rounds = append(rounds, last)
	}
	for _, cluster := range rounds {
		if err := h.moveOff(ctx, cluster, byCluster[cluster]); err != nil {
			return err
		}
	}
	h.memory("decision change")
	return nil
}

// runningOnReplacement tells whether the hub's status no longer lists the
// cluster that left and the VM runs, ready, on as many clusters as asked.
func runningOnReplacement(left string) func(*fleetv1alpha1.FleetVirtualMachine) bool {
	return func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		for _, c := range f.Status.Clusters {
			if c.Cluster == left {
				return false
			}
		}
		return converged(f)
	}
}

// leavingFrom tells whether the hub's status shows the cluster leaving.
func leavingFrom(cluster string) func(*fleetv1alpha1.FleetVirtualMachine) bool {
	return func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		for _, c := range f.Status.Clusters {
			if c.Cluster == cluster {
				return c.Phase == fleetv1alpha1.ClusterPhaseLeaving
			}
		}
		return false
	}
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (h *harness) moveOff(ctx context.Context, cluster string, affected []*fleetv1alpha1.FleetVirtualMachine) error {
	n := len(affected)
	before, err := readHubCounts(ctx, h.kube)
	if err != nil {
		return err
	}
	decided := make([]<-chan time.Time, n)
	leaving := make([]<-chan time.Time, n)
	ready := make([]<-chan time.Time, n)
	for i, fvm := range affected {
		// The chunk of the FleetVM's Placement's decision that lists the
		// cluster (a shared candidate Placement's has several).
		chunk := fvm.Status.Placement.Name + "-decision-1"
		for n, d := range h.decisions.snapshot() {
			if d.Labels[clusterv1beta1.PlacementLabel] == fvm.Status.Placement.Name && slices.ContainsFunc(d.Status.Decisions,
				func(cd clusterv1beta1.ClusterDecision) bool { return cd.ClusterName == cluster }) {
				chunk = n
			}
		}
		decided[i] = h.decisions.wait(chunk, func(d *clusterv1beta1.PlacementDecision) bool {
			if len(d.Status.Decisions) == 0 {
				return false
			}
			for _, cd := range d.Status.Decisions {
				if cd.ClusterName == cluster {
					return false
				}
			}
			return true
		})
		leaving[i] = h.fvms.wait(keyOf(fvm), leavingFrom(cluster))
		ready[i] = h.fvms.wait(keyOf(fvm), runningOnReplacement(cluster))
	}
	mc := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: cluster}}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"env":"staging"}}}`))
	t0 := time.Now()
	if err := h.admin.Patch(ctx, mc, patch); err != nil {
		return fmt.Errorf("relabel %s: %w", cluster, err)
	}
	tDecided, err := awaitAll(ctx, decided, h.cfg.Timeout)
	if err != nil {
		return fmt.Errorf("decisions off %s: %w", cluster, err)
	}
	tLeaving, err := awaitAll(ctx, leaving, h.cfg.Timeout)
	if err != nil {
		return fmt.Errorf("the hub shows %s leaving: %w", cluster, err)
	}
	tReady, err := awaitAll(ctx, ready, h.cfg.Timeout)
	if err != nil {
		return fmt.Errorf("FleetVMs ready again after %s left: %w", cluster, err)
	}
	after, _ := h.waitHubQuiet(ctx)
	delta := after.sub(before)

	var sched, left, again []time.Duration
	for i := range affected {
		sched = append(sched, tDecided[i].Sub(t0))
		left = append(left, tLeaving[i].Sub(t0))
		again = append(again, tReady[i].Sub(t0))
	}
	label := fmt.Sprintf("decision change (%s moved)", plural(n, "FleetVM"))
	r := h.report
	r.addDuration(label+": hub shows the cluster leaving, max", percentile(left, 100))
	if n > 1 {
		r.addDuration(label+": hub shows the cluster leaving, p50", percentile(left, 50))
	}
	r.addDuration(label+": scheduler's decision updated, max", percentile(sched, 100))
	r.addDuration(label+fmt.Sprintf(": VMs running on the replacement clusters (after the %s grace period), max", h.cfg.GracePeriod), percentile(again, 100))
	r.add(label+": hub writes per moved FleetVM", round(delta.writesExceptEvents()/float64(n), 2), "writes/FleetVM")
	h.logf("decision change: %s moved off %s", plural(n, "FleetVM"), cluster)
	return nil
}

// restart stops fleetvm-hub as a rolling update does (SIGTERM) with the
// fleet converged and at rest, starts it again, and measures the new
// process: how long until it is steady (it reconciled every
// FleetVirtualMachine and its queue is empty, counted from its start) and
// what it wrote by then and until the hub is quiet. A hub that finds
// everything in place writes nothing. n numbers the restarts of one run.
func (h *harness) restart(ctx context.Context, n int) error {
	label := "restart"
	if n > 1 {
		label = fmt.Sprintf("restart %d", n)
	}
	fvms := len(h.fvms.snapshot())
	before, err := readHubCounts(ctx, h.kube)
	if err != nil {
		return err
	}
	h.hub.stop()
	splitBefore := readCPUSplit(0) // the new hub starts from none
	start := time.Now()
	if err := h.startHub(ctx); err != nil {
		return err
	}
	ready := time.Since(start)
	if prefix := h.cfg.RestartCPUProfile; prefix != "" {
		if n > 1 {
			prefix += strconv.Itoa(n)
		}
		defer h.cpuProfiles(ctx, prefix, h.cfg.RestartCPUProfileWindow)()
	}
	var reconciled, depth float64
	// The hub's /metrics grows with the fleet (3 series per running
	// FleetVM, BenchmarkScrape in pkg/metrics; 13 before phases without
	// clusters were left out, 0.6 s of CPU per scrape at 10,000). Read every 100 ms, back to
	// back, the harness's own reads cost the hub more than its restart,
	// and more the more FleetVMs: a read waits ten times the last one's
	// time, so they take the hub a tenth of a core, as a Prometheus scrape
	// interval would, but 2 s at most, which bounds the error of the
	// steady time (a read before the caches synced waits for them).
	var scrapes int
	var lastScrape time.Time
	var took time.Duration
	steady := func() bool {
		if time.Since(lastScrape) < min(10*took, 2*time.Second) {
			return false
		}
		lastScrape = time.Now()
		ss, err := scrapeHTTP(ctx, h.hub.metricsURL)
		took = time.Since(lastScrape)
		scrapes++
		if err != nil {
			return false
		}
		sel := map[string]string{"controller": "fleetvirtualmachine"}
		reconciled = ss.sum("controller_runtime_reconcile_total", sel)
		depth = ss.sum("workqueue_depth", map[string]string{"name": "fleetvirtualmachine"})
		return reconciled >= float64(fvms) && depth == 0
	}
	if err := poll(ctx, h.cfg.Timeout, steady); err != nil {
		return fmt.Errorf("the restarted hub reconciled %.0f of %d FleetVirtualMachines, %.0f queued: %w", reconciled, fvms, depth, err)
	}
	toSteady := time.Since(start)
	splitSteady := readCPUSplit(h.hub.pid())
	atSteady, err := readHubCounts(ctx, h.kube)
	if err != nil {
		return err
	}
	quiet, ok := h.waitHubQuiet(ctx)
	if !ok {
		h.logf("restart: the hub did not turn quiet within the bound")
	}
	recs, _ := h.hubReconciles(ctx, "fleetvirtualmachine")
	r := h.report
	r.add(label+": FleetVMs", float64(fvms), "FleetVMs")
	r.addDuration(label+": hub ready", ready)
	r.addDuration(label+": steady (every FleetVM reconciled, queue empty)", toSteady)
	r.add(label+": reads of the hub's /metrics until steady", float64(scrapes), "reads")
	r.add(label+": hub writes until steady", atSteady.sub(before).writesExceptEvents(), "writes")
	r.add(label+": hub writes until quiet", quiet.sub(before).writesExceptEvents(), "writes")
	// Which kinds a restart writes: it should write none.
	for _, class := range quiet.sub(before).classes() {
		if class != "events" {
			r.add(label+": hub writes until quiet: "+class, quiet.sub(before).Writes[class], "writes")
		}
	}
	r.add(label+": hub events until quiet", quiet.sub(before).Writes["events"], "events")
	r.add(label+": FleetVM reconciles until quiet", recs, "reconciles")
	addCPURows(r, label+" until steady", splitBefore, splitSteady)
	h.logf("%s: ready in %s, steady in %s, %.0f writes", label, ready.Truncate(time.Millisecond), toSteady.Truncate(time.Millisecond), quiet.sub(before).writesExceptEvents())
	h.memory(label)
	return nil
}
