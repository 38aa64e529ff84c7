package metrics

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/drain"
)

func scheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := fleetv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := clusterv1.Install(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func cond(typ string, status metav1.ConditionStatus) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: "Test", LastTransitionTime: metav1.Now()}
}

func entry(cluster string, phase fleetv1alpha1.ClusterPhase, ready bool) fleetv1alpha1.ClusterStatus {
	return fleetv1alpha1.ClusterStatus{Cluster: cluster, Phase: phase, Ready: ready}
}

// fleet is two namespaces of FleetVirtualMachines and two disk images.
func fleet() []client.Object {
	return []client.Object{
		&fleetv1alpha1.FleetVirtualMachine{
			ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "web"},
			Status: fleetv1alpha1.FleetVirtualMachineStatus{
				Conditions: []metav1.Condition{
					cond(fleetv1alpha1.ConditionReady, metav1.ConditionFalse),
					cond(fleetv1alpha1.ConditionPlaced, metav1.ConditionTrue),
					cond(fleetv1alpha1.ConditionDelivered, metav1.ConditionTrue),
					cond(fleetv1alpha1.ConditionAvailable, metav1.ConditionTrue),
					cond(fleetv1alpha1.ConditionDegraded, metav1.ConditionFalse),
				},
				Clusters: []fleetv1alpha1.ClusterStatus{
					entry("prod-a", fleetv1alpha1.ClusterPhaseRunning, true),
					entry("prod-b", fleetv1alpha1.ClusterPhaseStarting, false),
					entry("prod-c", fleetv1alpha1.ClusterPhaseRunning, false),
					entry("old", fleetv1alpha1.ClusterPhaseLeaving, true),
					entry("odd", "", false),
				},
				Summary: fleetv1alpha1.FleetSummary{Desired: 3, Placed: 3, Ready: 1, Running: 2},
			},
		},
		// No status yet: every condition counts as Unknown.
		&fleetv1alpha1.FleetVirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "db"}},
		&fleetv1alpha1.FleetVirtualMachine{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "batch"},
			Status: fleetv1alpha1.FleetVirtualMachineStatus{
				Conditions: []metav1.Condition{
					cond(fleetv1alpha1.ConditionReady, metav1.ConditionTrue),
					cond(fleetv1alpha1.ConditionDegraded, metav1.ConditionTrue),
				},
				Clusters: []fleetv1alpha1.ClusterStatus{entry("dev-a", fleetv1alpha1.ClusterPhaseStopped, false)},
				Summary:  fleetv1alpha1.FleetSummary{Desired: 1, Placed: 1},
			},
		},
		&fleetv1alpha1.FleetDiskImage{
			ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "rhel9"},
			Status: fleetv1alpha1.FleetDiskImageStatus{Clusters: []fleetv1alpha1.ImageClusterStatus{
				{Cluster: "prod-a", Phase: fleetv1alpha1.ImagePhaseReady, References: 2},
				{Cluster: "prod-b", Phase: fleetv1alpha1.ImagePhaseImporting},
				{Cluster: "dev-a", References: 1},
			}},
		},
		&fleetv1alpha1.FleetDiskImage{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "win10"}},
	}
}

const fleetVMsWant = `
# HELP fleetvm_fleetvirtualmachines FleetVirtualMachines by namespace and by the status of each condition (Ready, Placed, Delivered, Available, Degraded); a missing condition counts as Unknown.
# TYPE fleetvm_fleetvirtualmachines gauge
fleetvm_fleetvirtualmachines{condition="Available",namespace="apps",status="False"} 0
fleetvm_fleetvirtualmachines{condition="Available",namespace="apps",status="True"} 0
fleetvm_fleetvirtualmachines{condition="Available",namespace="apps",status="Unknown"} 1
fleetvm_fleetvirtualmachines{condition="Degraded",namespace="apps",status="False"} 0
fleetvm_fleetvirtualmachines{condition="Degraded",namespace="apps",status="True"} 1
fleetvm_fleetvirtualmachines{condition="Degraded",namespace="apps",status="Unknown"} 0
fleetvm_fleetvirtualmachines{condition="Delivered",namespace="apps",status="False"} 0
fleetvm_fleetvirtualmachines{condition="Delivered",namespace="apps",status="True"} 0
fleetvm_fleetvirtualmachines{condition="Delivered",namespace="apps",status="Unknown"} 1
fleetvm_fleetvirtualmachines{condition="Placed",namespace="apps",status="False"} 0
fleetvm_fleetvirtualmachines{condition="Placed",namespace="apps",status="True"} 0
fleetvm_fleetvirtualmachines{condition="Placed",namespace="apps",status="Unknown"} 1
fleetvm_fleetvirtualmachines{condition="Ready",namespace="apps",status="False"} 0
fleetvm_fleetvirtualmachines{condition="Ready",namespace="apps",status="True"} 1
fleetvm_fleetvirtualmachines{condition="Ready",namespace="apps",status="Unknown"} 0
fleetvm_fleetvirtualmachines{condition="Available",namespace="vms",status="False"} 0
fleetvm_fleetvirtualmachines{condition="Available",namespace="vms",status="True"} 1
fleetvm_fleetvirtualmachines{condition="Available",namespace="vms",status="Unknown"} 1
fleetvm_fleetvirtualmachines{condition="Degraded",namespace="vms",status="False"} 1
fleetvm_fleetvirtualmachines{condition="Degraded",namespace="vms",status="True"} 0
fleetvm_fleetvirtualmachines{condition="Degraded",namespace="vms",status="Unknown"} 1
fleetvm_fleetvirtualmachines{condition="Delivered",namespace="vms",status="False"} 0
fleetvm_fleetvirtualmachines{condition="Delivered",namespace="vms",status="True"} 1
fleetvm_fleetvirtualmachines{condition="Delivered",namespace="vms",status="Unknown"} 1
fleetvm_fleetvirtualmachines{condition="Placed",namespace="vms",status="False"} 0
fleetvm_fleetvirtualmachines{condition="Placed",namespace="vms",status="True"} 1
fleetvm_fleetvirtualmachines{condition="Placed",namespace="vms",status="Unknown"} 1
fleetvm_fleetvirtualmachines{condition="Ready",namespace="vms",status="False"} 1
fleetvm_fleetvirtualmachines{condition="Ready",namespace="vms",status="True"} 0
fleetvm_fleetvirtualmachines{condition="Ready",namespace="vms",status="Unknown"} 1
`

const clustersWant = `
# HELP fleetvm_fleetvirtualmachine_clusters Clusters of a FleetVirtualMachine by the phase of the VM there (status.clusters); only phases with at least one cluster have a series.
# TYPE fleetvm_fleetvirtualmachine_clusters gauge
fleetvm_fleetvirtualmachine_clusters{name="batch",namespace="apps",phase="Stopped"} 1
fleetvm_fleetvirtualmachine_clusters{name="web",namespace="vms",phase="Leaving"} 1
fleetvm_fleetvirtualmachine_clusters{name="web",namespace="vms",phase="Running"} 2
fleetvm_fleetvirtualmachine_clusters{name="web",namespace="vms",phase="Starting"} 1
fleetvm_fleetvirtualmachine_clusters{name="web",namespace="vms",phase="Unknown"} 1
# HELP fleetvm_fleetvirtualmachine_clusters_desired Clusters a FleetVirtualMachine asks for (status.summary.desired).
# TYPE fleetvm_fleetvirtualmachine_clusters_desired gauge
fleetvm_fleetvirtualmachine_clusters_desired{name="batch",namespace="apps"} 1
fleetvm_fleetvirtualmachine_clusters_desired{name="db",namespace="vms"} 0
fleetvm_fleetvirtualmachine_clusters_desired{name="web",namespace="vms"} 3
# HELP fleetvm_fleetvirtualmachine_clusters_ready Clusters where a FleetVirtualMachine's VM is running and ready (status.summary.ready).
# TYPE fleetvm_fleetvirtualmachine_clusters_ready gauge
fleetvm_fleetvirtualmachine_clusters_ready{name="batch",namespace="apps"} 0
fleetvm_fleetvirtualmachine_clusters_ready{name="db",namespace="vms"} 0
fleetvm_fleetvirtualmachine_clusters_ready{name="web",namespace="vms"} 1
`

const imagesWant = `
# HELP fleetvm_diskimage_clusters Clusters a FleetDiskImage is on, by the image's phase there.
# TYPE fleetvm_diskimage_clusters gauge
fleetvm_diskimage_clusters{image="rhel9",namespace="vms",phase="Failed"} 0
fleetvm_diskimage_clusters{image="rhel9",namespace="vms",phase="Importing"} 1
fleetvm_diskimage_clusters{image="rhel9",namespace="vms",phase="Pending"} 1
fleetvm_diskimage_clusters{image="rhel9",namespace="vms",phase="Pruning"} 0
fleetvm_diskimage_clusters{image="rhel9",namespace="vms",phase="Ready"} 1
fleetvm_diskimage_clusters{image="win10",namespace="apps",phase="Failed"} 0
fleetvm_diskimage_clusters{image="win10",namespace="apps",phase="Importing"} 0
fleetvm_diskimage_clusters{image="win10",namespace="apps",phase="Pending"} 0
fleetvm_diskimage_clusters{image="win10",namespace="apps",phase="Pruning"} 0
fleetvm_diskimage_clusters{image="win10",namespace="apps",phase="Ready"} 0
# HELP fleetvm_diskimage_references VMs on a cluster, fleet-managed or not, that use a FleetDiskImage (status.clusters[].references).
# TYPE fleetvm_diskimage_references gauge
fleetvm_diskimage_references{cluster="dev-a",image="rhel9",namespace="vms"} 1
fleetvm_diskimage_references{cluster="prod-a",image="rhel9",namespace="vms"} 2
fleetvm_diskimage_references{cluster="prod-b",image="rhel9",namespace="vms"} 0
`

func errorsWant(fvm, fdi int) string {
	return strings.NewReplacer("FVM", strconv.Itoa(fvm), "FDI", strconv.Itoa(fdi)).Replace(`
# HELP fleetvm_metrics_list_errors_total Scrapes in which reading a kind from the hub's cache failed; that kind's fleetvm_ series were left out.
# TYPE fleetvm_metrics_list_errors_total counter
fleetvm_metrics_list_errors_total{kind="FleetDiskImage"} FDI
fleetvm_metrics_list_errors_total{kind="FleetVirtualMachine"} FVM
fleetvm_metrics_list_errors_total{kind="FleetVirtualMachineMove"} 0
fleetvm_metrics_list_errors_total{kind="ImageInventory"} 0
fleetvm_metrics_list_errors_total{kind="ManagedCluster"} 0
`)
}

func TestCollector(t *testing.T) {
	c := NewCollector(fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(fleet()...).Build(), logr.Discard())
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	for name, tc := range map[string]struct {
		want  string
		names []string
	}{
		"FleetVirtualMachines by namespace and condition": {fleetVMsWant, []string{"fleetvm_fleetvirtualmachines"}},
		"clusters per FleetVirtualMachine": {clustersWant, []string{
			"fleetvm_fleetvirtualmachine_clusters", "fleetvm_fleetvirtualmachine_clusters_desired", "fleetvm_fleetvirtualmachine_clusters_ready"}},
		"disk images":    {imagesWant, []string{"fleetvm_diskimage_clusters", "fleetvm_diskimage_references"}},
		"no read errors": {errorsWant(0, 0), []string{"fleetvm_metrics_list_errors_total"}},
	} {
		t.Run(name, func(t *testing.T) {
			if err := testutil.GatherAndCompare(reg, strings.NewReader(tc.want), tc.names...); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestCardinality: each FleetVirtualMachine has one series per cluster
// phase its clusters are in, however many clusters it is on: a fleet that
// runs everywhere has one per FleetVirtualMachine, not one per phase.
func TestCardinality(t *testing.T) {
	var objs []client.Object
	for i := range 20 {
		f := &fleetv1alpha1.FleetVirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: fmt.Sprintf("vm-%d", i)}}
		for j := range 50 {
			phase := fleetv1alpha1.ClusterPhaseRunning
			if i == 0 && j%2 == 1 {
				phase = fleetv1alpha1.ClusterPhaseStarting // vm-0: two phases
			}
			f.Status.Clusters = append(f.Status.Clusters, entry(fmt.Sprintf("cluster-%d", j), phase, true))
		}
		objs = append(objs, f)
	}
	c := NewCollector(fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(objs...).Build(), logr.Discard())
	if got, want := testutil.CollectAndCount(c, "fleetvm_fleetvirtualmachine_clusters"), 21; got != want {
		t.Errorf("fleetvm_fleetvirtualmachine_clusters has %d series, want %d", got, want)
	}
	for _, name := range []string{"fleetvm_fleetvirtualmachine_clusters_desired", "fleetvm_fleetvirtualmachine_clusters_ready"} {
		if got := testutil.CollectAndCount(c, name); got != 20 {
			t.Errorf("%s has %d series, want one per FleetVirtualMachine (20)", name, got)
		}
	}
	if got, want := testutil.CollectAndCount(c, "fleetvm_fleetvirtualmachines"), len(conditionTypes)*len(conditionStatuses); got != want {
		t.Errorf("fleetvm_fleetvirtualmachines has %d series for one namespace, want %d", got, want)
	}
}

// TestReadFailure: a kind the cache cannot list is left out and counted;
// the scrape itself, and the other kind, still work.
func TestReadFailure(t *testing.T) {
	cl := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(fleet()...).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*fleetv1alpha1.FleetDiskImageList); ok {
				return errors.New("fleetdiskimages is forbidden")
			}
			return c.List(ctx, list, opts...)
		},
	}).Build()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(cl, logr.Discard()))
	for range 2 {
		if _, err := reg.Gather(); err != nil {
			t.Fatalf("a failed read failed the scrape: %v", err)
		}
	}
	// The third scrape is the one compared: two before it failed too.
	if err := testutil.GatherAndCompare(reg, strings.NewReader(errorsWant(0, 3)), "fleetvm_metrics_list_errors_total"); err != nil {
		t.Error(err)
	}
	if n, err := testutil.GatherAndCount(reg, "fleetvm_diskimage_references", "fleetvm_diskimage_clusters"); err != nil || n != 0 {
		t.Errorf("disk image series after a failed read: %d (err %v), want none", n, err)
	}
	if n, err := testutil.GatherAndCount(reg, "fleetvm_fleetvirtualmachine_clusters_desired"); err != nil || n != 3 {
		t.Errorf("FleetVirtualMachine series: %d (err %v), want 3", n, err)
	}
}

// TestRegister: Register puts the collector in controller-runtime's
// registry, the one fleetvm-hub's metrics endpoint serves.
func TestRegister(t *testing.T) {
	cl := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(fleet()...).Build()
	if err := Register(cl); err != nil {
		t.Fatalf("Register: %v", err)
	}
	// A collector with the same descriptors is the same collector to the registry.
	t.Cleanup(func() { ctrlmetrics.Registry.Unregister(NewCollector(cl, logr.Discard())) })
	want := `
# HELP fleetvm_fleetvirtualmachine_clusters_ready Clusters where a FleetVirtualMachine's VM is running and ready (status.summary.ready).
# TYPE fleetvm_fleetvirtualmachine_clusters_ready gauge
fleetvm_fleetvirtualmachine_clusters_ready{name="batch",namespace="apps"} 0
fleetvm_fleetvirtualmachine_clusters_ready{name="db",namespace="vms"} 0
fleetvm_fleetvirtualmachine_clusters_ready{name="web",namespace="vms"} 1
`
	if err := testutil.GatherAndCompare(ctrlmetrics.Registry, strings.NewReader(want), "fleetvm_fleetvirtualmachine_clusters_ready"); err != nil {
		t.Error(err)
	}
	var already prometheus.AlreadyRegisteredError
	if err := Register(cl); !errors.As(err, &already) {
		t.Errorf("second Register: %v, want AlreadyRegisteredError", err)
	}
}

// operations is a fleet in motion: a cluster draining, moves, agents'
// heartbeats and an image left unused.
func operations() []client.Object {
	at := func(s string) *metav1.Time {
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			panic(err)
		}
		return &metav1.Time{Time: t}
	}
	draining := &clusterv1.ManagedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "prod-a", UID: "uid-a"},
		Spec: clusterv1.ManagedClusterSpec{Taints: []clusterv1.Taint{{
			Key: fleetv1alpha1.DrainTaintKey, Effect: clusterv1.TaintEffectNoSelectIfNew, TimeAdded: *at("2026-11-27T10:00:00Z"),
		}}},
	}
	drainMove := func(name string, phase fleetv1alpha1.MovePhase, start, end *metav1.Time, uid string) *fleetv1alpha1.FleetVirtualMachineMove {
		return &fleetv1alpha1.FleetVirtualMachineMove{
			ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: name,
				Labels:      map[string]string{fleetv1alpha1.LabelDrain: "prod-a"},
				Annotations: map[string]string{drain.AnnotationCluster: uid}},
			Spec:   fleetv1alpha1.FleetVirtualMachineMoveSpec{FleetVirtualMachine: name, From: "prod-a", Method: fleetv1alpha1.MoveMethod("Auto")},
			Status: fleetv1alpha1.FleetVirtualMachineMoveStatus{Phase: phase, Method: "Cold", StartTime: start, CompletionTime: end},
		}
	}
	return []client.Object{
		draining,
		&clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "prod-b", UID: "uid-b"}},
		&fleetv1alpha1.FleetVirtualMachine{
			ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "web"},
			Status: fleetv1alpha1.FleetVirtualMachineStatus{
				Clusters: []fleetv1alpha1.ClusterStatus{
					{Cluster: "prod-a", Environment: "prod", Phase: fleetv1alpha1.ClusterPhaseRunning},
					{Cluster: "prod-b", Environment: "prod", Phase: fleetv1alpha1.ClusterPhaseStarting},
				},
				Placement: &fleetv1alpha1.PlacementStatus{Excluded: []fleetv1alpha1.ExclusionCount{
					{Reason: "Environment", Count: 3}, {Reason: "NoRoom", Count: 1},
				}},
			},
		},
		&fleetv1alpha1.FleetVirtualMachine{
			ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "db"},
			Status: fleetv1alpha1.FleetVirtualMachineStatus{
				Clusters:  []fleetv1alpha1.ClusterStatus{{Cluster: "prod-a", Environment: "prod", Phase: fleetv1alpha1.ClusterPhaseRunning}},
				Placement: &fleetv1alpha1.PlacementStatus{Excluded: []fleetv1alpha1.ExclusionCount{{Reason: "Environment", Count: 3}}},
			},
		},
		// The drain's: one ended at 10:20, one started at 10:30 (its
		// progress: 1795775400).
		drainMove("web", fleetv1alpha1.MoveCopying, at("2026-11-27T10:30:00Z"), nil, "uid-a"),
		drainMove("old", fleetv1alpha1.MoveSucceeded, at("2026-11-27T10:05:00Z"), at("2026-11-27T10:20:00Z"), "uid-a"),
		// A team's move that only carries the drain's label: not the drain's.
		drainMove("forged", fleetv1alpha1.MoveSucceeded, at("2026-11-27T10:40:00Z"), at("2026-11-27T11:00:00Z"), ""),
		// Waiting to start since 10:00, with a 30m timeout.
		&fleetv1alpha1.FleetVirtualMachineMove{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "batch-to-b"},
			Spec: fleetv1alpha1.FleetVirtualMachineMoveSpec{FleetVirtualMachine: "batch", From: "dev-a", To: "dev-b",
				Method: "Live", Timeout: &metav1.Duration{Duration: 30 * time.Minute}},
			Status: fleetv1alpha1.FleetVirtualMachineMoveStatus{Phase: fleetv1alpha1.MovePending, PendingTime: at("2026-11-27T10:00:00Z")},
		},
		// Not seen by the hub yet: Pending, no deadline.
		&fleetv1alpha1.FleetVirtualMachineMove{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "new"},
			Spec:       fleetv1alpha1.FleetVirtualMachineMoveSpec{FleetVirtualMachine: "batch", From: "dev-a", Method: "Auto"},
		},
		&fleetv1alpha1.ImageInventory{ObjectMeta: metav1.ObjectMeta{Namespace: "prod-a", Name: fleetv1alpha1.ImageInventoryName},
			Spec: fleetv1alpha1.ImageInventorySpec{ObservedTime: at("2026-11-27T11:00:00Z")}},
		// Not an inventory the agent writes.
		&fleetv1alpha1.ImageInventory{ObjectMeta: metav1.ObjectMeta{Namespace: "prod-b", Name: "other"},
			Spec: fleetv1alpha1.ImageInventorySpec{ObservedTime: at("2026-11-27T11:00:00Z")}},
		&fleetv1alpha1.FleetDiskImage{
			ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "rhel9"},
			Spec:       fleetv1alpha1.FleetDiskImageSpec{Retention: &metav1.Duration{Duration: time.Hour}},
			Status: fleetv1alpha1.FleetDiskImageStatus{Clusters: []fleetv1alpha1.ImageClusterStatus{
				{Cluster: "prod-a", Phase: fleetv1alpha1.ImagePhaseReady, References: 2},
				{Cluster: "prod-b", Phase: fleetv1alpha1.ImagePhaseReady, LastReferencedTime: at("2026-11-27T09:00:00Z")},
			}},
		},
	}
}

const operationsWant = `
# HELP fleetvm_cluster_copies FleetVirtualMachine copies on a managed cluster by environment and phase (every FleetVirtualMachine's status.clusters); only phases with a copy have a series.
# TYPE fleetvm_cluster_copies gauge
fleetvm_cluster_copies{cluster="prod-a",environment="prod",phase="Running"} 2
fleetvm_cluster_copies{cluster="prod-b",environment="prod",phase="Starting"} 1
# HELP fleetvm_placement_exclusions Clusters kept off a namespace's FleetVirtualMachines, summed over them, by the first reason (status.placement.excluded).
# TYPE fleetvm_placement_exclusions gauge
fleetvm_placement_exclusions{namespace="vms",reason="Environment"} 6
fleetvm_placement_exclusions{namespace="vms",reason="NoRoom"} 1
# HELP fleetvm_move_phase 1 for each FleetVirtualMachineMove, labelled with its current phase and method.
# TYPE fleetvm_move_phase gauge
fleetvm_move_phase{fleetvirtualmachine="batch",method="Auto",name="new",namespace="apps",phase="Pending"} 1
fleetvm_move_phase{fleetvirtualmachine="batch",method="Live",name="batch-to-b",namespace="apps",phase="Pending"} 1
fleetvm_move_phase{fleetvirtualmachine="forged",method="Cold",name="forged",namespace="vms",phase="Succeeded"} 1
fleetvm_move_phase{fleetvirtualmachine="old",method="Cold",name="old",namespace="vms",phase="Succeeded"} 1
fleetvm_move_phase{fleetvirtualmachine="web",method="Cold",name="web",namespace="vms",phase="Copying"} 1
# HELP fleetvm_move_deadline_timestamp_seconds When a FleetVirtualMachineMove that has not ended passes its timeout: from its start, or from when it began waiting while Pending.
# TYPE fleetvm_move_deadline_timestamp_seconds gauge
fleetvm_move_deadline_timestamp_seconds{name="batch-to-b",namespace="apps"} 1.7957754e+09
fleetvm_move_deadline_timestamp_seconds{name="web",namespace="vms"} 1.7957763e+09
# HELP fleetvm_drain_copies FleetVirtualMachine copies still on a cluster that carries the drain taint (fleetvm.io/drain).
# TYPE fleetvm_drain_copies gauge
fleetvm_drain_copies{cluster="prod-a"} 2
# HELP fleetvm_drain_last_progress_timestamp_seconds When a draining cluster's drain last moved on: the drain taint's timeAdded, or the latest start or end of a move its drain made, whichever is later.
# TYPE fleetvm_drain_last_progress_timestamp_seconds gauge
fleetvm_drain_last_progress_timestamp_seconds{cluster="prod-a"} 1.7957754e+09
# HELP fleetvm_agent_inventory_timestamp_seconds When a managed cluster's fleetvm agent last confirmed its image inventory (ImageInventory spec.observedTime): the agent's heartbeat, refreshed every few minutes even when nothing changed.
# TYPE fleetvm_agent_inventory_timestamp_seconds gauge
fleetvm_agent_inventory_timestamp_seconds{cluster="prod-a"} 1.7957772e+09
# HELP fleetvm_diskimage_unused_since_timestamp_seconds When a FleetDiskImage was first seen unused on a cluster after its last use (status.clusters[].lastReferencedTime); only while it is unused there.
# TYPE fleetvm_diskimage_unused_since_timestamp_seconds gauge
fleetvm_diskimage_unused_since_timestamp_seconds{cluster="prod-b",image="rhel9",namespace="vms"} 1.79577e+09
# HELP fleetvm_diskimage_retention_seconds How long a FleetDiskImage may sit unused on a cluster before it is pruned there (spec.retention).
# TYPE fleetvm_diskimage_retention_seconds gauge
fleetvm_diskimage_retention_seconds{image="rhel9",namespace="vms"} 3600
`

// TestOperations: the series alerts on moves, drains, agents and images
// read. The drain counts its own moves only, a move's deadline runs from
// its start (or its wait), and an image has an unused-since series only
// where it is unused.
func TestOperations(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(operations()...).Build(), logr.Discard()))
	if err := testutil.GatherAndCompare(reg, strings.NewReader(operationsWant),
		"fleetvm_cluster_copies", "fleetvm_placement_exclusions", "fleetvm_move_phase", "fleetvm_move_deadline_timestamp_seconds",
		"fleetvm_drain_copies", "fleetvm_drain_last_progress_timestamp_seconds", "fleetvm_agent_inventory_timestamp_seconds",
		"fleetvm_diskimage_unused_since_timestamp_seconds", "fleetvm_diskimage_retention_seconds"); err != nil {
		t.Error(err)
	}
}

// TestDrainLeftOutOnAFailedRead: a drain's series are never computed from
// part of what they need: without the moves, neither is served.
func TestDrainLeftOutOnAFailedRead(t *testing.T) {
	cl := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(operations()...).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*fleetv1alpha1.FleetVirtualMachineMoveList); ok {
				return errors.New("fleetvirtualmachinemoves is forbidden")
			}
			return c.List(ctx, list, opts...)
		},
	}).Build()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(cl, logr.Discard()))
	if n, err := testutil.GatherAndCount(reg, "fleetvm_drain_copies", "fleetvm_drain_last_progress_timestamp_seconds", "fleetvm_move_phase"); err != nil || n != 0 {
		t.Errorf("drain and move series after a failed read of the moves: %d (err %v), want none", n, err)
	}
	if n, err := testutil.GatherAndCount(reg, "fleetvm_cluster_copies"); err != nil || n != 2 {
		t.Errorf("copies after a failed read of the moves: %d (err %v), want 2", n, err)
	}
}
