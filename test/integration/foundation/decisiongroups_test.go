package foundation

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetvm/fleetvm/pkg/rollout"
	"github.com/fleetvm/fleetvm/test/fleetenv"
)

// TestDecisionGroupsAsOCMDividesThem: rollout.Groups, which divides a
// FleetVM's clusters by spec.placement.decisionStrategy, gives each
// cluster the decision group the real OCM scheduler gives it in a
// Placement's decision with the same strategy (the decision-group-index
// and -name labels of its PlacementDecision): named groups in order, a
// cluster in the first that matches, the rest unnamed, groups split by
// clustersPerDecisionGroup as a count and as a percentage.
func TestDecisionGroupsAsOCMDividesThem(t *testing.T) {
	ctx := t.Context()
	f := fleet(t)
	hub := f.Hub.Client
	const ns, set = "decision-groups", "groups"
	labels := map[string]map[string]string{
		"grp-ap-1": {"region": "ap"},
		"grp-eu-1": {"region": "eu", "ring": "canary"},
		"grp-eu-2": {"region": "eu"},
		"grp-eu-3": {"region": "eu"},
		"grp-us-1": {"region": "us", "ring": "canary"},
		"grp-us-2": {"region": "us"},
		"grp-us-3": {"region": "us"},
	}
	var members []rollout.Member
	for name, l := range labels {
		if err := f.RegisterManagedCluster(ctx, fleetenv.ManagedCluster{Name: name, Labels: l, ClusterSet: set}); err != nil {
			t.Fatal(err)
		}
		members = append(members, rollout.Member{Name: name, Labels: l})
	}
	if err := fleetenv.BindClusterSet(ctx, hub, set, ns); err != nil {
		t.Fatal(err)
	}
	group := func(name string, l map[string]string) clusterv1beta1.DecisionGroup {
		return clusterv1beta1.DecisionGroup{GroupName: name, ClusterSelector: clusterv1beta1.GroupClusterSelector{
			LabelSelector: metav1.LabelSelector{MatchLabels: l}}}
	}
	for name, s := range map[string]clusterv1beta1.DecisionStrategy{
		"canary-then-eu": {GroupStrategy: clusterv1beta1.GroupStrategy{DecisionGroups: []clusterv1beta1.DecisionGroup{
			group("canary", map[string]string{"ring": "canary"}), group("eu", map[string]string{"region": "eu"})}}},
		"two-per-group": {GroupStrategy: clusterv1beta1.GroupStrategy{ClustersPerDecisionGroup: intstr.FromInt32(2),
			DecisionGroups: []clusterv1beta1.DecisionGroup{group("eu", map[string]string{"region": "eu"}), group("moon", map[string]string{"region": "moon"})}}},
		"thirty-percent": {GroupStrategy: clusterv1beta1.GroupStrategy{ClustersPerDecisionGroup: intstr.FromString("30%"),
			DecisionGroups: []clusterv1beta1.DecisionGroup{group("canary", map[string]string{"ring": "canary"})}}},
	} {
		t.Run(name, func(t *testing.T) {
			want, err := rollout.Groups(&s, members)
			if err != nil {
				t.Fatal(err)
			}
			p := &clusterv1beta1.Placement{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec:       clusterv1beta1.PlacementSpec{ClusterSets: []string{set}, DecisionStrategy: s},
			}
			if err := hub.Create(ctx, p); err != nil {
				t.Fatal(err)
			}
			var got map[string]rollout.Group
			if err := fleetenv.Eventually(ctx, 30*time.Second, func() (bool, error) {
				var decisions clusterv1beta1.PlacementDecisionList
				if err := hub.List(ctx, &decisions, client.InNamespace(ns), client.MatchingLabels{clusterv1beta1.PlacementLabel: name}); err != nil {
					return false, err
				}
				got = map[string]rollout.Group{}
				for _, d := range decisions.Items {
					index, err := strconv.Atoi(d.Labels[clusterv1beta1.DecisionGroupIndexLabel])
					if err != nil {
						return false, fmt.Errorf("PlacementDecision %s: group index: %w", d.Name, err)
					}
					for _, cd := range d.Status.Decisions {
						got[cd.ClusterName] = rollout.Group{Name: d.Labels[clusterv1beta1.DecisionGroupNameLabel], Index: int32(index)}
					}
				}
				return len(got) == len(labels), nil
			}); err != nil {
				t.Fatalf("OCM decided %d of %d clusters: %v", len(got), len(labels), err)
			}
			if diff := cmp.Diff(got, want); diff != "" {
				t.Errorf("decision groups (-OCM's +rollout.Groups'):\n%s", diff)
			}
		})
	}
}
