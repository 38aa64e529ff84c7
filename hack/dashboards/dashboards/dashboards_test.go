package dashboards

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

func mustAll(t *testing.T) []Dashboard {
	t.Helper()
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// TestDashboards checks what Grafana and the chart rely on: fixed, unique
// uids and names; panel ids unique; every panel with a query and inside
// the 24-column grid, no two overlapping.
func TestDashboards(t *testing.T) {
	all := mustAll(t)
	var uids, names []string
	for _, d := range all {
		uids = append(uids, d.UID)
		names = append(names, d.Name)
	}
	wantUIDs := []string{"fleetvm-overview", "fleetvm-moves-drains", "fleetvm-disk-images", "fleetvm-hub-health"}
	if diff := cmp.Diff(wantUIDs, uids); diff != "" {
		t.Errorf("uids (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"overview", "moves-drains", "disk-images", "hub-health"}, names); diff != "" {
		t.Errorf("names (-want,+got):\n%s", diff)
	}
	for _, d := range all {
		t.Run(d.Name, func(t *testing.T) {
			ids := map[uint32]bool{}
			var placed []panelInfo
			for _, p := range d.panels() {
				if ids[p.id] {
					t.Errorf("%q: id %d taken twice", p.title, p.id)
				}
				ids[p.id] = true
				if p.x+p.w > 24 || p.w == 0 || p.h == 0 {
					t.Errorf("%q at x %d, %d wide, %d high: outside the 24-column grid or empty", p.title, p.x, p.w, p.h)
				}
				for _, o := range placed {
					if p.x < o.x+o.w && o.x < p.x+p.w && p.y < o.y+o.h && o.y < p.y+p.h {
						t.Errorf("%q overlaps %q", p.title, o.title)
					}
				}
				placed = append(placed, p)
				if p.row {
					continue
				}
				if p.title == "" || p.description == "" {
					t.Errorf("panel %d: title %q, description %q; want both", p.id, p.title, p.description)
				}
				if len(p.targets) == 0 {
					t.Errorf("%q has no query", p.title)
				}
				for _, tg := range p.targets {
					if strings.TrimSpace(tg.expr) == "" {
						t.Errorf("%q query %s is empty", p.title, tg.refID)
					}
				}
			}
		})
	}
}

// The metrics the dashboards may read: fleetvm-hub's (its own and
// controller-runtime's, docs/operator-guide/metrics.md), and, from
// elsewhere, Prometheus's up, kube-apiserver's webhook metrics and
// KubeVirt's on the managed clusters.
var (
	hubMetrics = []string{
		"fleetvm_fleetvirtualmachines", "fleetvm_fleetvirtualmachine_clusters",
		"fleetvm_fleetvirtualmachine_clusters_desired", "fleetvm_fleetvirtualmachine_clusters_ready",
		"fleetvm_diskimage_references", "fleetvm_diskimage_clusters", "fleetvm_metrics_list_errors_total",
		"fleetvm_cluster_copies", "fleetvm_placement_exclusions", "fleetvm_move_phase",
		"fleetvm_move_deadline_timestamp_seconds", "fleetvm_drain_copies", "fleetvm_drain_last_progress_timestamp_seconds",
		"fleetvm_agent_inventory_timestamp_seconds", "fleetvm_diskimage_unused_since_timestamp_seconds",
		"fleetvm_diskimage_retention_seconds",
		"controller_runtime_reconcile_total", "controller_runtime_reconcile_errors_total",
		"controller_runtime_reconcile_time_seconds_bucket", "controller_runtime_active_workers",
		"workqueue_depth", "workqueue_adds_total", "workqueue_queue_duration_seconds_bucket", "workqueue_retries_total",
		"controller_runtime_webhook_requests_total", "controller_runtime_webhook_latency_seconds_bucket",
		"rest_client_requests_total", "process_resident_memory_bytes", "process_cpu_seconds_total",
		"go_memstats_heap_inuse_bytes", "go_goroutines",
	}
	externalMetrics  = []string{"up", "kubevirt_vm_labels", "apiserver_admission_webhook_rejection_count", "apiserver_admission_webhook_request_total"}
	externalPrefixes = []string{"kubevirt_vmi_"}
)

var (
	quoted    = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	braces    = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	grouping  = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	labelVals = regexp.MustCompile(`^label_values\((.*),\s*[a-zA-Z_]\w*\)$`)
	ident     = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	keywords  = []string{"and", "or", "unless", "bool", "offset", "group_left", "group_right", "on", "ignoring", "by", "without"}
)

// metricsOf returns the metric names a PromQL expression (or a
// label_values) selects: every name outside strings, braces, ranges and
// groupings that is not a function, an aggregation or a keyword.
func metricsOf(expr string) []string {
	if m := labelVals.FindStringSubmatch(expr); m != nil {
		expr = m[1]
	}
	expr = quoted.ReplaceAllString(expr, `""`)
	expr = braces.ReplaceAllString(expr, "")
	expr = grouping.ReplaceAllString(expr, "")
	var out []string
	for _, m := range ident.FindAllStringSubmatch(expr, -1) {
		if m[1] != "" || slices.Contains(keywords, m[0]) {
			continue
		}
		out = append(out, m[0])
	}
	return out
}

func TestMetricsOf(t *testing.T) {
	got := metricsOf(`sum by (a, b) (rate(x_total{c=~"d|e"}[5m])) * on (a) group_left (f) max by (a) (y{g="h"}) > bool 0 and z`)
	if diff := cmp.Diff([]string{"x_total", "y", "z"}, got); diff != "" {
		t.Errorf("metrics (-want,+got):\n%s", diff)
	}
}

// TestQueriesUseKnownMetrics: a dashboard reads only the metrics above. A
// name fleetvm-hub does not serve leaves a panel empty, with nothing to
// say why.
func TestQueriesUseKnownMetrics(t *testing.T) {
	qs, err := Queries()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, q := range qs {
		names := metricsOf(q.Expr)
		if len(names) == 0 {
			t.Errorf("%s: no metric in %q", q.Source, q.Expr)
		}
		for _, n := range names {
			seen[n] = true
			known := slices.Contains(hubMetrics, n) || slices.Contains(externalMetrics, n) ||
				slices.ContainsFunc(externalPrefixes, func(p string) bool { return strings.HasPrefix(n, p) })
			if !known {
				t.Errorf("%s: reads %s, which is neither fleetvm-hub's nor an allowed external metric", q.Source, n)
			}
		}
	}
	// Every FleetVM gauge is on some dashboard.
	for n := range ownLabels {
		if !seen[n] {
			t.Errorf("%s is on no dashboard", n)
		}
	}
}

var variableRef = regexp.MustCompile(`\$\{?([a-zA-Z_][a-zA-Z0-9_]*)`)

// TestVariablesDefined: every $variable a query names is one of its
// dashboard's, and a variable's query names only those before it (Grafana
// resolves them in order). An undefined one is read literally and matches
// nothing.
func TestVariablesDefined(t *testing.T) {
	for _, d := range mustAll(t) {
		var defined []string
		for _, v := range d.model.Templating.List {
			if v.Type == dashboard.VariableTypeQuery {
				for _, ref := range refs(deref(v.Query.String)) {
					if !slices.Contains(defined, ref) {
						t.Errorf("%s: variable %s uses $%s, not defined before it", d.Name, v.Name, ref)
					}
				}
			}
			defined = append(defined, v.Name)
		}
		for _, p := range d.panels() {
			if p.row {
				continue
			}
			for _, tg := range p.targets {
				for _, ref := range refs(tg.expr) {
					if !slices.Contains(defined, ref) {
						t.Errorf("%s: %q (%s) uses $%s, which is not a variable of the dashboard (%v)", d.Name, p.title, tg.refID, ref, defined)
					}
				}
			}
		}
	}
}

// refs are the variables an expression names, Grafana's own ($__...) left
// out.
func refs(expr string) []string {
	var out []string
	for _, m := range variableRef.FindAllStringSubmatch(expr, -1) {
		if !strings.HasPrefix(m[1], "__") {
			out = append(out, m[1])
		}
	}
	return out
}

// TestJSON: the same dashboard gives the same bytes, JSON that reads back
// to the uid and panels it was built with, PromQL's comparisons unescaped.
func TestJSON(t *testing.T) {
	for _, d := range mustAll(t) {
		a, err := d.JSON()
		if err != nil {
			t.Fatal(err)
		}
		again := mustAll(t)
		b, err := again[slices.IndexFunc(again, func(o Dashboard) bool { return o.Name == d.Name })].JSON()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s: two builds give different JSON", d.Name)
		}
		var back struct {
			UID    string `json:"uid"`
			Panels []struct {
				ID      uint32 `json:"id"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(a, &back); err != nil {
			t.Fatalf("%s: %v", d.Name, err)
		}
		if back.UID != d.UID || len(back.Panels) != len(d.panels()) {
			t.Errorf("%s: reads back uid %q with %d panels, want %q with %d", d.Name, back.UID, len(back.Panels), d.UID, len(d.panels()))
		}
		if bytes.Contains(a, []byte(`\u003e`)) || bytes.Contains(a, []byte(`\u003c`)) {
			t.Errorf("%s: < or > escaped in the JSON", d.Name)
		}
	}
}

// TestGeneratedFilesCurrent: the committed JSON files and the docs'
// generated section are what the definitions give (make manifests
// rewrites them; make verify diffs them).
func TestGeneratedFilesCurrent(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	all := mustAll(t)
	var want []string
	for _, d := range all {
		want = append(want, d.Name+".json")
		data, err := d.JSON()
		if err != nil {
			t.Fatal(err)
		}
		onDisk, err := os.ReadFile(filepath.Join(root, d.File()))
		if err != nil {
			t.Fatalf("%v; run make manifests", err)
		}
		if !bytes.Equal(data, onDisk) {
			t.Errorf("%s is stale; run make manifests", d.File())
		}
	}
	files, err := filepath.Glob(filepath.Join(root, Dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, filepath.Base(f))
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("files in %s (-want,+got):\n%s", Dir, diff)
	}
	doc, err := os.ReadFile(filepath.Join(root, Doc))
	if err != nil {
		t.Fatal(err)
	}
	updated, err := UpdateDoc(doc, all)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(doc, updated) {
		t.Errorf("%s is stale; run make manifests", Doc)
	}
}

func TestUpdateDocNeedsMarkers(t *testing.T) {
	if _, err := UpdateDoc([]byte("# Dashboards\n"), nil); err == nil {
		t.Error("updated a page without the generated markers; want an error")
	}
	out, err := UpdateDoc([]byte("before\n"+beginMarker+"\nold\n"+endMarker+"\nafter\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "before\n" + beginMarker + "\n" + endMarker + "\nafter\n"; string(out) != want {
		t.Errorf("got %q, want %q", out, want)
	}
}

func TestPicture(t *testing.T) {
	ps := []panelInfo{
		{row: true, title: "R", x: 0, y: 0, w: 24, h: 1},
		{id: 1, title: "Wide", kind: "stat", x: 0, y: 1, w: 16, h: 4},
		{id: 2, title: "Narrow panel", kind: "table", x: 16, y: 1, w: 8, h: 4},
		{id: 3, title: "Full", kind: "timeseries", x: 0, y: 5, w: 24, h: 8},
	}
	want := `== R ====================================================================
+-----------------------------------------------+-----------------------+
| 1 Wide                                        | 2 Narrow panel        |
| stat                                          | table                 |
+-----------------------------------------------+-----------------------+
| 3 Full                                                                |
| timeseries                                                            |
+-----------------------------------------------------------------------+
`
	if diff := cmp.Diff(want, picture(ps)); diff != "" {
		t.Errorf("picture (-want,+got):\n%s", diff)
	}
}
