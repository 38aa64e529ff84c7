package chart

import (
	"fmt"
	"regexp"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/jsonpath"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// collectorConfig is the part of ACM Search's CollectorConfig
// (search.open-cluster-management.io/v1alpha1, search-v2-operator's
// api/v1alpha1/collectorconfig_types.go) the chart writes. convert decodes
// strictly: a field the chart writes that is not here fails the test.
type collectorConfig struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		CollectionRules []collectionRule `json:"collectionRules"`
	} `json:"spec"`
}

type collectionRule struct {
	Action           string `json:"action"`
	ResourceSelector struct {
		APIGroups []string `json:"apiGroups"`
		Kinds     []string `json:"kinds"`
	} `json:"resourceSelector"`
	CollectConditions *bool `json:"collectConditions,omitempty"`
	Fields            []struct {
		Name     string `json:"name"`
		JSONPath string `json:"jsonPath"`
		Type     string `json:"type,omitempty"`
	} `json:"fields,omitempty"`
}

const integrationLabel = "search.open-cluster-management.io/config-type"

// searchFieldName is the name search-v2-operator's webhook admits for a
// collected field.
var searchFieldName = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9\-_.]*$`)

func TestSearchCollectorConfigOffByDefault(t *testing.T) {
	for name, rel := range releases {
		t.Run(name, func(t *testing.T) {
			if objs := mustRender(t, rel).ofKind("CollectorConfig"); len(objs) != 0 {
				t.Errorf("%d CollectorConfigs rendered with search off, want none", len(objs))
			}
		})
	}
}

func TestSearchCollectorConfig(t *testing.T) {
	cases := map[string]struct {
		rel           release
		wantName      string
		wantNamespace string
	}{
		"enabled": {
			rel:      release{name: "fleetvm-hub", namespace: "fleetvm-system", values: `search: {enabled: true}`},
			wantName: "fleetvm-hub", wantNamespace: "open-cluster-management",
		},
		"enabled, Search CR in another namespace": {
			rel:      release{name: "prod", namespace: "fleetvm-prod", values: `search: {enabled: true, namespace: acm}`},
			wantName: "prod-fleetvm-hub", wantNamespace: "acm",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := mustRender(t, tc.rel)
			cc := one[collectorConfig](t, r, "CollectorConfig")
			if cc.APIVersion != "search.open-cluster-management.io/v1alpha1" {
				t.Errorf("apiVersion %q, want search.open-cluster-management.io/v1alpha1", cc.APIVersion)
			}
			if cc.Name != tc.wantName || cc.Namespace != tc.wantNamespace {
				t.Errorf("CollectorConfig %s/%s, want %s/%s", cc.Namespace, cc.Name, tc.wantNamespace, tc.wantName)
			}
			// search-v2-operator merges only the CollectorConfigs with this
			// label (and user-collector-config) into merged-collector-config.
			if got := cc.Labels[integrationLabel]; got != "integration" {
				t.Errorf("label %s=%q, want integration", integrationLabel, got)
			}
			if got := cc.Labels["app.kubernetes.io/part-of"]; got != "fleetvm" {
				t.Errorf("label app.kubernetes.io/part-of=%q, want fleetvm", got)
			}

			var kinds []string
			for i, rule := range cc.Spec.CollectionRules {
				sel := rule.ResourceSelector
				// The webhook admits fields only in a rule with exactly one
				// apiGroup and one kind, neither a wildcard.
				if len(sel.APIGroups) != 1 || len(sel.Kinds) != 1 {
					t.Fatalf("rule %d selects apiGroups %v, kinds %v; want one of each", i, sel.APIGroups, sel.Kinds)
				}
				kinds = append(kinds, sel.APIGroups[0]+"/"+sel.Kinds[0])
				if rule.Action != "include" {
					t.Errorf("rule %d (%s): action %q, want include", i, sel.Kinds[0], rule.Action)
				}
				if rule.CollectConditions == nil || !*rule.CollectConditions {
					t.Errorf("rule %d (%s): collectConditions not set", i, sel.Kinds[0])
				}
				if len(rule.Fields) == 0 {
					t.Errorf("rule %d (%s): no fields", i, sel.Kinds[0])
				}
				for _, f := range rule.Fields {
					if !searchFieldName.MatchString(f.Name) {
						t.Errorf("%s field %q: not a name the CollectorConfig webhook admits", sel.Kinds[0], f.Name)
					}
					// The type enum changed between ACM releases
					// (number/slice became integer/float/boolean);
					// string, the default, is valid in every one.
					if f.Type != "" && f.Type != "string" {
						t.Errorf("%s field %q: type %q, want none (string)", sel.Kinds[0], f.Name, f.Type)
					}
				}
			}
			want := []string{"fleetvm.io/FleetDiskImage", "fleetvm.io/FleetVirtualMachine"}
			slices.Sort(kinds)
			if diff := cmp.Diff(want, kinds); diff != "" {
				t.Errorf("kinds collected (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestSearchFieldsMatchTheAPI evaluates every collected field's JSONPath,
// as the search collector does, on a FleetVirtualMachine and a
// FleetDiskImage with a status: a path that names no field of the API
// would index nothing.
func TestSearchFieldsMatchTheAPI(t *testing.T) {
	fvm := &fleetv1alpha1.FleetVirtualMachine{
		Spec: fleetv1alpha1.FleetVirtualMachineSpec{RunStrategy: fleetv1alpha1.RunStrategyHalted},
		Status: fleetv1alpha1.FleetVirtualMachineStatus{
			Conditions: []metav1.Condition{
				{Type: fleetv1alpha1.ConditionPlaced, Status: metav1.ConditionTrue, Reason: fleetv1alpha1.ReasonClustersDecided},
				{Type: fleetv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: fleetv1alpha1.ReasonNotEnoughReady},
			},
			Summary: fleetv1alpha1.FleetSummary{Desired: 7, Placed: 6, Ready: 5, Running: 4, Stopped: 1, Failed: 2, Unknown: 3},
		},
	}
	fdi := &fleetv1alpha1.FleetDiskImage{
		Status: fleetv1alpha1.FleetDiskImageStatus{
			Conditions: []metav1.Condition{
				{Type: fleetv1alpha1.ConditionInUse, Status: metav1.ConditionTrue, Reason: fleetv1alpha1.ReasonReferenced},
				{Type: fleetv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: fleetv1alpha1.ReasonImporting},
			},
			Totals: fleetv1alpha1.DiskImageTotals{Clusters: 9, Ready: 8, References: 12},
		},
	}
	objects := map[string]any{"FleetVirtualMachine": fvm, "FleetDiskImage": fdi}
	want := map[string]map[string]string{
		"FleetVirtualMachine": {
			"status":          "NotEnoughReady",
			"desiredClusters": "7", "placedClusters": "6", "readyClusters": "5", "runningClusters": "4",
			"stoppedClusters": "1", "failedClusters": "2", "unknownClusters": "3",
			"runStrategy": "Halted",
		},
		"FleetDiskImage": {
			"status":   "Importing",
			"clusters": "9", "readyClusters": "8", "references": "12",
		},
	}

	r := mustRender(t, release{name: "fleetvm-hub", namespace: "fleetvm-system", values: `search: {enabled: true}`})
	cc := one[collectorConfig](t, r, "CollectorConfig")
	got := map[string]map[string]string{}
	for _, rule := range cc.Spec.CollectionRules {
		kind := rule.ResourceSelector.Kinds[0]
		obj, ok := objects[kind]
		if !ok {
			t.Fatalf("collects kind %s, which this test has no object of", kind)
		}
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		got[kind] = map[string]string{}
		for _, f := range rule.Fields {
			jp := jsonpath.New(f.Name)
			if err := jp.Parse(f.JSONPath); err != nil {
				t.Errorf("%s field %s: JSONPath %q: %v", kind, f.Name, f.JSONPath, err)
				continue
			}
			res, err := jp.FindResults(u)
			if err != nil || len(res) == 0 || len(res[0]) == 0 {
				t.Errorf("%s field %s: JSONPath %q finds nothing (%v)", kind, f.Name, f.JSONPath, err)
				continue
			}
			got[kind][f.Name] = fmt.Sprint(res[0][0].Interface())
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("indexed fields (-want,+got):\n%s", diff)
	}
}

func TestSearchNeedsTheSearchNamespace(t *testing.T) {
	if _, err := render(t, release{name: "x", namespace: "x", values: `search: {enabled: true, namespace: ""}`}); err == nil {
		t.Error("rendered with search.namespace empty; want an error")
	}
}
