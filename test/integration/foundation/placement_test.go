package foundation

import (
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetvm/fleetvm/test/fleetenv"
)

// TestPlacementSelectsProdClusters proves the fleet runs the real OCM
// scheduler: a Placement selecting env=prod over two prod spokes and one dev
// spoke gets a PlacementDecision naming exactly the two prod clusters.
func TestPlacementSelectsProdClusters(t *testing.T) {
	ctx := t.Context()
	f := fleet(t)
	hub := f.Hub.Client

	const ns = "placement-proof"
	for name, env := range map[string]string{"prod-east": "prod", "prod-west": "prod", "dev-1": "dev"} {
		if err := f.RegisterManagedCluster(ctx, fleetenv.ManagedCluster{
			Name: name, Labels: map[string]string{"env": env}, ClusterSet: "proof",
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := fleetenv.BindClusterSet(ctx, hub, "proof", ns); err != nil {
		t.Fatal(err)
	}
	placement := &clusterv1beta1.Placement{
		ObjectMeta: metav1.ObjectMeta{Name: "prod-only", Namespace: ns},
		Spec: clusterv1beta1.PlacementSpec{
			ClusterSets: []string{"proof"},
			Predicates: []clusterv1beta1.ClusterPredicate{{
				RequiredClusterSelector: clusterv1beta1.ClusterSelector{
					LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
				},
			}},
		},
	}
	if err := hub.Create(ctx, placement); err != nil {
		t.Fatalf("create Placement: %v", err)
	}

	want := []string{"prod-east", "prod-west"}
	var got []string
	err := fleetenv.Eventually(ctx, 30*time.Second, func() (bool, error) {
		var decisions clusterv1beta1.PlacementDecisionList
		if err := hub.List(ctx, &decisions, client.InNamespace(ns),
			client.MatchingLabels{clusterv1beta1.PlacementLabel: placement.Name}); err != nil {
			return false, err
		}
		got = nil
		for _, d := range decisions.Items {
			for _, cd := range d.Status.Decisions {
				got = append(got, cd.ClusterName)
			}
		}
		sort.Strings(got)
		return cmp.Equal(want, got), nil
	})
	if err != nil {
		t.Fatalf("PlacementDecision clusters (-want,+got):\n%s\nwaiting: %v", cmp.Diff(want, got), err)
	}

	// The decision is the scheduler's: the Placement's status says so too
	// (OCM writes it right after the decision).
	var p clusterv1beta1.Placement
	err = fleetenv.Eventually(ctx, 30*time.Second, func() (bool, error) {
		if err := hub.Get(ctx, client.ObjectKeyFromObject(placement), &p); err != nil {
			return false, err
		}
		return p.Status.NumberOfSelectedClusters == 2, nil
	})
	if err != nil {
		t.Errorf("Placement status numberOfSelectedClusters = %d, want 2: %v", p.Status.NumberOfSelectedClusters, err)
	}

	// A dev cluster relabelled prod joins the decision: the scheduler reacts
	// to cluster changes, the test never writes decisions.
	var dev clusterv1.ManagedCluster
	if err := hub.Get(ctx, client.ObjectKey{Name: "dev-1"}, &dev); err != nil {
		t.Fatal(err)
	}
	dev.Labels["env"] = "prod"
	if err := hub.Update(ctx, &dev); err != nil {
		t.Fatal(err)
	}
	want = []string{"dev-1", "prod-east", "prod-west"}
	if err := fleetenv.Eventually(ctx, 30*time.Second, func() (bool, error) {
		var decisions clusterv1beta1.PlacementDecisionList
		if err := hub.List(ctx, &decisions, client.InNamespace(ns),
			client.MatchingLabels{clusterv1beta1.PlacementLabel: placement.Name}); err != nil {
			return false, err
		}
		got = nil
		for _, d := range decisions.Items {
			for _, cd := range d.Status.Decisions {
				got = append(got, cd.ClusterName)
			}
		}
		sort.Strings(got)
		return cmp.Equal(want, got), nil
	}); err != nil {
		t.Fatalf("after relabel (-want,+got):\n%s\nwaiting: %v", cmp.Diff(want, got), err)
	}
}
