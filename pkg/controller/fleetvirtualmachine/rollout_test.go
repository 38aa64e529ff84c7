package fleetvirtualmachine

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/placement"
	"github.com/fleetvm/fleetvm/pkg/rollout"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

// TestDecisionGroupsReadTheClusters: the rollout's decision groups come
// from the ManagedClusters of the clusters the VM is delivered to, their
// labels and their cluster claims; a cluster being removed is in none, and
// one whose ManagedCluster is gone matches only an empty selector.
func TestDecisionGroupsReadTheClusters(t *testing.T) {
	fvm := utiltesting.MakeFleetVM("vms", "web").VM(1, "1Gi").Obj()
	fvm.Spec.Placement.DecisionStrategy = &clusterv1beta1.DecisionStrategy{GroupStrategy: clusterv1beta1.GroupStrategy{
		DecisionGroups: []clusterv1beta1.DecisionGroup{
			{GroupName: "canary", ClusterSelector: clusterv1beta1.GroupClusterSelector{
				LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"ring": "canary"}}}},
			{GroupName: "edge", ClusterSelector: clusterv1beta1.GroupClusterSelector{
				ClaimSelector: clusterv1beta1.ClusterClaimSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "platform.open-cluster-management.io", Operator: metav1.LabelSelectorOpIn, Values: []string{"BareMetal"}}}}}},
		},
	}}
	mc := func(name string, labels map[string]string, claims ...clusterv1.ManagedClusterClaim) placement.ClusterFacts {
		return placement.ClusterFacts{Cluster: &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Status: clusterv1.ManagedClusterStatus{ClusterClaims: claims}}}
	}
	s := &scope{fvm: fvm,
		obs: &observation{Facts: map[string]placement.ClusterFacts{
			"a": mc("a", map[string]string{"ring": "canary"}),
			"b": mc("b", nil, clusterv1.ManagedClusterClaim{Name: "platform.open-cluster-management.io", Value: "BareMetal"}),
			"c": mc("c", nil),
			"d": mc("d", map[string]string{"ring": "canary"}),
		}},
		outcome: placement.Outcome{Clusters: map[string]placement.Plan{
			"a": {State: placement.Placed}, "b": {State: placement.Placed}, "c": {State: placement.Placed},
			"d": {State: placement.Removing}, "gone": {State: placement.Placed},
		}},
	}
	got, err := decisionGroups(s, s.outcome.Delivered())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]rollout.Group{
		"a": {Name: "canary", Index: 0}, "b": {Name: "edge", Index: 1}, "c": {Index: 2}, "gone": {Index: 2},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decision groups (-want +got):\n%s", diff)
	}
}

// TestSoakBroken: the RolloutSoakRestarted event names why a soaking
// cluster is not counted ready on its revision.
func TestSoakBroken(t *testing.T) {
	ready := &fleetv1alpha1.VMState{Generation: 2, ObservedGeneration: 2, Ready: true, PrintableStatus: "Running"}
	cases := []struct {
		rc        rollout.Cluster
		rep       *fleetv1alpha1.VMState
		available metav1.ConditionStatus
		want      string
	}{
		{rollout.Cluster{Given: 2}, nil, metav1.ConditionTrue, "reports no VM"},
		{rollout.Cluster{Given: 2}, ready, metav1.ConditionUnknown, "not available (Unknown)"},
		{rollout.Cluster{Given: 2}, &fleetv1alpha1.VMState{Generation: 3, ObservedGeneration: 2}, metav1.ConditionTrue, "generation 3, observed 2"},
		{rollout.Cluster{Given: 2, Running: 1}, ready, metav1.ConditionTrue, "runs revision 1"},
		{rollout.Cluster{Given: 2, Running: 2, Failure: "CrashLoopBackOff"}, ready, metav1.ConditionTrue, "reports CrashLoopBackOff"},
		{rollout.Cluster{Given: 2, Running: 2, RestartRequired: true}, ready, metav1.ConditionTrue, "RestartRequired"},
		{rollout.Cluster{Given: 2, Running: 2}, &fleetv1alpha1.VMState{Generation: 2, ObservedGeneration: 2, PrintableStatus: "Starting"}, metav1.ConditionTrue, "not ready (Starting)"},
	}
	for _, tc := range cases {
		if got := soakBroken(tc.rc, tc.rep, tc.available); !strings.Contains(got, tc.want) {
			t.Errorf("soakBroken(%+v, %+v, %s) = %q, want it to say %q", tc.rc, tc.rep, tc.available, got, tc.want)
		}
	}
}
