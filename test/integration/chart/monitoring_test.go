package chart

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// The Prometheus Operator's kinds the chart renders when monitoring is on.
const (
	kindPrometheusRule = "PrometheusRule"
	kindServiceMonitor = "ServiceMonitor"
)

// recordName is a recording rule's name as Prometheus names them,
// level:metric:operations (the level empty for a fleet-wide sum), its
// metric fleetvm's.
var recordName = regexp.MustCompile(`^[a-z_]*:fleetvm_[a-z0-9_]+:[a-z0-9_]+$`)

func TestMonitoringOffByDefault(t *testing.T) {
	for name, rel := range releases {
		t.Run(name, func(t *testing.T) {
			r := mustRender(t, rel)
			for _, kind := range []string{kindPrometheusRule, kindServiceMonitor} {
				if objs := r.ofKind(kind); len(objs) != 0 {
					t.Errorf("%d %ss rendered with monitoring off, want none", len(objs), kind)
				}
			}
		})
	}
}

// serviceMonitorView is what the test checks of a ServiceMonitor.
type serviceMonitorView struct {
	Name, Namespace string
	Labels          map[string]string
	// Selects: the Services of the release it selects, by name.
	Selects       []string
	Namespaces    []string
	Port, Scheme  string
	Path          string
	Interval      string
	HonorLabels   bool
	BearerToken   string
	TLSConfig     map[string]any
	EndpointCount int
}

func viewServiceMonitor(t *testing.T, r rendered, sm *unstructured.Unstructured) serviceMonitorView {
	t.Helper()
	v := serviceMonitorView{Name: sm.GetName(), Namespace: sm.GetNamespace(), Labels: sm.GetLabels()}
	match, _, _ := unstructured.NestedStringMap(sm.Object, "spec", "selector", "matchLabels")
	sel := labels.SelectorFromSet(match)
	for _, u := range r.ofKind("Service") {
		if sel.Matches(labels.Set(u.GetLabels())) {
			v.Selects = append(v.Selects, u.GetName())
		}
	}
	v.Namespaces, _, _ = unstructured.NestedStringSlice(sm.Object, "spec", "namespaceSelector", "matchNames")
	endpoints, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	v.EndpointCount = len(endpoints)
	if len(endpoints) == 0 {
		return v
	}
	ep, _ := endpoints[0].(map[string]any)
	v.Port, _, _ = unstructured.NestedString(ep, "port")
	v.Scheme, _, _ = unstructured.NestedString(ep, "scheme")
	v.Path, _, _ = unstructured.NestedString(ep, "path")
	v.Interval, _, _ = unstructured.NestedString(ep, "interval")
	v.HonorLabels, _, _ = unstructured.NestedBool(ep, "honorLabels")
	v.BearerToken, _, _ = unstructured.NestedString(ep, "bearerTokenFile")
	v.TLSConfig, _, _ = unstructured.NestedMap(ep, "tlsConfig")
	return v
}

// rule is one rule of a rendered PrometheusRule.
type rule struct {
	Group, Alert, Record, Expr, For string
	Labels, Annotations             map[string]string
}

func rules(t *testing.T, pr *unstructured.Unstructured) []rule {
	t.Helper()
	groups, _, err := unstructured.NestedSlice(pr.Object, "spec", "groups")
	if err != nil || len(groups) == 0 {
		t.Fatalf("PrometheusRule %s: no groups (%v)", pr.GetName(), err)
	}
	var out []rule
	for _, g := range groups {
		gm, _ := g.(map[string]any)
		name, _, _ := unstructured.NestedString(gm, "name")
		rs, _, _ := unstructured.NestedSlice(gm, "rules")
		for _, r := range rs {
			rm, _ := r.(map[string]any)
			var x rule
			x.Group = name
			x.Alert, _, _ = unstructured.NestedString(rm, "alert")
			x.Record, _, _ = unstructured.NestedString(rm, "record")
			x.Expr, _, _ = unstructured.NestedString(rm, "expr")
			x.For, _, _ = unstructured.NestedString(rm, "for")
			x.Labels, _, _ = unstructured.NestedStringMap(rm, "labels")
			x.Annotations, _, _ = unstructured.NestedStringMap(rm, "annotations")
			out = append(out, x)
		}
	}
	return out
}

// TestMonitoring: with monitoring on, the chart renders a ServiceMonitor
// that scrapes the metrics Service alone, as the hub serves it (HTTPS with
// a bearer token, or plain HTTP), and a PrometheusRule whose alerts follow
// KubeVirt's conventions, link their runbooks and select the hub's series
// under the job the ServiceMonitor gives them, or the operator's selector.
func TestMonitoring(t *testing.T) {
	const defaultRunbooks = "https://github.com/fleetvm/fleetvm/blob/main/docs/operator-guide/runbooks/"
	cases := map[string]struct {
		rel release
		// serviceMonitor is the ServiceMonitor wanted; nil: none.
		serviceMonitor *serviceMonitorView
		// rule is whether a PrometheusRule is wanted, with these.
		rule        bool
		ruleLabels  map[string]string
		runbooks    string
		hubSelector string
		staleAfter  string
	}{
		"both, defaults": {
			rel: release{name: "fleetvm-hub", namespace: "fleetvm-system", values: `
monitoring: {serviceMonitor: {enabled: true}, prometheusRule: {enabled: true}}
`},
			serviceMonitor: &serviceMonitorView{
				Name: "fleetvm-hub-metrics", Namespace: "fleetvm-system",
				Selects: []string{"fleetvm-hub-metrics"}, Namespaces: []string{"fleetvm-system"},
				Port: "https", Scheme: "https", Path: "/metrics", HonorLabels: true,
				BearerToken: "/var/run/secrets/kubernetes.io/serviceaccount/token",
				TLSConfig:   map[string]any{"insecureSkipVerify": true}, EndpointCount: 1,
			},
			rule: true, runbooks: defaultRunbooks, hubSelector: `job="fleetvm-hub-metrics"`, staleAfter: "900",
		},
		"both, plain HTTP metrics, the operator's selector labels, runbooks and job, a longer inventory age": {
			rel: release{name: "prod", namespace: "fleetvm-prod", values: `
metrics: {secure: false}
diskImages: {inventoryMaxAge: 1h30m}
monitoring:
  serviceMonitor: {enabled: true, labels: {release: kps}, interval: 30s}
  prometheusRule:
    enabled: true
    labels: {release: kps, role: alert-rules}
    runbookBaseURL: https://wiki.example/fleetvm/runbooks/
    hubSelector: 'job="fleetvm", cluster="hub"'
`},
			serviceMonitor: &serviceMonitorView{
				Name: "prod-fleetvm-hub-metrics", Namespace: "fleetvm-prod", Labels: map[string]string{"release": "kps"},
				Selects: []string{"prod-fleetvm-hub-metrics"}, Namespaces: []string{"fleetvm-prod"},
				Port: "http", Scheme: "http", Path: "/metrics", Interval: "30s", HonorLabels: true, EndpointCount: 1,
			},
			rule: true, ruleLabels: map[string]string{"release": "kps", "role": "alert-rules"},
			runbooks: "https://wiki.example/fleetvm/runbooks/", hubSelector: `job="fleetvm", cluster="hub"`, staleAfter: "5400",
		},
		"the ServiceMonitor alone": {
			rel: release{name: "fleetvm-hub", namespace: "fleetvm-system", values: `
monitoring: {serviceMonitor: {enabled: true}}
`},
			serviceMonitor: &serviceMonitorView{
				Name: "fleetvm-hub-metrics", Namespace: "fleetvm-system",
				Selects: []string{"fleetvm-hub-metrics"}, Namespaces: []string{"fleetvm-system"},
				Port: "https", Scheme: "https", Path: "/metrics", HonorLabels: true,
				BearerToken: "/var/run/secrets/kubernetes.io/serviceaccount/token",
				TLSConfig:   map[string]any{"insecureSkipVerify": true}, EndpointCount: 1,
			},
		},
		"the PrometheusRule alone": {
			rel: release{name: "fleetvm-hub", namespace: "fleetvm-system", values: `
monitoring: {prometheusRule: {enabled: true}}
`},
			rule: true, runbooks: defaultRunbooks, hubSelector: `job="fleetvm-hub-metrics"`, staleAfter: "900",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := mustRender(t, tc.rel)
			sms := r.ofKind(kindServiceMonitor)
			switch {
			case tc.serviceMonitor == nil && len(sms) != 0:
				t.Errorf("%d ServiceMonitors rendered, want none", len(sms))
			case tc.serviceMonitor != nil && len(sms) != 1:
				t.Errorf("%d ServiceMonitors rendered, want 1", len(sms))
			case tc.serviceMonitor != nil:
				got := viewServiceMonitor(t, r, sms[0])
				// The chart's labels are there; only the extra ones are compared.
				if got.Labels["app.kubernetes.io/part-of"] != "fleetvm" {
					t.Errorf("ServiceMonitor labels %v lack app.kubernetes.io/part-of=fleetvm", got.Labels)
				}
				for k := range got.Labels {
					if strings.HasPrefix(k, "app.kubernetes.io/") || k == "helm.sh/chart" {
						delete(got.Labels, k)
					}
				}
				if len(got.Labels) == 0 {
					got.Labels = nil
				}
				if diff := cmp.Diff(*tc.serviceMonitor, got); diff != "" {
					t.Errorf("ServiceMonitor (-want,+got):\n%s", diff)
				}
				// It scrapes the port the metrics Service serves on.
				for _, u := range r.ofKind("Service") {
					if svc := convert[corev1.Service](t, u); svc.Name == got.Name && svc.Spec.Ports[0].Name != got.Port {
						t.Errorf("ServiceMonitor scrapes port %q, the metrics Service's is %q", got.Port, svc.Spec.Ports[0].Name)
					}
				}
			}

			prs := r.ofKind(kindPrometheusRule)
			if !tc.rule {
				if len(prs) != 0 {
					t.Errorf("%d PrometheusRules rendered, want none", len(prs))
				}
				return
			}
			if len(prs) != 1 {
				t.Fatalf("%d PrometheusRules rendered, want 1", len(prs))
			}
			pr := prs[0]
			if pr.GetName() != tc.rel.fullname() || pr.GetNamespace() != tc.rel.namespace {
				t.Errorf("PrometheusRule %s/%s, want %s/%s", pr.GetNamespace(), pr.GetName(), tc.rel.namespace, tc.rel.fullname())
			}
			for k, v := range tc.ruleLabels {
				if pr.GetLabels()[k] != v {
					t.Errorf("PrometheusRule label %s=%q, want %q (for the Prometheus's ruleSelector)", k, pr.GetLabels()[k], v)
				}
			}
			checkRules(t, rules(t, pr), tc.runbooks, tc.hubSelector, tc.staleAfter)
		})
	}
}

// checkRules checks KubeVirt's conventions on every alert, the recording
// rules' names, and where the values went.
func checkRules(t *testing.T, rs []rule, runbooks, hubSelector, staleAfter string) {
	t.Helper()
	var groups, alerts []string
	exprs := map[string]string{}
	for _, r := range rs {
		if !slices.Contains(groups, r.Group) {
			groups = append(groups, r.Group)
		}
		if r.Record != "" {
			if r.Group != "fleetvm.rules" || !recordName.MatchString(r.Record) {
				t.Errorf("recording rule %s in group %s: want level:fleetvm_metric:operations in group fleetvm.rules", r.Record, r.Group)
			}
			continue
		}
		alerts = append(alerts, r.Alert)
		exprs[r.Alert] = r.Expr
		if r.Group != "fleetvm.alerts" {
			t.Errorf("alert %s in group %s, want fleetvm.alerts", r.Alert, r.Group)
		}
		if r.For == "" {
			t.Errorf("alert %s has no for", r.Alert)
		}
		got := fmt.Sprintf("severity %s, operator_health_impact %s, part of %s, component %s",
			r.Labels["severity"], r.Labels["operator_health_impact"], r.Labels["kubernetes_operator_part_of"], r.Labels["kubernetes_operator_component"])
		if !slices.Contains([]string{"critical", "warning", "info"}, r.Labels["severity"]) ||
			!slices.Contains([]string{"critical", "warning", "none"}, r.Labels["operator_health_impact"]) ||
			r.Labels["kubernetes_operator_part_of"] != "fleetvm" || r.Labels["kubernetes_operator_component"] != "fleetvm-hub" {
			t.Errorf("alert %s: %s; want severity critical, warning or info, operator_health_impact critical, warning or none, part of fleetvm, component fleetvm-hub", r.Alert, got)
		}
		if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
			t.Errorf("alert %s: annotations %v, want a summary and a description", r.Alert, r.Annotations)
		}
		if want := runbooks + r.Alert + ".md"; r.Annotations["runbook_url"] != want {
			t.Errorf("alert %s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
		}
	}
	if diff := cmp.Diff([]string{"fleetvm.rules", "fleetvm.alerts"}, groups); diff != "" {
		t.Errorf("rule groups (-want,+got):\n%s", diff)
	}
	slices.Sort(alerts)
	want := []string{
		"FleetVMAgentReportsStale", "FleetVMCopiesNotReady", "FleetVMDiskImageHeldPastRetention", "FleetVMDrainStalled",
		"FleetVMHubDown", "FleetVMHubReconcileErrors", "FleetVMMoveFailed", "FleetVMMovePastDeadline",
		"FleetVMNoReadyCopy", "FleetVMRunsTwice", "FleetVMWebhookErrors", "FleetVMWebhookUnreachable",
	}
	if diff := cmp.Diff(want, alerts); diff != "" {
		t.Errorf("alerts (-want,+got):\n%s", diff)
	}
	if got, want := exprs["FleetVMHubDown"], "absent(up{"+hubSelector+"} == 1)"; got != want {
		t.Errorf("FleetVMHubDown expr %q, want %q", got, want)
	}
	if got := exprs["FleetVMAgentReportsStale"]; !strings.Contains(got, "{"+hubSelector+"}") || !strings.HasSuffix(got, "> "+staleAfter) {
		t.Errorf("FleetVMAgentReportsStale expr %q, want the hub's series ({%s}) older than %s seconds (diskImages.inventoryMaxAge)", got, hubSelector, staleAfter)
	}
}

// TestMonitoringRefusesBadInventoryAge: the PrometheusRule reads
// diskImages.inventoryMaxAge in hours, minutes and seconds; fleetvm-hub
// takes any Go duration, so only the rule refuses the others.
func TestMonitoringRefusesBadInventoryAge(t *testing.T) {
	for _, age := range []string{"1.5h", "900000ms", "15", "m"} {
		values := fmt.Sprintf("diskImages: {inventoryMaxAge: %q}\n", age)
		if _, err := render(t, release{name: "x", namespace: "x", values: values + "monitoring: {prometheusRule: {enabled: true}}"}); err == nil {
			t.Errorf("inventoryMaxAge %q rendered with the PrometheusRule; want an error", age)
		}
		if _, err := render(t, release{name: "x", namespace: "x", values: values}); err != nil {
			t.Errorf("inventoryMaxAge %q without the PrometheusRule: %v", age, err)
		}
	}
}
