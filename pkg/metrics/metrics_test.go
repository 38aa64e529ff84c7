package metrics

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

func scheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := fleetv1alpha1.AddToScheme(s); err != nil {
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
