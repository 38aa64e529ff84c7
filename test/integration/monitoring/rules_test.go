// Package monitoring tests the alerting and recording rules of the
// fleetvm-hub chart with Prometheus's own code: the chart is rendered with
// Helm's engine and monitoring.prometheusRule.enabled, its PrometheusRule's
// groups are written to a rules file, and promtool (built into bin/ by
// `make test-integration`, version in hack/tools/promtool/go.mod) checks
// them and runs the unit tests in testdata/, which write series for each
// alert and say when it fires, with which labels and annotations, and when
// it clears. Every alert must have a test that fires it and one that
// clears it (or shows it does not fire), every recording rule a test of
// its values, and every alert a runbook in docs/operator-guide/runbooks.
package monitoring

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"sigs.k8s.io/yaml"

	"github.com/fleetvm/fleetvm/test/fleetenv"
)

// The release the unit tests are written for: its metrics Service, and so
// the job of the hub's series, is fleetvm-hub-metrics.
const (
	releaseName      = "fleetvm-hub"
	releaseNamespace = "fleetvm-system"
	releaseValues    = `monitoring: {prometheusRule: {enabled: true}}`
	// rulesFile is the name every unit test file gives in rule_files.
	rulesFile = "rules.yaml"
)

// ruleGroups is a PrometheusRule's spec: what Prometheus reads from a
// rules file.
type ruleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert,omitempty"`
			Record      string            `json:"record,omitempty"`
			Annotations map[string]string `json:"annotations,omitempty"`
		} `json:"rules"`
	} `json:"groups"`
}

func (g ruleGroups) alerts() map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, group := range g.Groups {
		for _, r := range group.Rules {
			if r.Alert != "" {
				out[r.Alert] = r.Annotations
			}
		}
	}
	return out
}

func (g ruleGroups) records() []string {
	var out []string
	for _, group := range g.Groups {
		for _, r := range group.Rules {
			if r.Record != "" {
				out = append(out, r.Record)
			}
		}
	}
	return out
}

// unitTests is what this package reads of a promtool unit test file.
type unitTests struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		Name          string `json:"name"`
		AlertRuleTest []struct {
			EvalTime  string `json:"eval_time"`
			Alertname string `json:"alertname"`
			ExpAlerts []struct {
				ExpLabels      map[string]string `json:"exp_labels"`
				ExpAnnotations map[string]string `json:"exp_annotations"`
			} `json:"exp_alerts"`
		} `json:"alert_rule_test"`
		PromqlExprTest []struct {
			Expr string `json:"expr"`
		} `json:"promql_expr_test"`
	} `json:"tests"`
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := fleetenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// promtool returns bin/promtool, which `make test-integration` builds.
func promtool(t *testing.T) string {
	t.Helper()
	path := filepath.Join(repoRoot(t), "bin", "promtool")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is missing: run 'make test-integration' (or 'make test') first, which builds it", path)
	}
	return path
}

// renderRules renders the chart with values, as Helm installs it, and
// returns its PrometheusRule's spec: as YAML for a rules file, and read.
func renderRules(t *testing.T, values string) ([]byte, ruleGroups) {
	t.Helper()
	chrt, err := loader.Load(filepath.Join(repoRoot(t), "deploy", "charts", "fleetvm-hub"))
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	overrides, err := chartutil.ReadValues([]byte(values))
	if err != nil {
		t.Fatalf("values: %v", err)
	}
	vals, err := chartutil.ToRenderValues(chrt, overrides, chartutil.ReleaseOptions{
		Name: releaseName, Namespace: releaseNamespace, Revision: 1, IsInstall: true,
	}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatalf("render values: %v", err)
	}
	files, err := engine.Engine{Strict: true}.Render(chrt, vals)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	var specs [][]byte
	for name, content := range files {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		for _, doc := range releaseutil.SplitManifests(content) {
			var obj map[string]any
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if obj["kind"] != "PrometheusRule" {
				continue
			}
			spec, err := yaml.Marshal(obj["spec"])
			if err != nil {
				t.Fatal(err)
			}
			specs = append(specs, spec)
		}
	}
	if len(specs) != 1 {
		t.Fatalf("the chart renders %d PrometheusRules with %s, want 1", len(specs), values)
	}
	var groups ruleGroups
	if err := yaml.Unmarshal(specs[0], &groups); err != nil {
		t.Fatal(err)
	}
	return specs[0], groups
}

// readUnitTests reads the promtool unit test files in testdata/.
func readUnitTests(t *testing.T) map[string]unitTests {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no unit test files in testdata/ (%v)", err)
	}
	out := map[string]unitTests{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		// Only part of each file is read here; promtool reads it all, and
		// refuses unknown keys (a misspelt exp_alerts).
		var u unitTests
		if err := yaml.Unmarshal(b, &u); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out[filepath.Base(p)] = u
	}
	return out
}

// runPromtool runs promtool in dir and returns its output and whether it
// succeeded.
func runPromtool(t *testing.T, dir string, args ...string) (string, bool) {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if _, exited := err.(*exec.ExitError); err != nil && !exited {
		t.Fatalf("promtool %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), err == nil
}

// coverage says what the unit tests leave untested: an alert no case
// fires or none clears (a case that expects no alert at its time), a
// case for an alert the rules do not have, a recording rule no
// expression test reads, a file whose rules are not the chart's.
func coverage(alerts, records []string, files map[string]unitTests) []string {
	fires, clears := map[string]bool{}, map[string]bool{}
	read := map[string]bool{}
	var problems []string
	for _, name := range slices.Sorted(maps.Keys(files)) {
		f := files[name]
		if !slices.Equal(f.RuleFiles, []string{rulesFile}) {
			problems = append(problems, fmt.Sprintf("%s: rule_files %v, want [%s] (the chart's rules)", name, f.RuleFiles, rulesFile))
		}
		for _, tc := range f.Tests {
			for _, a := range tc.AlertRuleTest {
				if !slices.Contains(alerts, a.Alertname) {
					problems = append(problems, fmt.Sprintf("%s: test %q: no alert %s in the chart's rules", name, tc.Name, a.Alertname))
				}
				if len(a.ExpAlerts) == 0 {
					clears[a.Alertname] = true
					continue
				}
				fires[a.Alertname] = true
				for _, e := range a.ExpAlerts {
					if e.ExpAnnotations["runbook_url"] == "" || e.ExpLabels["severity"] == "" {
						problems = append(problems, fmt.Sprintf("%s: test %q: %s at %s: expected alert without its severity label or runbook_url annotation", name, tc.Name, a.Alertname, a.EvalTime))
					}
				}
			}
			for _, e := range tc.PromqlExprTest {
				sel, _, _ := strings.Cut(e.Expr, "{")
				read[strings.TrimSpace(sel)] = true
			}
		}
	}
	for _, a := range alerts {
		if !fires[a] {
			problems = append(problems, fmt.Sprintf("alert %s: no test fires it", a))
		}
		if !clears[a] {
			problems = append(problems, fmt.Sprintf("alert %s: no test clears it or shows it not firing", a))
		}
	}
	for _, r := range records {
		if !read[r] {
			problems = append(problems, fmt.Sprintf("recording rule %s: no promql_expr_test reads it", r))
		}
	}
	return problems
}

// TestRules checks the rules with promtool, runs the unit tests on them,
// and fails when an alert or recording rule is left untested.
func TestRules(t *testing.T) {
	raw, groups := renderRules(t, releaseValues)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, rulesFile), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, ok := runPromtool(t, dir, "check", "rules", "--lint=all", "--lint-fatal", rulesFile); !ok {
		t.Fatalf("promtool check rules failed:\n%s\nrules:\n%s", out, raw)
	}

	files := readUnitTests(t)
	var names []string
	for name := range files {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	slices.Sort(names)
	if out, ok := runPromtool(t, dir, append([]string{"test", "rules"}, names...)...); !ok {
		t.Errorf("promtool test rules failed:\n%s", out)
	}

	alerts := slices.Sorted(maps.Keys(groups.alerts()))
	if len(alerts) == 0 {
		t.Fatal("the PrometheusRule holds no alert")
	}
	for _, p := range coverage(alerts, groups.records(), files) {
		t.Error(p)
	}
}

// TestRunbooks: every alert links its runbook, which is in the repository
// (docs/operator-guide/runbooks/<alert>.md) and in the alerts page, and
// every runbook there is an alert's.
func TestRunbooks(t *testing.T) {
	_, groups := renderRules(t, releaseValues)
	root := repoRoot(t)
	const base = "https://github.com/fleetvm/fleetvm/blob/main/docs/operator-guide/runbooks/"
	page, err := os.ReadFile(filepath.Join(root, "docs", "operator-guide", "alerts.md"))
	if err != nil {
		t.Fatal(err)
	}
	alerts := groups.alerts()
	for alert, annotations := range alerts {
		if got, want := annotations["runbook_url"], base+alert+".md"; got != want {
			t.Errorf("%s: runbook_url %q, want %q", alert, got, want)
		}
		if _, err := os.Stat(filepath.Join(root, "docs", "operator-guide", "runbooks", alert+".md")); err != nil {
			t.Errorf("%s: no runbook: %v", alert, err)
		}
		if !bytes.Contains(page, []byte("(runbooks/"+alert+".md)")) {
			t.Errorf("%s: docs/operator-guide/alerts.md does not link its runbook", alert)
		}
	}
	runbooks, err := filepath.Glob(filepath.Join(root, "docs", "operator-guide", "runbooks", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, rb := range runbooks {
		if alert := strings.TrimSuffix(filepath.Base(rb), ".md"); alerts[alert] == nil {
			t.Errorf("runbook %s: the chart has no alert %s", filepath.Base(rb), alert)
		}
	}
}

// TestHarnessFails shows that the checks above can fail: coverage finds
// what is left untested, and a unit test promtool fails is reported as
// failed.
func TestHarnessFails(t *testing.T) {
	var files map[string]unitTests
	if err := yaml.Unmarshal([]byte(`
a.yaml:
  rule_files: [rules.yaml]
  tests:
  - name: t
    alert_rule_test:
    - {eval_time: 5m, alertname: Fires, exp_alerts: [{exp_labels: {severity: warning}, exp_annotations: {runbook_url: x}}]}
    - {eval_time: 5m, alertname: Clears, exp_alerts: []}
    - {eval_time: 5m, alertname: Missing, exp_alerts: []}
    - {eval_time: 5m, alertname: Both, exp_alerts: [{exp_labels: {severity: info}}]}
    - {eval_time: 9m, alertname: Both, exp_alerts: []}
    promql_expr_test:
    - expr: ns:read:sum{namespace="a"}
b.yaml:
  rule_files: [other.yaml]
`), &files); err != nil {
		t.Fatal(err)
	}
	got := coverage([]string{"Both", "Clears", "Fires"}, []string{"ns:read:sum", "ns:unread:sum"}, files)
	want := []string{
		`a.yaml: test "t": no alert Missing in the chart's rules`,
		`a.yaml: test "t": Both at 5m: expected alert without its severity label or runbook_url annotation`,
		"b.yaml: rule_files [other.yaml], want [rules.yaml] (the chart's rules)",
		"alert Clears: no test fires it",
		"alert Fires: no test clears it or shows it not firing",
		"recording rule ns:unread:sum: no promql_expr_test reads it",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("coverage problems (-want,+got):\n%s", diff)
	}

	// FleetVMHubDown waits 10 minutes: a test that wants it at once fails.
	raw, _ := renderRules(t, releaseValues)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, rulesFile), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	wrong := `rule_files: [rules.yaml]
tests:
- interval: 1m
  input_series: []
  alert_rule_test:
  - eval_time: 1m
    alertname: FleetVMHubDown
    exp_alerts: [{exp_labels: {severity: critical}}]
`
	if err := os.WriteFile(filepath.Join(dir, "wrong.yaml"), []byte(wrong), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, ok := runPromtool(t, dir, "test", "rules", "wrong.yaml"); ok {
		t.Errorf("promtool test rules passed a test that expects FleetVMHubDown at 1m:\n%s", out)
	}
}
