package fleet_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/fleetvm/fleetvm/test/benchmark/fleet"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/monitoringcheck"
)

// TestSmoke runs the whole benchmark on a small fleet (50 clusters, 50
// FleetVMs) with the real fleetvm-hub binary and asserts that every
// scenario converges. It never asserts a time: the figures are make bench's.
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server, the OCM scheduler and fleetvm-hub")
	}
	ctrllog.SetLogger(logr.Discard())
	bin := buildHub(t)
	hubLog := &lockedBuffer{}
	log := &testLog{t: t}
	defer log.close()
	hubMetrics := filepath.Join(t.TempDir(), "hub-metrics.txt")
	report, err := fleet.Run(t.Context(), fleet.Config{
		HubMetrics:     hubMetrics,
		Clusters:       50,
		FleetVMs:       50,
		HubBinary:      bin,
		Rest:           5 * time.Second,
		GracePeriod:    5 * time.Second,
		StatusK:        []int{1, 10},
		StatusSamples:  1,
		DecisionRounds: 1,
		Quiet:          2 * time.Second,
		ArgoRefresh:    5 * time.Second,
		Timeout:        3 * time.Minute,
		Log:            log,
		HubLog:         hubLog,
	})
	if report != nil {
		var table strings.Builder
		_ = report.WriteTable(&table)
		t.Logf("results:\n%s", table.String())
	}
	if err != nil {
		t.Fatalf("benchmark did not converge: %v\nfleetvm-hub output (last 4 KiB):\n%s", err, hubLog.tail(4096))
	}
	if !report.Converged {
		t.Fatal("report not marked converged")
	}
	if got, _ := report.Value("burst: FleetVMs converged"); got != 50 {
		t.Errorf("burst: %v FleetVMs converged, want 50", got)
	}
	// The API server's counters saw the hub create what it must, and
	// FleetVMs of one shape share the candidate Placement written when
	// the shapes were seeded: the burst writes fewer Placements than
	// FleetVMs.
	if got, _ := report.Value("creation: hub writes per FleetVM: placements"); got >= 1 {
		t.Errorf("the API server counted %v Placement writes per FleetVM by the hub, want fewer than one", got)
	}
	if got, _ := report.Value("creation: hub writes per FleetVM: applicationsets"); got < 1 {
		t.Errorf("the API server counted %v ApplicationSet writes per FleetVM by the hub, want at least 1", got)
	}
	// The hub served its webhooks: each FleetVM came with its finalizer
	// from admission, and the hub wrote none (one per FleetVM without
	// them).
	if got, ok := report.Value("creation: hub writes per FleetVM: fleetvirtualmachines"); !ok || got != 0 {
		t.Errorf("the API server counted %v writes per FleetVM of the object by the hub (reported: %v), want 0: the finalizer comes with the create", got, ok)
	}
	// The restarted hub reconciled every FleetVM (the scenario waits for
	// that, bounded, and fails otherwise).
	if got, _ := report.Value("restart: FleetVM reconciles until quiet"); got < 50 {
		t.Errorf("the restarted hub reconciled %v FleetVMs, want all 50 and more", got)
	}
	// Deleted at once, every FleetVM was taken apart: each of its copies
	// deleted from its cluster (policy Delete), then its finalizer off.
	if got, _ := report.Value("mass deletion: FleetVMs gone"); got != 50 {
		t.Errorf("mass deletion: %v FleetVMs gone, want 50", got)
	}
	if got, _ := report.Value("mass deletion: VMs deleted from the clusters"); got < 150 {
		t.Errorf("mass deletion: %v VMs deleted from the clusters, want all 150 copies", got)
	}
	checkMonitoring(t, hubMetrics)
}

// checkMonitoring reads every PromQL expression of the chart's rules and
// dashboards with Prometheus's parser and fails on a metric or label that
// fleetvm-hub, the binary, did not serve once the burst had converged:
// its reconcilers, webhooks, work queues, API client and fleet collector
// (a fleet metric only some state makes, a move's deadline or a drain's
// progress, is read from the collector's declared series).
func checkMonitoring(t *testing.T, hubMetrics string) {
	t.Helper()
	root, err := fleetenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	scrape, err := os.ReadFile(hubMetrics)
	if err != nil {
		t.Fatal(err)
	}
	// What the smoke's fleet makes the hub serve: the check below is
	// against a hub that did the work.
	for _, served := range []string{"fleetvm_fleetvirtualmachine_clusters_ready{", "controller_runtime_reconcile_total{",
		"controller_runtime_webhook_requests_total{", "workqueue_depth{", "rest_client_requests_total{", "fleetvm_cluster_copies{"} {
		if !bytes.Contains(scrape, []byte("\n"+served)) {
			t.Fatalf("the hub's /metrics has no %s}", served)
		}
	}
	scrape, err = monitoringcheck.WithDeclared(scrape)
	if err != nil {
		t.Fatal(err)
	}
	exprs, err := monitoringcheck.Expressions(root)
	if err != nil {
		t.Fatal(err)
	}
	out, err := monitoringcheck.Check(root, t.TempDir(), scrape, exprs)
	t.Logf("promqlcheck:\n%s", out)
	if err != nil {
		t.Fatalf("the chart's rules or dashboards read what fleetvm-hub does not serve: %v", err)
	}
	// The check can fail: a metric and a label the hub does not serve.
	out, err = monitoringcheck.Check(root, t.TempDir(), scrape, []monitoringcheck.Expr{
		{Source: "bad metric", Expr: `fleetvm_fleetvirtualmachine_copies_ready > 0`},
		{Source: "bad label", Expr: `sum by (cluster) (fleetvm_fleetvirtualmachine_clusters_ready)`},
	})
	if err == nil || !strings.Contains(out, "fleetvm_fleetvirtualmachine_copies_ready is not served") ||
		!strings.Contains(out, `label "cluster" is grouped by`) {
		t.Errorf("promqlcheck passed expressions it must refuse (%v):\n%s", err, out)
	}
}

// TestChaosHubKilled kills fleetvm-hub (its own process) with SIGKILL five
// times at random points while 100 FleetVirtualMachines converge on 50
// clusters, whose capacity their own VMs use up. All converge, each has
// exactly one Placement and one ApplicationSet, and in twice the grace
// period after: no Application deleted, no VM deleted on a cluster, no
// copy started elsewhere.
func TestChaosHubKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server, the OCM scheduler and fleetvm-hub")
	}
	ctrllog.SetLogger(logr.Discard())
	bin := buildHub(t)
	hubLog := &lockedBuffer{}
	log := &testLog{t: t}
	defer log.close()
	seed := uint64(time.Now().UnixNano())
	t.Logf("kill points seed %d", seed)
	report, err := fleet.Chaos(t.Context(), fleet.ChaosConfig{
		Config: fleet.Config{
			Clusters:    50,
			FleetVMs:    100,
			HubBinary:   bin,
			GracePeriod: 15 * time.Second,
			ArgoRefresh: -1,
			Timeout:     5 * time.Minute,
			Log:         log,
			HubLog:      hubLog,
		},
		Kills: 5,
		Seed:  seed,
	})
	if report != nil {
		t.Logf("chaos: %+v", *report)
	}
	if err != nil {
		t.Fatalf("chaos run: %v\nfleetvm-hub output (last 4 KiB):\n%s", err, hubLog.tail(4096))
	}
	if report.Kills != 5 || report.Converged != 100 {
		t.Errorf("%d kills, %d of 100 converged; want 5 and 100", report.Kills, report.Converged)
	}
	if report.ApplicationsDeleted != 0 || report.VMsDeleted != 0 || report.Moved != 0 {
		t.Errorf("the kills cost %d Applications deleted, %d VMs deleted on the clusters, %d FleetVMs with a copy started elsewhere; want 0, 0, 0",
			report.ApplicationsDeleted, report.VMsDeleted, report.Moved)
	}
	if len(report.Duplicates) > 0 {
		t.Errorf("FleetVMs without exactly one Placement and one ApplicationSet: %v", report.Duplicates)
	}
	if len(report.Copies) > 0 {
		t.Errorf("FleetVMs whose VM the clusters held other than once per cluster asked for: %v", report.Copies)
	}
}

// buildHub builds fleetvm-hub into a temporary folder.
func buildHub(t *testing.T) string {
	t.Helper()
	root, err := fleetenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "fleetvm-hub")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./cmd/fleetvm-hub")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build fleetvm-hub: %v\n%s", err, out)
	}
	return bin
}

// testLog passes progress lines to t.Log until closed (background
// goroutines of the harness may still log while it stops).
type testLog struct {
	mu     sync.Mutex
	t      *testing.T
	closed bool
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (l *testLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) tail(n int) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.b.String()
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}
