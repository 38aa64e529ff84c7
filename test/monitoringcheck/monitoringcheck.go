// Package monitoringcheck reads every PromQL expression FleetVM ships, the
// chart's alerting and recording rules and its dashboards' queries, and
// checks them with Prometheus's own parser (bin/promqlcheck, built from
// hack/tools/promtool) against a scrape of fleetvm-hub: a rule naming a
// series the hub does not serve never fires, a panel reading one stays
// empty, and nothing else would say so.
package monitoringcheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"sigs.k8s.io/yaml"

	fleetmetrics "github.com/fleetvm/fleetvm/pkg/metrics"
)

// External are the metrics the rules and dashboards read from other
// components, whose labels a scrape of fleetvm-hub cannot show:
// Prometheus's own up, kube-apiserver's admission webhook series, and
// KubeVirt's on the managed clusters.
const External = "up,apiserver_admission_webhook_,kubevirt_"

// TargetLabels are those Prometheus (and the Prometheus Operator's
// ServiceMonitor) adds to every series it scrapes from fleetvm-hub.
const TargetLabels = "job,instance,namespace,pod,service,container,endpoint"

// Expr is one expression and where it comes from.
type Expr struct {
	Source string `json:"source"`
	Expr   string `json:"expr"`
	// Record is the series a recording rule makes: later expressions
	// read it with the labels its expression leaves.
	Record string `json:"record,omitempty"`
}

// Expressions are every expression of the chart's rules, rendered with
// monitoring.prometheusRule.enabled, and of its dashboards. It fails when
// either has none: an empty check passes nothing.
func Expressions(root string) ([]Expr, error) {
	rules, alerts, err := ruleExpressions(root)
	if err != nil {
		return nil, err
	}
	if alerts == 0 {
		return nil, fmt.Errorf("the chart rendered no alert with monitoring.prometheusRule.enabled")
	}
	dashboards, err := dashboardExpressions(root)
	if err != nil {
		return nil, err
	}
	return append(rules, dashboards...), nil
}

// Check runs bin/promqlcheck on exprs against scrape, in dir. It returns
// promqlcheck's report, and an error when it found a problem.
func Check(root, dir string, scrape []byte, exprs []Expr) (string, error) {
	bin := filepath.Join(root, "bin", "promqlcheck")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("%w: build it with make test-binaries", err)
	}
	raw, err := json.MarshalIndent(exprs, "", "  ")
	if err != nil {
		return "", err
	}
	exprsFile, scrapeFile := filepath.Join(dir, "exprs.json"), filepath.Join(dir, "scrape.txt")
	if err := os.WriteFile(exprsFile, raw, 0o600); err != nil {
		return "", err
	}
	if err := os.WriteFile(scrapeFile, scrape, 0o600); err != nil {
		return "", err
	}
	out, err := exec.Command(bin, "--metrics", scrapeFile, "--external", External, "--target-labels", TargetLabels, exprsFile).CombinedOutput()
	return string(out), err
}

// WithDeclared is scrape with every fleet metric the collector declares
// that scrape lacks, with its labels: a series only some state of the
// fleet makes (a move's deadline, a drain, an image left unused) is part
// of what the hub serves whether that state is there or not.
func WithDeclared(scrape []byte) ([]byte, error) {
	var extra bytes.Buffer
	ch := make(chan *prometheus.Desc, 64)
	go func() {
		fleetmetrics.NewCollector(nil, logr.Discard()).Describe(ch)
		close(ch)
	}()
	descRe := regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)
	var bad []string
	for d := range ch {
		m := descRe.FindStringSubmatch(d.String())
		if m == nil {
			bad = append(bad, d.String())
			continue
		}
		if bytes.Contains(scrape, []byte("\n# TYPE "+m[1]+" ")) {
			continue
		}
		var pairs []string
		for _, l := range strings.Split(m[2], ",") {
			if l = strings.TrimSpace(l); l != "" {
				pairs = append(pairs, fmt.Sprintf("%s=%q", l, "x"))
			}
		}
		fmt.Fprintf(&extra, "# TYPE %s gauge\n%s{%s} 0\n", m[1], m[1], strings.Join(pairs, ","))
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("cannot read the descriptors %v", bad)
	}
	return append(slices.Clone(scrape), extra.Bytes()...), nil
}

// ruleExpressions are the expressions of the PrometheusRule the chart
// renders with its rules turned on, and how many alerts it has.
func ruleExpressions(root string) ([]Expr, int, error) {
	chrt, err := loader.Load(filepath.Join(root, "deploy", "charts", "fleetvm-hub"))
	if err != nil {
		return nil, 0, err
	}
	overrides, err := chartutil.ReadValues([]byte("monitoring: {prometheusRule: {enabled: true}}"))
	if err != nil {
		return nil, 0, err
	}
	vals, err := chartutil.ToRenderValues(chrt, overrides, chartutil.ReleaseOptions{
		Name: "fleetvm-hub", Namespace: "fleetvm-system", Revision: 1, IsInstall: true,
	}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, 0, err
	}
	files, err := engine.Engine{Strict: true}.Render(chrt, vals)
	if err != nil {
		return nil, 0, err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		if strings.HasSuffix(name, ".yaml") {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var out []Expr
	alerts := 0
	for _, name := range names {
		for _, doc := range releaseutil.SplitManifests(files[name]) {
			var rule struct {
				Kind string `json:"kind"`
				Spec struct {
					Groups []struct {
						Name  string `json:"name"`
						Rules []struct {
							Alert  string `json:"alert"`
							Record string `json:"record"`
							Expr   string `json:"expr"`
						} `json:"rules"`
					} `json:"groups"`
				} `json:"spec"`
			}
			if err := yaml.Unmarshal([]byte(doc), &rule); err != nil {
				return nil, 0, fmt.Errorf("%s: %w", name, err)
			}
			if rule.Kind != "PrometheusRule" {
				continue
			}
			for _, g := range rule.Spec.Groups {
				for _, r := range g.Rules {
					if r.Alert != "" {
						alerts++
					}
					out = append(out, Expr{Source: fmt.Sprintf("rule %s/%s%s", g.Name, r.Alert, r.Record), Expr: r.Expr, Record: r.Record})
				}
			}
		}
	}
	return out, alerts, nil
}

// dashboardExpressions are every query of the chart's dashboards as they
// ship: their panels' targets and their variables.
func dashboardExpressions(root string) ([]Expr, error) {
	paths, err := filepath.Glob(filepath.Join(root, "deploy", "charts", "fleetvm-hub", "files", "dashboards", "*.json"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no dashboards in the chart")
	}
	var out []Expr
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var doc any
		if err := json.Unmarshal(raw, &doc); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		n := len(out)
		walkQueries(doc, filepath.Base(p), &out)
		if len(out) == n {
			return nil, fmt.Errorf("%s: no query found", p)
		}
	}
	return out, nil
}

// walkQueries collects each "expr" (a target) and each query variable's
// "query" (a string, or an object with one).
func walkQueries(v any, where string, out *[]Expr) {
	switch x := v.(type) {
	case map[string]any:
		if e, ok := x["expr"].(string); ok && e != "" {
			*out = append(*out, Expr{Source: where + ": " + title(x), Expr: e})
		}
		if x["type"] == "query" {
			switch q := x["query"].(type) {
			case string:
				*out = append(*out, Expr{Source: where + ": variable " + title(x), Expr: q})
			case map[string]any:
				if s, ok := q["query"].(string); ok && s != "" {
					*out = append(*out, Expr{Source: where + ": variable " + title(x), Expr: s})
				}
			}
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			walkQueries(x[k], where, out)
		}
	case []any:
		for _, e := range x {
			walkQueries(e, where, out)
		}
	}
}

func title(m map[string]any) string {
	for _, k := range []string{"title", "name", "refId", "legendFormat"} {
		if s, ok := m[k].(string); ok && s != "" {
			return s
		}
	}
	return "?"
}
