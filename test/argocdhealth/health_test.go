// Package argocdhealth tests the Argo CD health check of
// FleetVirtualMachines (deploy/argocd) with Argo CD's own code: the argocd-cm
// snippet is read by Argo CD's settings manager, and the script runs in
// Argo CD's Lua VM, as the application controller would run it.
package argocdhealth

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/argoproj/argo-cd/v3/util/lua"
	"github.com/argoproj/argo-cd/v3/util/settings"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/test/fleetenv"
)

const (
	argoNS      = "argocd"
	overrideKey = "fleetvm.io/FleetVirtualMachine"
)

func deployFile(t *testing.T, rel string) []byte {
	t.Helper()
	root, err := fleetenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "deploy", "argocd", rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// healthOverrides loads the argocd-cm snippet the way Argo CD loads its
// settings, and returns the resource overrides Argo CD would use.
func healthOverrides(t *testing.T) lua.ResourceHealthOverrides {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := yaml.UnmarshalStrict(deployFile(t, "argocd-cm-fleetvm-health.yaml"), cm); err != nil {
		t.Fatalf("argocd-cm snippet: %v", err)
	}
	cm.Namespace = argoNS
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "argocd-secret", Namespace: argoNS, Labels: cm.Labels}}
	mgr := settings.NewSettingsManager(t.Context(), fake.NewClientset(cm, secret), argoNS)
	overrides, err := mgr.GetResourceOverrides()
	if err != nil {
		t.Fatalf("Argo CD reads the argocd-cm snippet: %v", err)
	}
	if _, ok := overrides[overrideKey]; !ok {
		t.Fatalf("argocd-cm snippet has no override for %s; Argo CD sees %v", overrideKey, keys(overrides))
	}
	return overrides
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestSnippetCarriesTheScriptVerbatim(t *testing.T) {
	script := string(deployFile(t, "health/fleetvm.io/FleetVirtualMachine/health.lua"))
	if diff := cmp.Diff(script, healthOverrides(t)[overrideKey].HealthLua); diff != "" {
		t.Errorf("argocd-cm snippet and health.lua differ (-health.lua,+snippet):\n%s", diff)
	}
}

// fvm is a FleetVirtualMachine at generation 2 with the given status, as
// Argo CD would get it from the API server.
func fvm(t *testing.T, rs fleetv1alpha1.RunStrategy, status *fleetv1alpha1.FleetVirtualMachineStatus) *unstructured.Unstructured {
	t.Helper()
	f := &fleetv1alpha1.FleetVirtualMachine{
		TypeMeta:   metav1.TypeMeta{APIVersion: fleetv1alpha1.GroupVersion.String(), Kind: "FleetVirtualMachine"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "vms", Generation: 2},
		Spec: fleetv1alpha1.FleetVirtualMachineSpec{
			Placement:   fleetv1alpha1.FleetPlacement{Environment: "prod"},
			RunStrategy: rs,
		},
	}
	if status != nil {
		f.Status = *status
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(f)
	if err != nil {
		t.Fatal(err)
	}
	if status == nil {
		delete(m, "status")
	}
	return &unstructured.Unstructured{Object: m}
}

func cond(typ string, status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, ObservedGeneration: 2}
}

// conditions is the full set the hub writes; mut changes some.
func conditions(mut ...metav1.Condition) []metav1.Condition {
	cs := []metav1.Condition{
		cond(fleetv1alpha1.ConditionPlaced, metav1.ConditionTrue, fleetv1alpha1.ReasonClustersDecided, "placed on prod-a, prod-b"),
		cond(fleetv1alpha1.ConditionDelivered, metav1.ConditionTrue, fleetv1alpha1.ReasonApplicationSetReady, "an Application for each of the 2 decided clusters"),
		cond(fleetv1alpha1.ConditionReady, metav1.ConditionTrue, fleetv1alpha1.ReasonAllReady, "ready on all 2 clusters"),
		cond(fleetv1alpha1.ConditionAvailable, metav1.ConditionTrue, fleetv1alpha1.ReasonAllReady, "serving on prod-a, prod-b"),
		cond(fleetv1alpha1.ConditionDegraded, metav1.ConditionFalse, fleetv1alpha1.ReasonAsExpected, "no cluster reports a problem"),
	}
	for _, m := range mut {
		for i := range cs {
			if cs[i].Type == m.Type {
				cs[i] = m
			}
		}
	}
	return cs
}

func status(observed int64, cs []metav1.Condition) *fleetv1alpha1.FleetVirtualMachineStatus {
	return &fleetv1alpha1.FleetVirtualMachineStatus{ObservedGeneration: observed, Conditions: cs}
}

type health struct{ Status, Message string }

func TestHealth(t *testing.T) {
	overrides := healthOverrides(t)
	for name, tc := range map[string]struct {
		rs     fleetv1alpha1.RunStrategy
		status *fleetv1alpha1.FleetVirtualMachineStatus
		want   health
	}{
		"no status yet": {
			rs:   fleetv1alpha1.RunStrategyAlways,
			want: health{"Progressing", "Waiting for the FleetVM hub controller to report status"},
		},
		"status older than the spec": {
			rs: fleetv1alpha1.RunStrategyAlways, status: status(1, conditions()),
			want: health{"Progressing", "Waiting for the FleetVM hub controller to observe generation 2"},
		},
		"ready everywhere": {
			rs: fleetv1alpha1.RunStrategyAlways, status: status(2, conditions()),
			want: health{"Healthy", "ready on all 2 clusters"},
		},
		"halted and stopped everywhere": {
			rs: fleetv1alpha1.RunStrategyHalted,
			status: status(2, conditions(
				cond(fleetv1alpha1.ConditionReady, metav1.ConditionTrue, fleetv1alpha1.ReasonStopped, "stopped on all 2 clusters, as runStrategy Halted asks"),
				cond(fleetv1alpha1.ConditionAvailable, metav1.ConditionFalse, fleetv1alpha1.ReasonStopped, "runStrategy Halted"))),
			want: health{"Suspended", "stopped on all 2 clusters, as runStrategy Halted asks"},
		},
		"halted, still stopping": {
			rs: fleetv1alpha1.RunStrategyHalted,
			status: status(2, conditions(
				cond(fleetv1alpha1.ConditionReady, metav1.ConditionFalse, fleetv1alpha1.ReasonSomeNotReady, "not ready on prod-b (Stopping)"))),
			want: health{"Progressing", "not ready on prod-b (Stopping)"},
		},
		"manual, settled": {
			rs: fleetv1alpha1.RunStrategyManual, status: status(2, conditions()),
			want: health{"Healthy", "ready on all 2 clusters"},
		},
		"a cluster failed": {
			rs: fleetv1alpha1.RunStrategyAlways,
			status: status(2, conditions(
				cond(fleetv1alpha1.ConditionReady, metav1.ConditionFalse, fleetv1alpha1.ReasonSomeNotReady, "not ready on prod-b (Failed)"),
				cond(fleetv1alpha1.ConditionDegraded, metav1.ConditionTrue, fleetv1alpha1.ReasonClustersFailed, "failed on prod-b"))),
			want: health{"Degraded", "failed on prod-b"},
		},
		"a cluster unreachable": {
			rs: fleetv1alpha1.RunStrategyAlways,
			status: status(2, conditions(
				cond(fleetv1alpha1.ConditionReady, metav1.ConditionFalse, fleetv1alpha1.ReasonSomeNotReady, "not ready on prod-b (Unknown)"),
				cond(fleetv1alpha1.ConditionDegraded, metav1.ConditionTrue, fleetv1alpha1.ReasonClustersUnknown, "state unknown on prod-b"))),
			want: health{"Degraded", "state unknown on prod-b"},
		},
		"placement pending": {
			rs: fleetv1alpha1.RunStrategyAlways,
			status: status(2, []metav1.Condition{
				cond(fleetv1alpha1.ConditionPlaced, metav1.ConditionUnknown, fleetv1alpha1.ReasonPlacementPending, "waiting for the OCM scheduler to decide"),
				cond(fleetv1alpha1.ConditionDelivered, metav1.ConditionUnknown, fleetv1alpha1.ReasonReconciling, "ApplicationSet not created yet"),
				cond(fleetv1alpha1.ConditionReady, metav1.ConditionFalse, fleetv1alpha1.ReasonNoneReady, "not placed on any cluster"),
			}),
			want: health{"Progressing", "waiting for the OCM scheduler to decide"},
		},
		"no cluster qualifies": {
			rs: fleetv1alpha1.RunStrategyAlways,
			status: status(2, conditions(
				cond(fleetv1alpha1.ConditionPlaced, metav1.ConditionFalse, fleetv1alpha1.ReasonNoClusters, "no cluster qualifies: 0/3 clusters selected"),
				cond(fleetv1alpha1.ConditionReady, metav1.ConditionFalse, fleetv1alpha1.ReasonNoneReady, "not placed on any cluster"))),
			want: health{"Degraded", "no cluster qualifies: 0/3 clusters selected"},
		},
		"fewer clusters than asked, the placed ones ready": {
			rs: fleetv1alpha1.RunStrategyAlways,
			status: status(2, conditions(
				cond(fleetv1alpha1.ConditionPlaced, metav1.ConditionFalse, fleetv1alpha1.ReasonNotEnoughClusters, "placed on 1 of 2 clusters (prod-a)"))),
			want: health{"Degraded", "placed on 1 of 2 clusters (prod-a)"},
		},
		"applications not created yet": {
			rs: fleetv1alpha1.RunStrategyAlways,
			status: status(2, conditions(
				cond(fleetv1alpha1.ConditionDelivered, metav1.ConditionFalse, fleetv1alpha1.ReasonApplicationsMissing, "waiting for Argo CD to create the Applications of prod-b"),
				cond(fleetv1alpha1.ConditionReady, metav1.ConditionFalse, fleetv1alpha1.ReasonSomeNotReady, "not ready on prod-b (Pending)"))),
			want: health{"Progressing", "waiting for Argo CD to create the Applications of prod-b"},
		},
		"delivery failed": {
			rs: fleetv1alpha1.RunStrategyAlways,
			status: status(2, conditions(
				cond(fleetv1alpha1.ConditionDelivered, metav1.ConditionFalse, fleetv1alpha1.ReasonDeliveryFailed, "ApplicationSet rejected"),
				cond(fleetv1alpha1.ConditionReady, metav1.ConditionFalse, fleetv1alpha1.ReasonNoneReady, "the VM is not ready on any cluster"))),
			want: health{"Degraded", "ApplicationSet rejected"},
		},
		"clusters starting": {
			rs: fleetv1alpha1.RunStrategyAlways,
			status: status(2, conditions(
				cond(fleetv1alpha1.ConditionReady, metav1.ConditionFalse, fleetv1alpha1.ReasonSomeNotReady, "not ready on prod-a (Starting), prod-b (Provisioning)"))),
			want: health{"Progressing", "not ready on prod-a (Starting), prod-b (Provisioning)"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := overrides.GetResourceHealth(fvm(t, tc.rs, tc.status))
			if err != nil {
				t.Fatalf("Argo CD runs the health check: %v", err)
			}
			if got == nil {
				t.Fatal("Argo CD found no health check for FleetVirtualMachine")
			}
			if diff := cmp.Diff(tc.want, health{string(got.Status), got.Message}); diff != "" {
				t.Errorf("health (-want,+got):\n%s", diff)
			}
		})
	}
}
