package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetvm/fleetvm/hack/dashboards/dashboards"
)

// TestDashboards: the chart renders FleetVM's Grafana dashboards only when
// monitoring.dashboards.enabled, one ConfigMap per dashboard hack/dashboards
// generates, with the label Grafana's sidecar looks for, in the namespace
// asked for, each holding its generated file unchanged; the API server
// accepts each (server-side apply, dry run).
func TestDashboards(t *testing.T) {
	generated, err := dashboards.All()
	if err != nil {
		t.Fatal(err)
	}
	if len(generated) == 0 {
		t.Fatal("hack/dashboards defines no dashboard")
	}
	cases := map[string]struct {
		rel         release
		enabled     bool
		namespace   string
		label       [2]string
		annotations map[string]string
	}{
		"disabled by default": {
			rel: release{name: "fleetvm-hub", namespace: "fleetvm-system"},
		},
		"enabled, kube-prometheus-stack's sidecar": {
			rel: release{name: "fleetvm-hub", namespace: "fleetvm-system", values: `
monitoring: {dashboards: {enabled: true}}
`},
			enabled: true, namespace: "fleetvm-system", label: [2]string{"grafana_dashboard", "1"},
		},
		"enabled for ACM observability's Grafana, in its namespace and a folder": {
			rel: release{name: "prod", namespace: "fleetvm-prod", values: `
monitoring:
  dashboards:
    enabled: true
    label: grafana-custom-dashboard
    labelValue: "true"
    namespace: open-cluster-management-observability
    annotations: {grafana_folder: FleetVM}
`},
			enabled: true, namespace: "open-cluster-management-observability",
			label:       [2]string{"grafana-custom-dashboard", "true"},
			annotations: map[string]string{"grafana_folder": "FleetVM"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := mustRender(t, tc.rel)
			var cms []*corev1.ConfigMap
			for _, u := range r.ofKind("ConfigMap") {
				if strings.Contains(u.GetName(), "-dashboard-") {
					cms = append(cms, convert[corev1.ConfigMap](t, u))
				}
			}
			if !tc.enabled {
				if len(cms) != 0 {
					t.Errorf("%d dashboard ConfigMaps rendered, want none while monitoring.dashboards.enabled is false", len(cms))
				}
				return
			}
			var want, got []string
			for _, d := range generated {
				want = append(want, tc.rel.fullname()+"-dashboard-"+d.Name)
			}
			for _, cm := range cms {
				got = append(got, cm.Name)
			}
			slices.Sort(want)
			slices.Sort(got)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("dashboard ConfigMaps (-want,+got):\n%s", diff)
			}
			for _, cm := range cms {
				d := generated[slices.IndexFunc(generated, func(d dashboards.Dashboard) bool {
					return cm.Name == tc.rel.fullname()+"-dashboard-"+d.Name
				})]
				if cm.Namespace != tc.namespace {
					t.Errorf("%s in namespace %q, want %q", cm.Name, cm.Namespace, tc.namespace)
				}
				if v, ok := cm.Labels[tc.label[0]]; !ok || v != tc.label[1] {
					t.Errorf("%s labels %v, want %s: %q", cm.Name, cm.Labels, tc.label[0], tc.label[1])
				}
				if cm.Labels["app.kubernetes.io/part-of"] != "fleetvm" {
					t.Errorf("%s lacks the label app.kubernetes.io/part-of=fleetvm", cm.Name)
				}
				if diff := cmp.Diff(tc.annotations, cm.Annotations); diff != "" {
					t.Errorf("%s annotations (-want,+got):\n%s", cm.Name, diff)
				}
				key := "fleetvm-" + d.Name + ".json"
				if len(cm.Data) != 1 || cm.Data[key] == "" {
					t.Fatalf("%s data keys %v, want only %s", cm.Name, dataKeys(cm.Data), key)
				}
				file, err := os.ReadFile(filepath.Join(chartDir(t), "files", "dashboards", d.Name+".json"))
				if err != nil {
					t.Fatal(err)
				}
				// Block scalars with |-: no final newline, however Helm
				// splits and trims the documents.
				if cm.Data[key] != strings.TrimSuffix(string(file), "\n") {
					t.Errorf("%s %s differs from files/dashboards/%s.json", cm.Name, key, d.Name)
				}
				var model struct {
					UID    string            `json:"uid"`
					Panels []json.RawMessage `json:"panels"`
				}
				if err := json.Unmarshal([]byte(cm.Data[key]), &model); err != nil {
					t.Fatalf("%s %s: not JSON: %v", cm.Name, key, err)
				}
				if model.UID != d.UID || len(model.Panels) == 0 {
					t.Errorf("%s: dashboard uid %q with %d panels, want uid %q and panels", cm.Name, model.UID, len(model.Panels), d.UID)
				}
			}
			// The API server accepts them, in a namespace that exists
			// before the install.
			ctx := t.Context()
			hub := fleet(t).Hub.Client
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tc.namespace}}
			if err := hub.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
				t.Fatal(err)
			}
			for _, u := range r.ofKind("ConfigMap") {
				if !strings.Contains(u.GetName(), "-dashboard-") {
					continue
				}
				err := hub.Patch(ctx, u.DeepCopy(), client.Apply, client.DryRunAll, client.ForceOwnership,
					client.FieldOwner("fleetvm-chart-test"), client.FieldValidation(metav1.FieldValidationStrict))
				if err != nil {
					t.Errorf("ConfigMap %s: %v", u.GetName(), err)
				}
			}
		})
	}
}

// TestDashboardsNeedALabel: without a label the sidecar would never find
// them; the chart refuses to render.
func TestDashboardsNeedALabel(t *testing.T) {
	values := `
monitoring: {dashboards: {enabled: true, label: ""}}
`
	if _, err := render(t, release{name: "fleetvm-hub", namespace: "fleetvm-system", values: values}); err == nil {
		t.Error("rendered dashboards without a label; want an error")
	}
}

func dataKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
