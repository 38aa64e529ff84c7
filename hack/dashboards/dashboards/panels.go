package dashboards

import (
	"fmt"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/bargauge"
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// datasource is the Prometheus every panel and variable queries: the
// dashboard's datasource variable.
var datasource = common.DataSourceRef{Type: ptr("prometheus"), Uid: ptr("${datasource}")}

func ptr[T any](v T) *T { return &v }

// query is one PromQL expression of a panel and the legend of its series.
type query struct{ expr, legend string }

func q(expr, legend string) query { return query{expr: expr, legend: legend} }

// look is what every panel sets: its title, what it shows (the panel's
// description, shown on hover), its unit and its size on the 24-column
// grid. The dashboard builder places panels left to right, a new line
// when 24 columns are full.
type look struct {
	title, description, unit string
	w, h                     uint32
}

// targets builds a panel's queries, lettered A, B, ... in order. Instant
// queries (stat, bar gauge, table) read the last value only.
func targets(instant, asTable bool, qs []query) []cog.Builder[variants.Dataquery] {
	out := make([]cog.Builder[variants.Dataquery], 0, len(qs))
	for i, qu := range qs {
		b := prometheus.NewDataqueryBuilder().
			Expr(strings.TrimSpace(qu.expr)).
			RefId(string(rune('A' + i))).
			Datasource(datasource)
		if qu.legend != "" {
			b.LegendFormat(qu.legend)
		}
		if instant {
			b.Instant()
		} else {
			b.Range()
		}
		if asTable {
			b.Format(prometheus.PromQueryFormatTable)
		}
		out = append(out, b)
	}
	return out
}

// timeSeries is a graph over the dashboard's time range.
func timeSeries(l look, qs ...query) *timeseries.PanelBuilder {
	b := timeseries.NewPanelBuilder().
		Title(l.title).Description(l.description).
		Span(l.w).Height(l.h).
		Datasource(datasource).
		Targets(targets(false, false, qs)).
		Min(0).
		FillOpacity(10).
		ShowPoints(common.VisibilityModeNever).
		Legend(common.NewVizLegendOptionsBuilder().
			ShowLegend(true).
			DisplayMode(common.LegendDisplayModeTable).
			Placement(common.LegendPlacementBottom).
			Calcs([]string{"lastNotNull", "max"})).
		Tooltip(common.NewVizTooltipOptionsBuilder().
			Mode(common.TooltipDisplayModeMulti).
			Sort(common.SortOrderDescending))
	if l.unit != "" {
		b.Unit(l.unit)
	}
	return b
}

// stacked is a time series whose series add up (parts of one whole).
func stacked(l look, qs ...query) *timeseries.PanelBuilder {
	return timeSeries(l, qs...).
		FillOpacity(40).
		Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal))
}

// single is one number: the query's current value.
func single(l look, qs ...query) cog.Builder[dashboard.Panel] {
	b := stat.NewPanelBuilder().
		Title(l.title).Description(l.description).
		Span(l.w).Height(l.h).
		Datasource(datasource).
		Targets(targets(true, false, qs)).
		GraphMode(common.BigValueGraphModeNone).
		ColorMode(common.BigValueColorModeValue).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}).Values(false)).
		NoValue("0")
	if l.unit != "" {
		b.Unit(l.unit)
	}
	return b
}

// bars compares the current value of each series, in the order the
// query returns them (sort_desc: largest first).
func bars(l look, qs ...query) cog.Builder[dashboard.Panel] {
	b := bargauge.NewPanelBuilder().
		Title(l.title).Description(l.description).
		Span(l.w).Height(l.h).
		Datasource(datasource).
		Targets(targets(true, false, qs)).
		Orientation(common.VizOrientationHorizontal).
		DisplayMode(common.BarGaugeDisplayModeBasic).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}).Values(false)).
		Min(0)
	if l.unit != "" {
		b.Unit(l.unit)
	}
	return b
}

// list is a table of the series a query returns now: one line per series,
// a column per label, the value last (the time column hidden).
func list(l look, qs ...query) cog.Builder[dashboard.Panel] {
	b := table.NewPanelBuilder().
		Title(l.title).Description(l.description).
		Span(l.w).Height(l.h).
		Datasource(datasource).
		Targets(targets(true, true, qs)).
		WithTransformation(dashboard.DataTransformerConfig{
			Id:      "organize",
			Options: map[string]any{"excludeByName": map[string]bool{"Time": true}},
		})
	if l.unit != "" {
		b.Unit(l.unit)
	}
	return b
}

// Variables.

// datasourceVariable picks the Prometheus (or Thanos) every panel reads.
func datasourceVariable() cog.Builder[dashboard.VariableModel] {
	return dashboard.NewDatasourceVariableBuilder("datasource").
		Label("Data source").
		Type("prometheus")
}

// labelVariable offers the values of a label of a series: several may be
// picked, All matches any value (also of series the list has not seen yet).
func labelVariable(name, label, selector, valueLabel string) cog.Builder[dashboard.VariableModel] {
	expr := fmt.Sprintf("label_values(%s, %s)", selector, valueLabel)
	return dashboard.NewQueryVariableBuilder(name).
		Label(label).
		Datasource(datasource).
		Query(dashboard.StringOrMap{String: ptr(expr)}).
		Definition(expr).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc).
		Multi(true).
		IncludeAll(true).
		AllValue(".*")
}

// oneOf offers the values of a label, exactly one picked.
func oneOf(name, label, selector, valueLabel string) cog.Builder[dashboard.VariableModel] {
	expr := fmt.Sprintf("label_values(%s, %s)", selector, valueLabel)
	return dashboard.NewQueryVariableBuilder(name).
		Label(label).
		Datasource(datasource).
		Query(dashboard.StringOrMap{String: ptr(expr)}).
		Definition(expr).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc)
}

// Expressions.

// ownLabels are the labels fleetvm-hub itself gives each of its fleet
// gauges. Every replica of fleetvm-hub serves them, from the same cache:
// with two replicas each series is scraped twice (their instance and pod
// labels differ), so a query takes the max by these labels first and
// counts each object once, whatever the replicas and whatever target
// labels the scrape adds.
var ownLabels = map[string]string{
	"fleetvm_fleetvirtualmachines":                     "namespace, condition, status",
	"fleetvm_fleetvirtualmachine_clusters":             "namespace, name, phase",
	"fleetvm_fleetvirtualmachine_clusters_desired":     "namespace, name",
	"fleetvm_fleetvirtualmachine_clusters_ready":       "namespace, name",
	"fleetvm_diskimage_references":                     "namespace, image, cluster",
	"fleetvm_diskimage_clusters":                       "namespace, image, phase",
	"fleetvm_diskimage_unused_since_timestamp_seconds": "namespace, image, cluster",
	"fleetvm_diskimage_retention_seconds":              "namespace, image",
	"fleetvm_cluster_copies":                           "cluster, environment, phase",
	"fleetvm_placement_exclusions":                     "namespace, reason",
	"fleetvm_move_phase":                               "namespace, name, fleetvirtualmachine, method, phase",
	"fleetvm_move_deadline_timestamp_seconds":          "namespace, name",
	"fleetvm_drain_copies":                             "cluster",
	"fleetvm_drain_last_progress_timestamp_seconds":    "cluster",
	"fleetvm_agent_inventory_timestamp_seconds":        "cluster",
}

// hub selects a fleet gauge of fleetvm-hub, once per object (see
// ownLabels): max by (its labels) (metric{matchers}).
func hub(metric, matchers string) string {
	labels, ok := ownLabels[metric]
	if !ok {
		panic("dashboards: " + metric + " is not a fleet gauge of fleetvm-hub")
	}
	if matchers == "" {
		return fmt.Sprintf("max by (%s) (%s)", labels, metric)
	}
	return fmt.Sprintf("max by (%s) (%s{%s})", labels, metric, matchers)
}

// vmLabels is KubeVirt's kubevirt_vm_labels on the managed clusters
// (those clusterMatchers selects, if any), cut to the labels that tie a
// VirtualMachine to its FleetVirtualMachine: fleetvm.io/namespace and
// fleetvm.io/name, which FleetVM puts on every VM it delivers, exposed by
// KubeVirt as label_fleetvm_io_namespace and label_fleetvm_io_name. The
// max by drops every other VM label, so a VM whose other labels change (a
// new series) still matches once.
func vmLabels(clusterMatchers string) string {
	return fmt.Sprintf(`max by (cluster, namespace, name, label_fleetvm_io_namespace, label_fleetvm_io_name) (
  kubevirt_vm_labels{%slabel_fleetvm_io_namespace=~"$namespace", label_fleetvm_io_name=~"$fleetvirtualmachine"}
)`, prefix(clusterMatchers))
}

// perCopy joins a KubeVirt VMI metric (its series on the clusters
// clusterMatchers selects, if any), through fn (a rate, a difference) and
// agg by (cluster, namespace, name), to the FleetVirtualMachine whose copy
// the VM is. A VMI's name and namespace are its VM's; the cluster label is
// the one ACM observability (or a federating Prometheus) adds to every
// series of a managed cluster.
func perCopy(agg, vmiExpr, clusterMatchers string) string {
	return fmt.Sprintf(`%s by (cluster, namespace, name) (
  %s
)
* on (cluster, namespace, name) group_left (label_fleetvm_io_namespace, label_fleetvm_io_name)
%s`, agg, vmiExpr, vmLabels(clusterMatchers))
}

// prefix is matchers ready to precede more: "a, " or "".
func prefix(matchers string) string {
	if matchers == "" {
		return ""
	}
	return matchers + ", "
}

// copyLegend names a copy: its FleetVirtualMachine and its cluster.
const copyLegend = "{{label_fleetvm_io_namespace}}/{{label_fleetvm_io_name}} on {{cluster}}"
