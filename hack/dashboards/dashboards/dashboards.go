// Package dashboards defines FleetVM's Grafana dashboards as code, with
// Grafana's foundation SDK: the fleet, moves and drains, disk images and
// the hub's own health. hack/dashboards writes them into the hub chart
// (files/dashboards/<name>.json, which the chart puts in ConfigMaps for
// Grafana's dashboard sidecar when monitoring.dashboards.enabled) and
// pictures their layout and queries in the operator guide. `make
// manifests` runs it; `make verify` fails when what is committed differs.
//
// The queries read fleetvm-hub's metrics (docs/operator-guide/metrics.md)
// and, for a copy's own numbers, KubeVirt's on the managed clusters
// (kubevirt_vmi_*, joined to each FleetVirtualMachine through
// kubevirt_vm_labels). Queries returns every expression, for checks.
package dashboards

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
)

// Where the generated files go, relative to the repository root.
const (
	// Dir holds one JSON file per dashboard, in the hub chart.
	Dir = "deploy/charts/fleetvm-hub/files/dashboards"
	// Doc is the operator guide's page on the dashboards; its section
	// between the generated markers pictures each dashboard.
	Doc = "docs/operator-guide/dashboards.md"
)

// tag marks every FleetVM dashboard; each links to the others by it.
const tag = "fleetvm"

// board is a dashboard as defined here: its rows of panels, in order.
type board struct {
	// name is the file's name without .json, and the end of its
	// ConfigMap's name.
	name        string
	uid, title  string
	description string
	variables   []cog.Builder[dashboard.VariableModel]
	rows        []row
}

type row struct {
	title  string
	panels []cog.Builder[dashboard.Panel]
}

// boards are the dashboards, in the order the docs show them.
func boards() []board {
	return []board{overview(), moves(), diskImages(), hubHealth()}
}

// Dashboard is one generated dashboard.
type Dashboard struct {
	// Name is the file's name without .json.
	Name string
	// UID is the dashboard's fixed uid.
	UID   string
	Title string
	model dashboard.Dashboard //nolint:staticcheck // classic dashboard JSON: what Grafana's sidecar provisions; dashboardv2 is not served by file provisioning
}

// All builds every dashboard.
func All() ([]Dashboard, error) {
	var out []Dashboard
	for _, b := range boards() {
		m, err := b.build()
		if err != nil {
			return nil, fmt.Errorf("dashboard %s: %w", b.name, err)
		}
		out = append(out, Dashboard{Name: b.name, UID: b.uid, Title: b.title, model: m})
	}
	return out, nil
}

func (b board) build() (dashboard.Dashboard, error) { //nolint:staticcheck // see Dashboard.model
	//nolint:staticcheck // see Dashboard.model
	d := dashboard.NewDashboardBuilder(b.title)
	d.Uid(b.uid).
		Description(b.description).
		Tags([]string{tag}).
		Readonly().
		Refresh("1m").
		Time("now-6h", "now").
		Timezone(common.TimeZoneBrowser).
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Link(dashboard.NewDashboardLinkBuilder("FleetVM").
			Type(dashboard.DashboardLinkTypeDashboards).
			Tags([]string{tag}).
			AsDropdown(true).
			IncludeVars(true).
			KeepTime(true)).
		Variables(b.variables)
	for _, r := range b.rows {
		d.WithRow(dashboard.NewRowBuilder(r.title))
		for _, p := range r.panels {
			d.WithPanel(p)
		}
	}
	m, err := d.Build()
	if err != nil {
		return m, err
	}
	// Fixed ids: panels 1, 2, ... in order (the docs' numbers), rows
	// from 100.
	panel, rowID := uint32(0), uint32(100)
	for i := range m.Panels {
		switch p := m.Panels[i]; {
		case p.Panel != nil:
			panel++
			p.Panel.Id = ptr(panel)
		case p.RowPanel != nil:
			rowID++
			p.RowPanel.Id = rowID
		}
	}
	return m, nil
}

// JSON is the dashboard as Grafana imports it: indented, keys sorted, no
// HTML escapes (PromQL's < and > stay readable), a final newline. The
// same dashboard gives the same bytes.
func (d Dashboard) JSON() ([]byte, error) {
	raw, err := json.Marshal(d.model)
	if err != nil {
		return nil, err
	}
	// Through a generic value: the SDK marshals panels with json.Marshal,
	// which escapes < and >; re-encoding sorts keys and keeps them.
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// File is where the dashboard's JSON goes, relative to the repository
// root.
func (d Dashboard) File() string { return path.Join(Dir, d.Name+".json") }

// Query is one expression of a dashboard: a panel's PromQL, or a
// variable's label_values(selector, label). Grafana's variables
// ($namespace, $__rate_interval) stay as written. The JSON field names are
// those hack/tools/promtool/promqlcheck reads.
type Query struct {
	// Source says where it is: "<file>: <panel title> (<refId>)" or
	// "<file>: variable <name>".
	Source string `json:"source"`
	Expr   string `json:"expr"`
}

// Queries returns every expression of every dashboard, in order.
func Queries() ([]Query, error) {
	all, err := All()
	if err != nil {
		return nil, err
	}
	var out []Query
	for _, d := range all {
		file := d.Name + ".json"
		for _, v := range d.model.Templating.List {
			if v.Type == dashboard.VariableTypeQuery && v.Query != nil && v.Query.String != nil {
				out = append(out, Query{Source: fmt.Sprintf("%s: variable %s", file, v.Name), Expr: *v.Query.String})
			}
		}
		for _, p := range d.panels() {
			for _, t := range p.targets {
				out = append(out, Query{Source: fmt.Sprintf("%s: %s (%s)", file, p.title, t.refID), Expr: t.expr})
			}
		}
	}
	return out, nil
}

// panelInfo is what the docs and the checks read of a panel or a row.
type panelInfo struct {
	id          uint32
	row         bool
	title, kind string
	unit        string
	x, y, w, h  uint32
	targets     []targetInfo
	description string
}

type targetInfo struct{ refID, expr, legend string }

// panels lists the dashboard's rows and panels in order, as built.
func (d Dashboard) panels() []panelInfo {
	var out []panelInfo
	for _, p := range d.model.Panels {
		if r := p.RowPanel; r != nil {
			pi := panelInfo{id: r.Id, row: true, title: deref(r.Title), kind: "row"}
			if g := r.GridPos; g != nil {
				pi.x, pi.y, pi.w, pi.h = g.X, g.Y, g.W, g.H
			}
			out = append(out, pi)
			continue
		}
		if p.Panel == nil {
			continue
		}
		pa := p.Panel
		pi := panelInfo{title: deref(pa.Title), kind: pa.Type, description: deref(pa.Description)}
		if pa.Id != nil {
			pi.id = *pa.Id
		}
		if g := pa.GridPos; g != nil {
			pi.x, pi.y, pi.w, pi.h = g.X, g.Y, g.W, g.H
		}
		if pa.FieldConfig != nil {
			pi.unit = deref(pa.FieldConfig.Defaults.Unit)
		}
		for _, t := range pa.Targets {
			pq, ok := t.(prometheus.Dataquery)
			if !ok {
				continue
			}
			pi.targets = append(pi.targets, targetInfo{refID: deref(pq.RefId), expr: pq.Expr, legend: deref(pq.LegendFormat)})
		}
		out = append(out, pi)
	}
	return out
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
