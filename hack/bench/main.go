// Command fleetvm-bench runs FleetVM's fleet benchmark (test/benchmark/fleet):
// a hub API server with N managed clusters, the real OCM placement
// scheduler, the fleetvm-hub binary as its own process and a load generator
// standing in for the agents and Argo CD. It prints a table (scenario,
// value, unit) and saves the report as JSON.
//
//	make bench                      # N = M = 1000
//	BENCH_SCALE=0.1 make bench      # N = M = 100
//	make bench BENCH_FLAGS='--rest 1m'
//	BENCH_SERIES=1 make bench       # the scaling series (burst and rest only)
//
// `make bench-bundle` packs it with everything the fleet reads into an
// archive that runs on a Linux machine without Go: see
// docs/developer-guide/benchmarks.md.
//
// `--drain N` runs the drain scenario instead (test/benchmark/drain): a
// cluster holding N copies drained on real spokes.
//
// The series runs the burst and a shorter rest at 100, 300 and 1,000
// clusters with 300 FleetVMs, then 1,000, 3,000 and 5,000 FleetVMs at
// 1,000 clusters (each × BENCH_SCALE), one fresh fleet per point, and
// prints one line per point so the growth shape is visible. 300 is the
// most FleetVMs of 3 copies that 100 clusters hold with room to spare:
// their 80 prod clusters hold about 30 of the bench's VMs each.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetvm/fleetvm/test/benchmark/drain"
	"github.com/fleetvm/fleetvm/test/benchmark/fleet"
	"github.com/fleetvm/fleetvm/test/fleetenv"
)

func main() {
	os.Exit(run())
}

func run() int {
	scale := 1.0
	if s := os.Getenv("BENCH_SCALE"); s != "" {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v <= 0 {
			fmt.Fprintf(os.Stderr, "BENCH_SCALE=%q: want a positive number such as 0.1\n", s)
			return 2
		}
		scale = v
	}
	scaled := func(n int) int { return max(10, int(math.Round(float64(n)*scale))) }

	var (
		cfg     fleet.Config
		statusK string
		out     string
	)
	flag.IntVar(&cfg.Clusters, "clusters", scaled(1000), "N: managed clusters (default 1000 × BENCH_SCALE).")
	flag.IntVar(&cfg.FleetVMs, "fleetvms", scaled(1000), "M: FleetVirtualMachines in the burst (default 1000 × BENCH_SCALE).")
	flag.IntVar(&cfg.ClustersPerVM, "clusters-per-vm", 3, "Clusters each FleetVirtualMachine asks for.")
	flag.IntVar(&cfg.Concurrency, "concurrency", 16, "Client goroutines creating FleetVMs in the burst and objects for the physical limit.")
	flag.StringVar(&cfg.HubBinary, "hub", "", "The fleetvm-hub binary (default bin/fleetvm-hub of the repository, or of the bundle this program came in).")
	flag.Float64Var(&cfg.HubQPS, "hub-qps", 200, "fleetvm-hub --kube-api-qps.")
	flag.IntVar(&cfg.HubBurst, "hub-burst", 400, "fleetvm-hub --kube-api-burst.")
	flag.IntVar(&cfg.HubWorkers, "hub-workers", 8, "fleetvm-hub --workers.")
	hubMemory := flag.String("hub-memory-limit", "512Mi", "Container memory limit the hub runs as if under (the chart's): it gets the Go soft limit it would set itself there. 0: none.")
	flag.BoolVar(&cfg.CacheConsistencyCheck, "apiserver-consistency-check", false, "Keep the hub API server's periodic check of its watch cache against etcd (DetectCacheInconsistency, on by default in Kubernetes 1.34): every 5 minutes it lists each resource whole, at moments the runs do not choose.")
	flag.BoolVar(&cfg.DisableWebhooks, "disable-webhooks", false, "Run fleetvm-hub with --disable-webhooks, as rounds before the finalizer webhook did: no admission, and the controller writes each FleetVM's finalizer.")
	flag.DurationVar(&cfg.GracePeriod, "grace-period", 30*time.Second, "fleetvm-hub --removal-grace-period: the decision change's VMs move after it.")
	flag.DurationVar(&cfg.Rest, "rest", 5*time.Minute, "How long the at-rest scenario idles.")
	flag.StringVar(&statusK, "status-k", "1,10,100", "Numbers of VM reports flipped at once in the status latency scenario.")
	flag.IntVar(&cfg.StatusSamples, "status-samples", 20, "Flips timed at least per K.")
	flag.IntVar(&cfg.DecisionRounds, "decision-rounds", 1, "Decision change: 1 (cluster with the fewest FleetVMs) or 2 (also the one with the most).")
	flag.DurationVar(&cfg.ArgoRefresh, "argo-refresh", 3*time.Minute, "Period of the Argo CD stand-in's Application refresh (negative: none).")
	flag.DurationVar(&cfg.Timeout, "timeout", 15*time.Minute, "Bound of each wait for convergence (the series: 1 hour unless set).")
	flag.StringVar(&out, "out", "_output/bench", "Folder for the JSON report and the hub's log.")
	series := flag.Bool("series", os.Getenv("BENCH_SERIES") == "1", "Run the scaling series instead (BENCH_SERIES=1).")
	seriesRest := flag.Duration("series-rest", time.Minute, "How long each point of the series idles after its burst.")
	flag.IntVar(&cfg.Restarts, "restarts", 1, "How many times the restart scenario runs, one after the other on the same fleet (the hub binary is started anew each time).")
	flag.BoolVar(&cfg.BurstOnly, "burst-only", false, "Run only the burst, the at-rest scenario and the restart after it.")
	flag.BoolVar(&cfg.SkipDeletion, "skip-deletion", false, "Leave out the mass deletion at the end (the fleet is torn down without it).")
	flag.DurationVar(&cfg.BurstCPUProfileWindow, "burst-cpuprofile", 0, "Take CPU profiles of the hub API server and of fleetvm-hub over this much of the burst, saved beside the report (0: none).")
	flag.DurationVar(&cfg.RestartCPUProfileWindow, "restart-cpuprofile", 0, "Likewise over this much of the time after the hub's restart (0: none).")
	flag.DurationVar(&cfg.DeletionCPUProfileWindow, "deletion-cpuprofile", 0, "Likewise over this much of the mass deletion (0: none).")
	restProfile := flag.Bool("rest-cpuprofile", false, "Likewise over the whole at-rest scenario.")
	flag.StringVar(&cfg.CacheDump, "cache-dump", "", "Write the objects the hub holds per FleetVM and per cluster, once the burst converged, into this folder (a JSON List per kind) for hack/cachesize.")
	drainCopies := flag.Int("drain", 0, "Run the drain scenario instead: drain a cluster holding this many FleetVM copies, on real spokes (test/benchmark/drain).")
	cpuProfile := flag.String("cpuprofile", "", "Write a CPU profile of the harness (it runs the OCM placement scheduler in-process) to this file.")
	flag.Parse()
	memLimit, err := resource.ParseQuantity(*hubMemory)
	if err != nil || memLimit.Sign() < 0 {
		fmt.Fprintf(os.Stderr, "--hub-memory-limit %q: want a quantity such as 512Mi, or 0\n", *hubMemory)
		return 2
	}
	cfg.HubMemoryLimit = memLimit.Value()
	for _, f := range strings.Split(statusK, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k < 1 {
			fmt.Fprintf(os.Stderr, "--status-k: %q is not a positive number\n", f)
			return 2
		}
		cfg.StatusK = append(cfg.StatusK, k)
	}
	if cfg.HubBinary == "" {
		// Found from the root, not the working folder, so that a bundle's
		// fleetvm-bench runs from anywhere.
		root, err := fleetenv.RepoRoot()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		cfg.HubBinary = filepath.Join(root, "bin", "fleetvm-hub")
	}
	if abs, err := filepath.Abs(cfg.HubBinary); err == nil {
		cfg.HubBinary = abs
	}
	if _, err := os.Stat(cfg.HubBinary); err != nil {
		fmt.Fprintf(os.Stderr, "fleetvm-hub binary: %v (make bench builds it; a bundle ships it)\n", err)
		return 2
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stamp := time.Now().UTC().Format("20060102-150405")
	hubLog, err := os.Create(filepath.Join(out, stamp+"-hub.log"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = hubLog.Close() }()
	cfg.HubLog = hubLog
	cfg.HubHeapProfile = filepath.Join(out, stamp+"-hub-heap.pprof")
	if cfg.BurstCPUProfileWindow > 0 {
		cfg.BurstCPUProfile = filepath.Join(out, stamp+"-burst")
	}
	if cfg.RestartCPUProfileWindow > 0 {
		cfg.RestartCPUProfile = filepath.Join(out, stamp+"-restart")
	}
	if cfg.DeletionCPUProfileWindow > 0 {
		cfg.DeletionCPUProfile = filepath.Join(out, stamp+"-deletion")
	}
	if *restProfile {
		cfg.RestCPUProfile = filepath.Join(out, stamp+"-rest")
	}
	cfg.Log = os.Stderr
	// The harness's own controller-runtime clients log nothing.
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "--cpuprofile:", err)
			return 1
		}
		defer func() { pprof.StopCPUProfile(); _ = f.Close() }()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *drainCopies > 0 {
		return runDrain(ctx, *drainCopies, cfg.Timeout, cfg.GracePeriod, filepath.Join(out, stamp+"-drain.json"))
	}
	if *series {
		cfg.BurstOnly, cfg.Rest = true, *seriesRest
		timeoutSet := false
		flag.Visit(func(f *flag.Flag) { timeoutSet = timeoutSet || f.Name == "timeout" })
		if !timeoutSet {
			// 5,000 FleetVMs take longer than the default bound.
			cfg.Timeout = time.Hour
		}
		return runSeries(ctx, cfg, seriesPoints(scaled), filepath.Join(out, stamp+"-series.json"))
	}
	fmt.Fprintf(os.Stderr, "fleet benchmark: %d clusters, %d FleetVMs × %d clusters, load average %s\n",
		cfg.Clusters, cfg.FleetVMs, cfg.ClustersPerVM, loadAverage())
	report, runErr := fleet.Run(ctx, cfg)
	if report == nil {
		fmt.Fprintln(os.Stderr, runErr)
		return 1
	}

	path := filepath.Join(out, stamp+".json")
	b, err := json.MarshalIndent(report, "", "  ")
	if err == nil {
		err = os.WriteFile(path, append(b, '\n'), 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "write the report:", err)
	}
	fmt.Printf("\nFleetVM fleet benchmark, %s: %d clusters, %d FleetVMs × %d clusters, %d CPUs, load average %s at start, %s at end, took %s\n",
		report.Started.Format(time.RFC3339), report.Settings.Clusters, report.Settings.FleetVMs, report.Settings.ClustersPerVM,
		report.CPUs, report.LoadAverageStart, report.LoadAverageEnd, report.Duration)
	fmt.Printf("fleetvm-hub %s\n\n", strings.Join(report.Settings.HubArgs, " "))
	_ = report.WriteTable(os.Stdout)
	fmt.Println()
	for _, d := range report.Definitions {
		fmt.Println("- " + d)
	}
	fmt.Printf("\nreport: %s\nhub log: %s\nhub heap profile after the burst: %s\n", path, hubLog.Name(), cfg.HubHeapProfile)
	if runErr != nil {
		fmt.Fprintln(os.Stderr, "\nbenchmark did not complete:", runErr)
		return 1
	}
	return 0
}

// runDrain runs the drain scenario, prints its rows and saves its result.
func runDrain(ctx context.Context, copies int, timeout, grace time.Duration, path string) int {
	started := time.Now()
	fmt.Fprintf(os.Stderr, "drain benchmark: %d copies on one cluster, load average %s\n", copies, loadAverage())
	res, err := drain.Run(ctx, drain.Config{Copies: copies, Timeout: timeout, GracePeriod: grace, Logf: func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s  %s\n", time.Since(started).Truncate(time.Second), fmt.Sprintf(format, args...))
	}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "\ndrain benchmark did not complete:", err)
		return 1
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err == nil {
		err = os.WriteFile(path, append(b, '\n'), 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "write the report:", err)
	}
	fmt.Printf("\nFleetVM drain benchmark, %s: %d copies, %d CPUs, load average %s at end, took %s\n\n",
		started.UTC().Format(time.RFC3339), copies, runtime.NumCPU(), loadAverage(), time.Since(started).Truncate(time.Second))
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	for _, r := range res.Rows() {
		fmt.Fprintf(w, "%s\t%s\t%s\n", r[0], r[1], r[2])
	}
	_ = w.Flush()
	fmt.Printf("\nreport: %s\n", path)
	if err := res.Check(); err != nil {
		fmt.Fprintln(os.Stderr, "\nthe drain was not safe or not complete:", err)
		return 1
	}
	return 0
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// point is one configuration of the scaling series.
type point struct{ clusters, fleetVMs int }

// seriesPoints: clusters grow at a fixed number of FleetVMs, then
// FleetVMs grow at 1,000 clusters.
func seriesPoints(scaled func(int) int) []point {
	return []point{
		{scaled(100), scaled(300)}, {scaled(300), scaled(300)}, {scaled(1000), scaled(300)},
		{scaled(1000), scaled(1000)}, {scaled(1000), scaled(3000)}, {scaled(1000), scaled(5000)},
	}
}

// seriesColumns are the figures the series prints, by row name.
var seriesColumns = []struct{ head, row string }{
	{"converged s", "burst: all converged (Placed+Delivered+status aggregated)"},
	{"p99 s", "burst: per FleetVM p99"},
	{"sched runs/FVM", "burst: OCM scheduler runs per FleetVM"},
	{"sched ms/run", "burst: OCM scheduler time per run"},
	{"runs/FVM to idle", "creation: OCM scheduler runs per FleetVM, until it idles"},
	{"writes/FVM", "creation: hub writes per FleetVM (API server count, without events)"},
	{"events/FVM", "creation: hub writes per FleetVM: events"},
	{"409/FVM", "creation: hub status writes refused 409 Conflict per FleetVM (stale cache)"},
	{"rest runs/Placement", "OCM scheduler runs per FleetVM Placement"},
	{"rest busy %", "OCM scheduler busy share"},
	{"rest reconciles", "hub FleetVM reconciles"},
	{"peak RSS MiB", "memory after at rest: hub peak RSS (VmHWM)"},
	{"restart steady s", "restart: steady (every FleetVM reconciled, queue empty)"},
	{"restart writes", "restart: hub writes until quiet"},
	{"live heap MiB", "memory after burst: hub live heap after a GC"},
}

// runSeries runs every point on a fresh fleet, prints the series table
// and saves every point's report in one JSON file.
func runSeries(ctx context.Context, cfg fleet.Config, points []point, path string) int {
	var reports []*fleet.Report
	failed := false
	for _, p := range points {
		c := cfg
		c.Clusters, c.FleetVMs = p.clusters, p.fleetVMs
		if cfg.HubHeapProfile != "" {
			c.HubHeapProfile = strings.TrimSuffix(cfg.HubHeapProfile, ".pprof") + fmt.Sprintf("-%dx%d.pprof", p.clusters, p.fleetVMs)
		}
		if cfg.CacheDump != "" {
			c.CacheDump = filepath.Join(cfg.CacheDump, fmt.Sprintf("%dx%d", p.clusters, p.fleetVMs))
		}
		fmt.Fprintf(os.Stderr, "\n== series: %d clusters, %d FleetVMs (load average %s)\n", p.clusters, p.fleetVMs, loadAverage())
		report, err := fleet.Run(ctx, c)
		if report != nil {
			reports = append(reports, report)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "point %d×%d did not complete: %v\n", p.clusters, p.fleetVMs, err)
			failed = true
			if ctx.Err() != nil {
				break
			}
		}
	}
	b, err := json.MarshalIndent(reports, "", "  ")
	if err == nil {
		err = os.WriteFile(path, append(b, '\n'), 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "write the series:", err)
	}
	fmt.Printf("\nFleetVM scaling series, %d CPUs (burst, then %s at rest, per point)\n\n", runtime.NumCPU(), cfg.Rest)
	fmt.Printf("%-8s  %-8s", "clusters", "FleetVMs")
	for _, col := range seriesColumns {
		fmt.Printf("  %*s", len(col.head), col.head)
	}
	fmt.Println()
	for _, r := range reports {
		fmt.Printf("%-8d  %-8d", r.Settings.Clusters, r.Settings.FleetVMs)
		for _, col := range seriesColumns {
			v, ok := seriesValue(r, col.row)
			cell := "-"
			if ok {
				cell = strconv.FormatFloat(v, 'f', -1, 64)
			}
			fmt.Printf("  %*s", len(col.head), cell)
		}
		fmt.Println()
	}
	fmt.Printf("\nseries: %s\n", path)
	if failed {
		return 1
	}
	return 0
}

// seriesValue finds a row by its full name, or the at-rest row ending
// with it (its name carries the rest duration).
func seriesValue(r *fleet.Report, row string) (float64, bool) {
	if v, ok := r.Value(row); ok {
		return v, true
	}
	for _, res := range r.Results {
		if strings.HasPrefix(res.Scenario, "at rest") && strings.HasSuffix(res.Scenario, ": "+row) {
			return res.Value, true
		}
	}
	return 0, false
}
