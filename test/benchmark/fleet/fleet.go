// Package fleet is FleetVM's fleet benchmark: N managed clusters on a real
// hub API server, the real OCM placement scheduler, the real fleetvm-hub
// binary as its own process, and a load generator standing in for the
// clusters' agents and for Argo CD. It measures, in one run:
//
//   - Burst: M FleetVirtualMachines (3 clusters each) created at once, until
//     every one is placed, delivered and its status aggregated;
//   - At rest: the hub's writes while nothing changes (should be none);
//   - Status latency: VM state flipped in K agent reports, until the hub's
//     FleetVirtualMachine status shows it;
//   - Decision change: a cluster's label changes so decisions move, until the
//     ApplicationSets are refreshed;
//   - Writes per FleetVM at creation, counted by the hub API server;
//   - Memory (RSS and peak) of the hub process after each scenario;
//   - Physical limit: raw creates per second of a small custom resource on
//     the same API server with the same client concurrency.
//
// hack/bench is the command (make bench); the smoke test in this package
// runs a small fleet and asserts that every scenario converges, never a time.
package fleet

import (
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/test/fleetenv"
)

const (
	argoNS  = "argocd"
	burstNS = "bench"
	seedNS  = "bench-seed"
)

// Config are the benchmark's parameters. Zero values take the defaults.
type Config struct {
	// Clusters is N, the number of ManagedClusters (default 1000).
	Clusters int
	// FleetVMs is M, the FleetVirtualMachines of the burst (default 1000).
	FleetVMs int
	// ClustersPerVM is how many clusters each FleetVM asks for (default 3).
	ClustersPerVM int
	// Concurrency is the number of client goroutines creating FleetVMs in
	// the burst and raw objects for the physical limit (default 16).
	Concurrency int

	// HubBinary is the fleetvm-hub executable (required).
	HubBinary string
	// HubQPS, HubBurst and HubWorkers are passed to fleetvm-hub as
	// --kube-api-qps, --kube-api-burst and --workers (default 200, 400, 8).
	HubQPS     float64
	HubBurst   int
	HubWorkers int
	// HubMemoryLimit is the container memory limit the hub runs under, in
	// bytes (0: none). The harness cannot put the process in a container;
	// it gives it the Go soft limit the hub would set itself there
	// (GOMEMLIMIT, memlimit.Share of it). make bench uses the chart's
	// 512 MiB.
	HubMemoryLimit int64

	// DisableWebhooks runs fleetvm-hub with --disable-webhooks, as the
	// rounds before the finalizer webhook did: the hub API server calls no
	// admission webhook, and the controller adds its finalizer to each new
	// FleetVM with a write. By default the hub serves its webhooks on a
	// local port, installed in the hub API server as the chart installs
	// them (certificates as the integration suites make them): the
	// burst's creates pass its validating webhook and get the finalizer
	// from its mutating one.
	DisableWebhooks bool

	// CacheConsistencyCheck keeps the hub API server's check of its watch
	// cache against etcd (Kubernetes 1.34's DetectCacheInconsistency,
	// beta and on by default). Every 5 minutes, at a random moment, it
	// lists each resource whole from etcd and decodes it: at 10,000
	// FleetVMs, 19.6 s of the API server's 58.8 s of CPU in the minute
	// after a restart, on 2 cores, where the hub's lists and the 2 cores
	// it shares wait on it. It is the API server's cost of holding the
	// objects, not work the hub makes it do, and it falls into some
	// windows and not others, so the harness turns it off unless asked.
	CacheConsistencyCheck bool

	// GracePeriod is fleetvm-hub's --removal-grace-period (default 30 s):
	// a relabelled cluster's VMs move after it.
	GracePeriod time.Duration

	// HubMetrics, when set, is where a scrape of the hub's /metrics, as
	// served, is written once the burst converged: the check of the
	// chart's rules and dashboards reads it (test/monitoringcheck).
	HubMetrics string

	// HubHeapProfile, when set, is where the hub's heap profile (Go pprof,
	// after a garbage collection) is written once the burst converged,
	// when the hub holds the most.
	HubHeapProfile string
	// CacheDump, when set, is the folder where the objects of the kinds
	// the hub holds per FleetVM or per cluster are written once the burst
	// converged, a JSON List per kind (hack/cachesize measures them).
	CacheDump string
	// BurstCPUProfile, when set, is the prefix of the CPU profiles of the
	// hub API server and of fleetvm-hub taken over the first
	// BurstCPUProfileWindow of the burst (<prefix>-apiserver-cpu.pprof,
	// <prefix>-hub-cpu.pprof).
	BurstCPUProfile       string
	BurstCPUProfileWindow time.Duration
	// RestartCPUProfile, likewise, is the prefix of the CPU profiles
	// taken over the first RestartCPUProfileWindow after the hub's
	// restart.
	RestartCPUProfile       string
	RestartCPUProfileWindow time.Duration
	// DeletionCPUProfile, likewise, is the prefix of the CPU profiles
	// taken over the first DeletionCPUProfileWindow of the mass deletion.
	DeletionCPUProfile       string
	DeletionCPUProfileWindow time.Duration
	// RestCPUProfile, likewise, is the prefix of the CPU profiles taken
	// over the whole at-rest scenario, when set.
	RestCPUProfile string

	// Rest is how long the at-rest scenario idles (default 5 minutes).
	Rest time.Duration
	// StatusK are the numbers of reports flipped at once (default 1, 10, 100).
	StatusK []int
	// StatusSamples is how many flips to time at least per K (default 20):
	// rounds of K flips and K flips back are repeated until there are.
	StatusSamples int
	// DecisionRounds is 1 (relabel the cluster with the fewest FleetVMs)
	// or 2 (then also the one with the most); default 1.
	DecisionRounds int
	// Quiet is how long the hub must not write before the writes of a
	// scenario are counted as done (default 10 s).
	Quiet time.Duration
	// ArgoRefresh is the period of the Argo CD stand-in's status refresh of
	// every Application (default 3 minutes; negative disables it).
	ArgoRefresh time.Duration
	// BurstOnly runs only the burst, the at-rest scenario and the restart
	// after it (a point of the scaling series), not the physical limit,
	// the status latency and the decision change.
	BurstOnly bool
	// SkipDeletion leaves out the mass deletion at the end, for runs that
	// measure the restart and need the fleet no further.
	SkipDeletion bool
	// Restarts is how many times the restart scenario runs, one after the
	// other on the same fleet (default 1): the second and later are
	// reported as "restart 2" and so on. The hub binary is started anew
	// each time, so a wrapper script can compare two builds on one fleet.
	Restarts int
	// Timeout bounds each wait for convergence (default 15 minutes).
	Timeout time.Duration

	// Log receives progress lines; HubLog the hub's output. Discarded when nil.
	Log    io.Writer
	HubLog io.Writer
}

func (c *Config) defaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Clusters, 1000)
	def(&c.FleetVMs, 1000)
	def(&c.ClustersPerVM, 3)
	def(&c.Concurrency, 16)
	def(&c.HubBurst, 400)
	def(&c.HubWorkers, 8)
	if c.HubQPS <= 0 {
		c.HubQPS = 200
	}
	if c.Rest <= 0 {
		c.Rest = 5 * time.Minute
	}
	if c.GracePeriod <= 0 {
		c.GracePeriod = 30 * time.Second
	}
	def(&c.StatusSamples, 20)
	def(&c.DecisionRounds, 1)
	if c.Quiet <= 0 {
		c.Quiet = 10 * time.Second
	}
	if len(c.StatusK) == 0 {
		c.StatusK = []int{1, 10, 100}
	}
	if c.ArgoRefresh == 0 {
		c.ArgoRefresh = 3 * time.Minute
	}
	if c.Timeout <= 0 {
		c.Timeout = 15 * time.Minute
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.HubLog == nil {
		c.HubLog = io.Discard
	}
}

// harness is one run.
type harness struct {
	cfg    Config
	fleet  *fleetenv.Fleet
	admin  client.Client // admin, uncached
	gen    client.Client // load generator: reads from the harness cache, writes unthrottled
	create client.Client // the burst's and the physical limit's creates
	kube   kubernetes.Interface
	cache  cache.Cache
	hub    *hubProcess
	// hubKubeconfig is the hub's own kubeconfig (user fleetvm-hub).
	hubKubeconfig string
	// webhook is where the hub API server calls fleetvm-hub's webhooks
	// (nil with DisableWebhooks).
	webhook *envtest.WebhookInstallOptions
	agents  *agents
	argo    *argoStandIn

	fvms      *waitSet[*fleetv1alpha1.FleetVirtualMachine]
	decisions *waitSet[*clusterv1beta1.PlacementDecision] // by name: OCM splits a decision into chunks of 100 clusters
	appSets   *waitSet[*argov1alpha1.ApplicationSet]      // by name
	stages    stageRecorder
	// placementOwners maps a Placement's name to its FleetVM's key.
	placementOwners sync.Map

	clusterNames []string
	// scoreEvents counts the capacity score updates the harness saw.
	scoreEvents atomic.Int64
	// rawRate is the physical limit, creates per second.
	rawRate float64
	report  *Report
	started time.Time
}

func (h *harness) logf(format string, args ...any) {
	_, _ = fmt.Fprintf(h.cfg.Log, "%s  %s\n", time.Since(h.started).Truncate(time.Second), fmt.Sprintf(format, args...))
}

// Run runs every scenario and returns the report. The report is returned
// with what was measured so far even when a scenario fails.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg.defaults()
	if cfg.HubBinary == "" {
		return nil, errors.New("fleet benchmark: no fleetvm-hub binary given")
	}
	h := &harness{
		cfg:       cfg,
		fvms:      newWaitSet[*fleetv1alpha1.FleetVirtualMachine](),
		decisions: newWaitSet[*clusterv1beta1.PlacementDecision](),
		appSets:   newWaitSet[*argov1alpha1.ApplicationSet](),
		started:   time.Now(),
	}
	h.fvms.onEvent = func(key string, fvm *fleetv1alpha1.FleetVirtualMachine, at time.Time) { h.stages.observe(key, fvm, at) }
	h.report = &Report{
		Started:          h.started.UTC(),
		CPUs:             runtime.NumCPU(),
		LoadAverageStart: loadAverage(),
		Settings: Settings{
			Clusters: cfg.Clusters, FleetVMs: cfg.FleetVMs, ClustersPerVM: cfg.ClustersPerVM,
			ClientConcurrency: cfg.Concurrency, RestSeconds: cfg.Rest.Seconds(), StatusK: cfg.StatusK,
			ArgoRefresh: cfg.ArgoRefresh.String(), HubBuild: hubBuild(cfg.HubBinary),
			HubMemoryLimitMiB: cfg.HubMemoryLimit >> 20, NodeFactor: nodeFactor(cfg), Webhooks: !cfg.DisableWebhooks,
			CacheConsistencyCheck: cfg.CacheConsistencyCheck,
		},
		Definitions: definitions,
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	err := h.run(ctx)
	if h.hub != nil {
		h.hub.stop()
	}
	cancel()
	if h.fleet != nil {
		if serr := h.fleet.Stop(); serr != nil {
			h.logf("stop the test environment: %v", serr)
		}
	}
	h.report.LoadAverageEnd = loadAverage()
	h.report.Duration = time.Since(h.started).Truncate(time.Second).String()
	h.report.Converged = err == nil
	return h.report, err
}

func (h *harness) run(ctx context.Context) error {
	type step struct {
		name string
		fn   func(context.Context) error
	}
	steps := []step{
		{"start the hub API server and the OCM scheduler", h.startFleet},
		{"register the managed clusters", h.registerClusters},
		{"start the load generator", h.startLoad},
		{"start fleetvm-hub", h.startHub},
		{"seed the VM shapes", h.seed},
		{"physical limit", h.physicalLimit},
		{"burst", h.burst},
		{"cache dump", h.cacheDump},
		{"at rest", h.atRest},
		{"restart", func(ctx context.Context) error { return h.restart(ctx, 1) }},
		{"status latency", h.statusLatency},
		{"decision change", h.decisionChange},
		{"mass deletion", h.massDeletion},
	}
	for i := h.cfg.Restarts; i > 1; i-- {
		at := slices.IndexFunc(steps, func(s step) bool { return s.name == "restart" }) + 1
		steps = slices.Insert(steps, at, step{fmt.Sprintf("restart %d", i), func(ctx context.Context) error { return h.restart(ctx, i) }})
	}
	for _, s := range steps {
		if h.cfg.BurstOnly && (s.name == "physical limit" || s.name == "status latency" || s.name == "decision change") {
			continue
		}
		if h.cfg.CacheDump == "" && s.name == "cache dump" {
			continue
		}
		if h.cfg.SkipDeletion && s.name == "mass deletion" {
			continue
		}
		h.logf("%s", s.name)
		if err := s.fn(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		if h.hub != nil {
			if err := h.hub.alive(); err != nil {
				return fmt.Errorf("after %s: %w", s.name, err)
			}
		}
	}
	return nil
}

func (h *harness) startFleet(ctx context.Context) error {
	var opts fleetenv.Options
	if !h.cfg.CacheConsistencyCheck {
		opts.HubAPIServerFlags = map[string]string{"feature-gates": "DetectCacheInconsistency=false"}
	}
	if !h.cfg.DisableWebhooks {
		// The webhook configurations from deploy/webhook, pointed at a
		// local port with a serving certificate envtest makes; the hub
		// process serves them there (startHub).
		w, err := fleetenv.WebhookOptions()
		if err != nil {
			return err
		}
		opts.HubWebhook = w
	}
	f, err := fleetenv.Start(ctx, opts)
	if err != nil {
		return err
	}
	h.fleet = f
	h.webhook = opts.HubWebhook
	h.admin = f.Hub.Client
	if h.kube, err = kubernetes.NewForConfig(f.Hub.Config); err != nil {
		return err
	}
	if err := f.Hub.EnsureNamespace(ctx, argoNS); err != nil {
		return err
	}
	// The FleetVMs' namespaces may use the default cluster set, as an
	// operator grants a team.
	for _, ns := range []string{burstNS, seedNS, chaosNS} {
		if err := f.Hub.Tenant(ctx, ns); err != nil {
			return err
		}
	}
	// The load generator and the creators are not throttled on the client
	// side: many agents and Argo CD each have their own client.
	unthrottled := func() *rest.Config {
		c := rest.CopyConfig(f.Hub.Config)
		c.QPS, c.Burst = -1, 0
		return c
	}
	if h.create, err = client.New(unthrottled(), client.Options{Scheme: f.Scheme}); err != nil {
		return err
	}

	// The hub's own user, its RBAC, and the API server's counters of it.
	hubCfg, err := f.Hub.AddUser(hubUser)
	if err != nil {
		return err
	}
	if err := grantHubRBAC(ctx, h.admin); err != nil {
		return err
	}
	hubClient, err := client.New(hubCfg, client.Options{Scheme: f.Scheme})
	if err != nil {
		return err
	}
	if err := installFlowSchemas(ctx, h.admin, h.kube, hubClient); err != nil {
		return err
	}
	kubeconfig := f.Dir() + "/fleetvm-hub.kubeconfig"
	if err := writeKubeconfig(kubeconfig, hubCfg); err != nil {
		return err
	}
	h.hubKubeconfig = kubeconfig

	h.cache, err = cache.New(unthrottled(), cache.Options{
		Scheme:           f.Scheme,
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject:         cacheScope(),
	})
	if err != nil {
		return err
	}
	h.gen, err = client.New(unthrottled(), client.Options{Scheme: f.Scheme, Cache: &client.CacheOptions{Reader: h.cache}})
	return err
}

// hubBuild says how the fleetvm-hub binary was built: its Go version and
// whether cgo was on. The image builds it with CGO_ENABLED=0. A cgo build
// of the same code maps about 30 MiB more of its binary into memory (its
// dependencies link Go's plugin package, which with cgo exports every
// symbol), so the memory figures of the two differ.
func hubBuild(path string) string {
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return "unknown: " + err.Error()
	}
	cgo := "unset"
	for _, s := range info.Settings {
		if s.Key == "CGO_ENABLED" {
			cgo = s.Value
		}
	}
	return info.GoVersion + ", CGO_ENABLED=" + cgo
}
