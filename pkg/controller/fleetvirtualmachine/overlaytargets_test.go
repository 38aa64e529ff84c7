package fleetvirtualmachine

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/delivery"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/placement"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/status"
)

// TestOverlayThroughStatusAndTargets follows a relabelled cluster through
// the status (Compute records the overlay) and the ApplicationSet's
// elements (deliveryTargets delivers what the status records): the old
// environment until the new label has held for the grace period, then the
// new one; a newly placed cluster gets its label at once.
func TestOverlayThroughStatusAndTargets(t *testing.T) {
	const grace = 5 * time.Minute
	start := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	r := &Reconciler{Clock: clk, Config: Config{EnvironmentLabel: "env", GracePeriod: grace}}
	fvm := &fleetv1alpha1.FleetVirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}
	labels := map[string]string{"a": "prod", "b": "prod"}
	reconcile := func(clusters ...string) []delivery.Target {
		t.Helper()
		obs := &observation{Facts: map[string]placement.ClusterFacts{}}
		in := status.Inputs{GracePeriod: grace, Outcome: placed(clusters...), Previous: fvm.Status,
			Now: metav1.NewTime(clk.Now()), Clusters: map[string]status.ClusterInfo{}}
		for _, c := range clusters {
			obs.Facts[c] = placement.ClusterFacts{Cluster: &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: c, Labels: map[string]string{"env": labels[c]}}}}
			in.Clusters[c] = status.ClusterInfo{Environment: labels[c], Available: metav1.ConditionTrue}
		}
		fvm.Status = status.Compute(in)
		return r.deliveryTargets(fvm, obs, in.Outcome, nil, nil, nil)
	}
	expect := func(what string, got []delivery.Target, want ...delivery.Target) {
		t.Helper()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: targets (-want,+got):\n%s", what, diff)
		}
	}

	expect("placed", reconcile("a"), delivery.Target{Name: "a", Environment: "prod"})
	labels["a"] = "dev"
	expect("relabelled", reconcile("a"), delivery.Target{Name: "a", Environment: "prod"})
	if e := fvm.Status.Clusters[0]; e.Environment != "prod" || e.PendingEnvironment != "dev" || e.PendingEnvironmentSince == nil ||
		!e.PendingEnvironmentSince.Time.Equal(start) {
		t.Errorf("status entry after the relabel: %+v, want environment prod, pending dev since %v", e, start)
	}
	clk.Step(grace - time.Second)
	labels["b"] = "dev"
	expect("a: label held for less than the grace period; b: newly placed", reconcile("a", "b"),
		delivery.Target{Name: "a", Environment: "prod"}, delivery.Target{Name: "b", Environment: "dev"})
	clk.Step(time.Second)
	expect("label held for the grace period", reconcile("a", "b"),
		delivery.Target{Name: "a", Environment: "dev"}, delivery.Target{Name: "b", Environment: "dev"})
	if e := fvm.Status.Clusters[0]; e.PendingEnvironment != "" || e.PendingEnvironmentSince != nil {
		t.Errorf("status entry after the switch still pending: %+v", e)
	}
	labels["a"] = "prod"
	expect("relabelled back", reconcile("a", "b"),
		delivery.Target{Name: "a", Environment: "dev"}, delivery.Target{Name: "b", Environment: "dev"})
	clk.Step(time.Minute)
	labels["a"] = "dev"
	clk.Step(grace)
	expect("flapped back before the grace period", reconcile("a", "b"),
		delivery.Target{Name: "a", Environment: "dev"}, delivery.Target{Name: "b", Environment: "dev"})
}

// placed is an outcome with the clusters placed.
func placed(clusters ...string) placement.Outcome {
	o := placement.Outcome{Clusters: map[string]placement.Plan{}}
	for _, c := range clusters {
		o.Clusters[c] = placement.Plan{State: placement.Placed}
	}
	return o
}
