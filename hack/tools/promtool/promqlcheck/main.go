// Command promqlcheck reads PromQL expressions (the chart's alerting and
// recording rules, its dashboards' queries) with Prometheus's own parser
// and fails on any metric or label that a scrape of fleetvm-hub does not
// serve: a rule that names a series the hub never exposes never fires,
// and a dashboard panel that does stays empty, with nothing to say so.
//
//	promqlcheck --metrics scrape.txt [--external prefix,...] [--target-labels job,instance] exprs.json
//
// scrape.txt is a scrape in Prometheus's text format. exprs.json is a JSON
// list of {"source": "...", "expr": "...", "record": "..."}: source names
// where the expression comes from, for the report; record, for a
// recording rule, the series it makes, which later expressions may read
// with the labels its expression leaves (by, without, on, group_left and
// label_replace worked out as Prometheus does). An expression is PromQL or one of
// Grafana's label_values(metric, label) and query_result(expr); Grafana's
// variables ($namespace, ${cluster}, $__rate_interval) are read as a
// label value or a 5m range.
//
// Checked, for each expression:
//   - every metric it selects is in the scrape, or starts with one of the
//     external prefixes (series of other components: Prometheus's up,
//     kube-apiserver's, KubeVirt's on the managed clusters), whose labels
//     are not checked;
//   - every label a selector matches on is one of that metric's labels or
//     a target label (job, instance: Prometheus adds them when it
//     scrapes);
//   - every label an aggregation groups by, or a binary operation matches
//     on or copies (on, ignoring, group_left, group_right), is a label of
//     some metric the expression selects, a target label, or one that
//     label_replace or label_join makes in it.
//
// A histogram's _bucket (with le), _sum and _count, and a summary's
// quantile, are served as Prometheus scrapes them.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
)

type expression struct {
	Source string `json:"source"`
	Expr   string `json:"expr"`
	Record string `json:"record,omitempty"`
}

func main() {
	metricsFile := flag.String("metrics", "", "a scrape of fleetvm-hub, in Prometheus's text format")
	external := flag.String("external", "", "comma-separated prefixes of metrics served by other components (not checked)")
	targetLabels := flag.String("target-labels", "job,instance", "comma-separated labels Prometheus adds to every scraped series")
	flag.Parse()
	if *metricsFile == "" || flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: promqlcheck --metrics scrape.txt [--external p1,p2] [--target-labels job,instance] exprs.json")
		os.Exit(2)
	}
	served, err := readScrape(*metricsFile)
	if err != nil {
		fatal(err)
	}
	raw, err := os.ReadFile(flag.Arg(0))
	if err != nil {
		fatal(err)
	}
	var exprs []expression
	if err := json.Unmarshal(raw, &exprs); err != nil {
		fatal(fmt.Errorf("%s: %w", flag.Arg(0), err))
	}
	c := checker{served: served, open: map[string]bool{}, external: split(*external), target: split(*targetLabels)}
	problems := 0
	// Recording rules first, in their order: what they record is read as
	// served, with the labels their expression leaves.
	slices.SortStableFunc(exprs, func(a, b expression) int {
		switch {
		case a.Record != "" && b.Record == "":
			return -1
		case a.Record == "" && b.Record != "":
			return 1
		}
		return 0
	})
	for _, e := range exprs {
		for _, p := range c.check(e.Expr) {
			problems++
			fmt.Printf("%s: %s\n    in: %s\n", e.Source, p, e.Expr)
		}
		if e.Record != "" {
			c.record(e.Record, e.Expr)
		}
	}
	fmt.Printf("%d expressions checked against %d metrics served; %d problems\n", len(exprs), len(served), problems)
	if problems > 0 {
		os.Exit(1)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "promqlcheck:", err)
	os.Exit(2)
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// readScrape returns each metric name served with its label names, a
// histogram's and a summary's series as Prometheus stores them.
func readScrape(path string) (map[string]map[string]bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	families, err := parseText(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	served := map[string]map[string]bool{}
	add := func(name string, labels map[string]bool, extra ...string) {
		set := map[string]bool{}
		for l := range labels {
			set[l] = true
		}
		for _, l := range extra {
			set[l] = true
		}
		if served[name] == nil {
			served[name] = set
			return
		}
		for l := range set {
			served[name][l] = true
		}
	}
	for name, mf := range families {
		labels := map[string]bool{}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = true
			}
		}
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM:
			add(name+"_bucket", labels, "le")
			add(name+"_sum", labels)
			add(name+"_count", labels)
		case dto.MetricType_SUMMARY:
			add(name, labels, "quantile")
			add(name+"_sum", labels)
			add(name+"_count", labels)
		default:
			add(name, labels)
		}
	}
	return served, nil
}

func parseText(r io.Reader) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(r)
}

type checker struct {
	served map[string]map[string]bool
	// open are recorded series whose labels could not be worked out.
	open     map[string]bool
	external []string
	target   []string
}

// record adds the series a recording rule makes, with the labels its
// expression leaves.
func (c checker) record(name, expr string) {
	node, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		c.open[name] = true
		return
	}
	labels, open := c.outLabels(node)
	c.served[name] = labels
	if open {
		c.open[name] = true
	}
}

// outLabels are the labels of the series an expression returns, as
// Prometheus computes them; open when they cannot be known here (an
// external metric, absent()).
func (c checker) outLabels(n parser.Node) (map[string]bool, bool) {
	switch e := n.(type) {
	case *parser.VectorSelector:
		name := selectorName(e)
		if c.isExternal(name) || c.open[name] {
			return map[string]bool{}, true
		}
		return clone(c.served[name]), false
	case *parser.MatrixSelector:
		return c.outLabels(e.VectorSelector)
	case *parser.SubqueryExpr:
		return c.outLabels(e.Expr)
	case *parser.ParenExpr:
		return c.outLabels(e.Expr)
	case *parser.UnaryExpr:
		return c.outLabels(e.Expr)
	case *parser.StepInvariantExpr:
		return c.outLabels(e.Expr)
	case *parser.NumberLiteral, *parser.StringLiteral:
		return map[string]bool{}, false
	case *parser.AggregateExpr:
		in, open := c.outLabels(e.Expr)
		switch {
		case e.Op == parser.TOPK || e.Op == parser.BOTTOMK || e.Op == parser.LIMITK || e.Op == parser.LIMIT_RATIO:
			return in, open
		case e.Without:
			for _, l := range e.Grouping {
				delete(in, l)
			}
		default:
			in, open = set(e.Grouping), false
		}
		if e.Op == parser.COUNT_VALUES {
			if s, ok := e.Param.(*parser.StringLiteral); ok {
				in[s.Val] = true
			}
		}
		return in, open
	case *parser.Call:
		switch e.Func.Name {
		case "absent", "absent_over_time":
			return map[string]bool{}, true
		case "time", "vector", "scalar", "pi":
			return map[string]bool{}, false
		case "label_replace", "label_join":
			in, open := c.outLabels(e.Args[0])
			if s, ok := e.Args[1].(*parser.StringLiteral); ok {
				in[s.Val] = true
			}
			return in, open
		case "histogram_quantile":
			in, open := c.outLabels(e.Args[1])
			delete(in, "le")
			return in, open
		}
		for _, a := range e.Args {
			if t := a.Type(); t == parser.ValueTypeVector || t == parser.ValueTypeMatrix {
				return c.outLabels(a)
			}
		}
		return map[string]bool{}, false
	case *parser.BinaryExpr:
		left, lopen := c.outLabels(e.LHS)
		right, ropen := c.outLabels(e.RHS)
		lt, rt := e.LHS.Type(), e.RHS.Type()
		switch {
		case lt == parser.ValueTypeScalar:
			return right, ropen
		case rt == parser.ValueTypeScalar:
			return left, lopen
		}
		m := e.VectorMatching
		if m == nil {
			return left, lopen
		}
		switch {
		case e.Op == parser.LOR:
			for l := range right {
				left[l] = true
			}
			return left, lopen || ropen
		case e.Op.IsSetOperator():
			return left, lopen
		case m.Card == parser.CardOneToOne && m.On:
			return set(m.MatchingLabels), false
		case m.Card == parser.CardOneToOne:
			for _, l := range m.MatchingLabels {
				delete(left, l)
			}
			return left, lopen
		case m.Card == parser.CardManyToOne:
			for _, l := range m.Include {
				left[l] = true
			}
			return left, lopen
		case m.Card == parser.CardOneToMany:
			for _, l := range m.Include {
				right[l] = true
			}
			return right, ropen
		}
		return left, lopen
	}
	return map[string]bool{}, true
}

func clone(m map[string]bool) map[string]bool {
	out := make(map[string]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func set(names []string) map[string]bool {
	out := make(map[string]bool, len(names))
	for _, n := range names {
		out[n] = true
	}
	return out
}

var (
	labelValuesRe = regexp.MustCompile(`^\s*label_values\(\s*(.*?)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)\s*$`)
	queryResultRe = regexp.MustCompile(`^\s*query_result\(\s*(.*)\s*\)\s*$`)
	rangeVarRe    = regexp.MustCompile(`\$__(rate_interval|interval|range)\b|\$\{__(rate_interval|interval|range)\}`)
	varRe         = regexp.MustCompile(`\$\{([a-zA-Z_][a-zA-Z0-9_]*)(:[a-z]+)?\}|\$([a-zA-Z_][a-zA-Z0-9_]*)`)
)

// grafana turns a Grafana query into PromQL and, for label_values, the
// label it must find.
func grafana(expr string) (promql, label string) {
	if m := labelValuesRe.FindStringSubmatch(expr); m != nil {
		expr, label = m[1], m[2]
	} else if m := queryResultRe.FindStringSubmatch(expr); m != nil {
		expr = m[1]
	}
	expr = rangeVarRe.ReplaceAllString(expr, "5m")
	expr = varRe.ReplaceAllString(expr, "grafana_variable")
	return expr, label
}

func (c checker) isExternal(name string) bool {
	return slices.ContainsFunc(c.external, func(p string) bool { return strings.HasPrefix(name, p) })
}

func (c checker) check(raw string) []string {
	expr, wantLabel := grafana(raw)
	node, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return []string{fmt.Sprintf("does not parse: %v", err)}
	}
	var problems []string
	report := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	// Every selector: its metric served, its matchers on served labels.
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := selectorName(vs)
		switch {
		case name == "":
			report("a selector without a metric name: %s", vs)
		case c.isExternal(name) || c.open[name]:
		case c.served[name] == nil:
			report("metric %s is not served by fleetvm-hub", name)
		default:
			for _, m := range vs.LabelMatchers {
				if m.Name != model.MetricNameLabel && !c.served[name][m.Name] && !slices.Contains(c.target, m.Name) {
					report("metric %s has no label %q", name, m.Name)
				}
			}
		}
		return nil
	})

	// Every label a grouping or a vector matching names.
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		var names []string
		var what string
		switch e := n.(type) {
		case *parser.AggregateExpr:
			names, what = e.Grouping, "grouped by"
			if e.Without {
				what = "aggregated without"
			}
		case *parser.BinaryExpr:
			if e.VectorMatching != nil {
				names = append(slices.Clone(e.VectorMatching.MatchingLabels), e.VectorMatching.Include...)
				what = "matched on"
			}
		}
		if len(names) == 0 {
			return nil
		}
		known, open := c.labelsIn(n)
		if open {
			return nil
		}
		for _, l := range names {
			if !known[l] && !slices.Contains(c.target, l) {
				report("label %q is %s, but no metric of the expression has it", l, what)
			}
		}
		return nil
	})

	if wantLabel != "" {
		known, open := c.labelsIn(node)
		if !open && !known[wantLabel] && !slices.Contains(c.target, wantLabel) {
			report("label_values asks for label %q, which the metric does not have", wantLabel)
		}
	}
	sort.Strings(problems)
	return slices.Compact(problems)
}

// labelsIn is every label the metrics selected under n carry, with those
// label_replace and label_join make; open when one of them is external
// (its labels are not known here).
func (c checker) labelsIn(n parser.Node) (map[string]bool, bool) {
	known := map[string]bool{}
	open := false
	parser.Inspect(n, func(n parser.Node, _ []parser.Node) error {
		switch e := n.(type) {
		case *parser.VectorSelector:
			name := selectorName(e)
			if c.isExternal(name) || c.open[name] {
				open = true
			}
			for l := range c.served[name] {
				known[l] = true
			}
		case *parser.Call:
			if (e.Func.Name == "label_replace" || e.Func.Name == "label_join") && len(e.Args) > 1 {
				if s, ok := e.Args[1].(*parser.StringLiteral); ok {
					known[s.Val] = true
				}
			}
		}
		return nil
	})
	return known, open
}

func selectorName(vs *parser.VectorSelector) string {
	if vs.Name != "" {
		return vs.Name
	}
	for _, m := range vs.LabelMatchers {
		if m.Name == model.MetricNameLabel && m.Type.String() == "=" {
			return m.Value
		}
	}
	return ""
}
