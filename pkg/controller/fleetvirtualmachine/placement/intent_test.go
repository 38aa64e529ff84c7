package placement

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

func TestIntentFor(t *testing.T) {
	exclusive := func(name string) *clusterv1beta2.ManagedClusterSet {
		return &clusterv1beta2.ManagedClusterSet{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	byLabel := &clusterv1beta2.ManagedClusterSet{
		ObjectMeta: metav1.ObjectMeta{Name: "east"},
		Spec: clusterv1beta2.ManagedClusterSetSpec{ClusterSelector: clusterv1beta2.ManagedClusterSelector{
			SelectorType:  clusterv1beta2.LabelSelector,
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": "east"}},
		}},
	}
	cluster := func(labels map[string]string) ClusterFacts {
		return ClusterFacts{Cluster: &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: labels}}}
	}
	inDefault := map[string]string{clusterv1beta2.ClusterSetLabel: "default", "env": "prod", "region": "east"}
	prod := fleetv1alpha1.FleetPlacement{Environment: "prod"}
	cases := map[string]struct {
		spec  fleetv1alpha1.FleetPlacement
		facts ClusterFacts
		sets  map[string]*clusterv1beta2.ManagedClusterSet
		want  IntentKind
	}{
		"in the set, labels match":            {prod, cluster(inDefault), map[string]*clusterv1beta2.ManagedClusterSet{"default": exclusive("default")}, IntentIncluded},
		"in a set chosen by its own selector": {prod, cluster(inDefault), map[string]*clusterv1beta2.ManagedClusterSet{"east": byLabel}, IntentIncluded},
		"env label changed":                   {prod, cluster(map[string]string{clusterv1beta2.ClusterSetLabel: "default", "env": "dev"}), map[string]*clusterv1beta2.ManagedClusterSet{"default": exclusive("default")}, IntentExcluded},
		"left the set":                        {prod, cluster(map[string]string{clusterv1beta2.ClusterSetLabel: "other", "env": "prod"}), map[string]*clusterv1beta2.ManagedClusterSet{"default": exclusive("default")}, IntentExcluded},
		"the set was deleted":                 {prod, cluster(inDefault), map[string]*clusterv1beta2.ManagedClusterSet{"default": nil}, IntentExcluded},
		"no set bound to the namespace":       {prod, cluster(inDefault), map[string]*clusterv1beta2.ManagedClusterSet{}, IntentExcluded},
		"selector no longer matches": {fleetv1alpha1.FleetPlacement{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": "west"}}},
			cluster(inDefault), map[string]*clusterv1beta2.ManagedClusterSet{"default": exclusive("default")}, IntentExcluded},
		"an invalid selector removes nothing": {fleetv1alpha1.FleetPlacement{ClusterSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "region", Operator: "Near"}}}},
			cluster(inDefault), map[string]*clusterv1beta2.ManagedClusterSet{"default": exclusive("default")}, IntentUnknown},
		"the ManagedCluster is gone":   {prod, ClusterFacts{}, map[string]*clusterv1beta2.ManagedClusterSet{"default": exclusive("default")}, IntentGone},
		"facts unreadable: keep":       {prod, ClusterFacts{Err: errors.New("etcd is away")}, nil, IntentUnknown},
		"unavailable is not an intent": {prod, ClusterFacts{Cluster: &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: inDefault}, Spec: clusterv1.ManagedClusterSpec{Taints: []clusterv1.Taint{{Key: clusterv1.ManagedClusterTaintUnreachable, Effect: clusterv1.TaintEffectNoSelect}}}}}, map[string]*clusterv1beta2.ManagedClusterSet{"default": exclusive("default")}, IntentIncluded},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := IntentFor(tc.spec, "env", tc.facts, tc.sets)
			if got.Kind != tc.want {
				t.Errorf("intent = %v (%q), want %v", got.Kind, got.Reason, tc.want)
			}
			if got.Kind == IntentExcluded && got.Reason == "" {
				t.Error("excluded without a reason")
			}
		})
	}
}
