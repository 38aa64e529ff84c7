// Package metrics checks the fleet metrics as fleetvm-hub serves them: the
// collector registered with pkg/metrics.Register on a real manager's cache,
// against a real hub API server.
package metrics

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/drain"
	"github.com/fleetvm/fleetvm/pkg/hub"
	fleetmetrics "github.com/fleetvm/fleetvm/pkg/metrics"
	"github.com/fleetvm/fleetvm/test/agenttest"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/fleetrun"
)

const wait = 30 * time.Second

var fleet *fleetenv.Fleet

// TestMain starts a hub and, as cmd/fleetvm-hub builds its manager,
// without reconcilers, the metrics collector: it reads what the cache
// holds.
func TestMain(m *testing.M) {
	os.Exit(fleetrun.Main(m, fleetrun.Suite{
		Fleet: fleetenv.Options{NoPlacementController: true, Scheme: agenttest.APIScheme()},
		Setup: func(ctx context.Context, f *fleetenv.Fleet) (func() error, error) {
			fleet = f
			mgr, err := ctrl.NewManager(f.Hub.Config, ctrl.Options{
				Scheme:  hub.Scheme(),
				Cache:   hub.CacheOptions(f.Hub.Config, "argocd"),
				Client:  hub.ClientOptions(),
				Metrics: metricsserver.Options{BindAddress: "0"},
			})
			if err == nil {
				err = fleetmetrics.Register(mgr.GetCache())
			}
			if err != nil {
				return nil, err
			}
			runners := fleetrun.Runners{}
			runners.Go("manager", func() error { return mgr.Start(ctx) })
			return runners.Wait, nil
		},
	}))
}

func TestFleetMetricsFromTheCache(t *testing.T) {
	ctx := t.Context()
	c := fleet.Hub.Client
	if err := fleet.Hub.Tenant(ctx, "vms"); err != nil {
		t.Fatal(err)
	}
	fvm := &fleetv1alpha1.FleetVirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "web"},
		Spec: fleetv1alpha1.FleetVirtualMachineSpec{
			Template: &runtime.RawExtension{Raw: []byte(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine",
"spec":{"template":{"spec":{"domain":{"memory":{"guest":"2Gi"},"devices":{}}}}}}`)},
			Placement: fleetv1alpha1.FleetPlacement{Environment: "prod"},
		},
	}
	if err := c.Create(ctx, fvm); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	fvm.Status = fleetv1alpha1.FleetVirtualMachineStatus{
		ObservedGeneration: fvm.Generation,
		Conditions: []metav1.Condition{
			{Type: fleetv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: fleetv1alpha1.ReasonSomeNotReady, LastTransitionTime: now},
		},
		Clusters: []fleetv1alpha1.ClusterStatus{
			{Cluster: "prod-a", Phase: fleetv1alpha1.ClusterPhaseRunning, Ready: true},
			{Cluster: "prod-b", Phase: fleetv1alpha1.ClusterPhaseFailed},
		},
		Summary: fleetv1alpha1.FleetSummary{Desired: 2, Placed: 2, Ready: 1, Running: 1, Failed: 1},
	}
	if err := c.Status().Update(ctx, fvm); err != nil {
		t.Fatal(err)
	}
	fdi := &fleetv1alpha1.FleetDiskImage{
		ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "rhel9"},
		Spec: fleetv1alpha1.FleetDiskImageSpec{
			Source:  fleetv1alpha1.DiskImageSource{HTTP: &fleetv1alpha1.HTTPSource{URL: "https://images.example.com/rhel9.qcow2"}},
			Storage: fleetv1alpha1.DiskImageStorage{Size: resource.MustParse("30Gi")},
		},
	}
	if err := c.Create(ctx, fdi); err != nil {
		t.Fatal(err)
	}
	fdi.Status = fleetv1alpha1.FleetDiskImageStatus{Clusters: []fleetv1alpha1.ImageClusterStatus{
		{Cluster: "prod-a", Phase: fleetv1alpha1.ImagePhaseReady, References: 3},
	}}
	if err := c.Status().Update(ctx, fdi); err != nil {
		t.Fatal(err)
	}

	// prod-a drains: the drain taint, and a move its drain made.
	taintAdded := metav1.NewTime(now.Add(-time.Hour).Truncate(time.Second))
	mc := &clusterv1.ManagedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "prod-a"},
		Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true, Taints: []clusterv1.Taint{{
			Key: fleetv1alpha1.DrainTaintKey, Effect: clusterv1.TaintEffectNoSelectIfNew, TimeAdded: taintAdded,
		}}},
	}
	if err := c.Create(ctx, mc); err != nil {
		t.Fatal(err)
	}
	mv := &fleetv1alpha1.FleetVirtualMachineMove{
		ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "web-off-prod-a",
			Labels:      map[string]string{fleetv1alpha1.LabelDrain: "prod-a"},
			Annotations: map[string]string{drain.AnnotationCluster: string(mc.UID)}},
		Spec: fleetv1alpha1.FleetVirtualMachineMoveSpec{FleetVirtualMachine: "web", From: "prod-a"},
	}
	if err := c.Create(ctx, mv); err != nil {
		t.Fatal(err)
	}
	started := metav1.NewTime(now.Add(-10 * time.Minute).Truncate(time.Second))
	mv.Status = fleetv1alpha1.FleetVirtualMachineMoveStatus{Phase: fleetv1alpha1.MoveCopying, Method: fleetv1alpha1.MoveMethod("Cold"), To: "prod-b", StartTime: &started}
	if err := c.Status().Update(ctx, mv); err != nil {
		t.Fatal(err)
	}
	// The move's default timeout (15m) runs from its start.
	deadline := float64(started.Add(15 * time.Minute).Unix())

	want := `
# HELP fleetvm_diskimage_references VMs on a cluster, fleet-managed or not, that use a FleetDiskImage (status.clusters[].references).
# TYPE fleetvm_diskimage_references gauge
fleetvm_diskimage_references{cluster="prod-a",image="rhel9",namespace="vms"} 3
# HELP fleetvm_fleetvirtualmachine_clusters_ready Clusters where a FleetVirtualMachine's VM is running and ready (status.summary.ready).
# TYPE fleetvm_fleetvirtualmachine_clusters_ready gauge
fleetvm_fleetvirtualmachine_clusters_ready{name="web",namespace="vms"} 1
# HELP fleetvm_metrics_list_errors_total Scrapes in which reading a kind from the hub's cache failed; that kind's fleetvm_ series were left out.
# TYPE fleetvm_metrics_list_errors_total counter
fleetvm_metrics_list_errors_total{kind="FleetDiskImage"} 0
fleetvm_metrics_list_errors_total{kind="FleetVirtualMachine"} 0
fleetvm_metrics_list_errors_total{kind="FleetVirtualMachineMove"} 0
fleetvm_metrics_list_errors_total{kind="ImageInventory"} 0
fleetvm_metrics_list_errors_total{kind="ManagedCluster"} 0
# HELP fleetvm_drain_copies FleetVirtualMachine copies still on a cluster that carries the drain taint (fleetvm.io/drain).
# TYPE fleetvm_drain_copies gauge
fleetvm_drain_copies{cluster="prod-a"} 1
# HELP fleetvm_drain_last_progress_timestamp_seconds When a draining cluster's drain last moved on: the drain taint's timeAdded, or the latest start or end of a move its drain made, whichever is later.
# TYPE fleetvm_drain_last_progress_timestamp_seconds gauge
fleetvm_drain_last_progress_timestamp_seconds{cluster="prod-a"} ` + fmt.Sprint(float64(started.Unix())) + `
# HELP fleetvm_move_phase 1 for each FleetVirtualMachineMove, labelled with its current phase and method.
# TYPE fleetvm_move_phase gauge
fleetvm_move_phase{fleetvirtualmachine="web",method="Cold",name="web-off-prod-a",namespace="vms",phase="Copying"} 1
# HELP fleetvm_move_deadline_timestamp_seconds When a FleetVirtualMachineMove that has not ended passes its timeout: from its start, or from when it began waiting while Pending.
# TYPE fleetvm_move_deadline_timestamp_seconds gauge
fleetvm_move_deadline_timestamp_seconds{name="web-off-prod-a",namespace="vms"} ` + fmt.Sprint(deadline) + `
`
	names := []string{"fleetvm_diskimage_references", "fleetvm_fleetvirtualmachine_clusters_ready", "fleetvm_metrics_list_errors_total",
		"fleetvm_drain_copies", "fleetvm_drain_last_progress_timestamp_seconds", "fleetvm_move_phase", "fleetvm_move_deadline_timestamp_seconds"}
	var last error
	// The cache follows the API server asynchronously: scrape until it has.
	err := fleetenv.Eventually(ctx, wait, func() (bool, error) {
		last = testutil.GatherAndCompare(ctrlmetrics.Registry, strings.NewReader(want), names...)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("scrapes never showed the fleet: %v\n%v", err, last)
	}
	// Running on prod-a, Failed on prod-b: one series per phase there is.
	if n, err := testutil.GatherAndCount(ctrlmetrics.Registry, "fleetvm_fleetvirtualmachine_clusters"); err != nil || n != 2 {
		t.Errorf("fleetvm_fleetvirtualmachine_clusters: %d series (err %v), want one per phase its clusters are in (2)", n, err)
	}
}
