package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/test/agenttest"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/simulator"
)

const fedora = "quay.io/containerdisks/fedora:40"

// fits reads how many VMs of vmShape the cluster's score says fit.
func fits(t *testing.T, cluster string) (int32, error) {
	t.Helper()
	score := &clusterv1alpha1.AddOnPlacementScore{}
	if err := fleet(t).Hub.Client.Get(t.Context(), client.ObjectKey{Namespace: cluster, Name: fleetv1alpha1.CapacityScoreName}, score); err != nil {
		return 0, err
	}
	for _, s := range score.Status.Scores {
		if s.Name == vmShape.Name() {
			return s.Value, nil
		}
	}
	return -1, nil
}

func waitFits(t *testing.T, cluster string, want int32) {
	t.Helper()
	var got int32
	if err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		var err error
		got, err = fits(t, cluster)
		return got == want, err
	}); err != nil {
		t.Fatalf("%s: %s = %d, want %d: %v", cluster, vmShape.Name(), got, want, err)
	}
}

func waitReport(t *testing.T, cluster, name string, ok func(*fleetv1alpha1.VMReport) bool) *fleetv1alpha1.VMReport {
	t.Helper()
	r := &fleetv1alpha1.VMReport{}
	if err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		if err := fleet(t).Hub.Client.Get(t.Context(), client.ObjectKey{Namespace: cluster, Name: name}, r); err != nil {
			return false, err
		}
		return ok(r), nil
	}); err != nil {
		t.Fatalf("VMReport %s/%s: %v; last: %+v", cluster, name, err, r.Spec.VMs)
	}
	return r
}

// TestVMsOnTwoClusters: a FleetVM's VMs on two spokes are reported Running
// with node and IP, the capacity score drops as the simulator starts them,
// and Halted brings them to Stopped and the capacity back.
func TestVMsOnTwoClusters(t *testing.T) {
	f := fleet(t)
	ctx := t.Context()
	// 8 CPUs, 32Gi per node: four 2-CPU/4Gi VMs fit before anything runs.
	for _, s := range f.Spokes {
		waitFits(t, s.Name, 4)
	}

	for _, s := range f.Spokes {
		vm := agenttest.VM("apps", "web", agenttest.FleetVM("apps", "web"), agenttest.Resources("2", "4Gi"),
			agenttest.ContainerDisk("root", fedora))
		if err := s.Client.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range f.Spokes {
		r := waitReport(t, s.Name, "apps.web", func(r *fleetv1alpha1.VMReport) bool {
			return len(r.Spec.VMs) == 1 && r.Spec.VMs[0].Ready
		})
		vm := &kubevirtv1.VirtualMachine{}
		if err := s.Client.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "web"}, vm); err != nil {
			t.Fatal(err)
		}
		got := r.Spec.VMs[0]
		want := fleetv1alpha1.VMState{
			Namespace: "apps", Name: "web", PrintableStatus: "Running", Ready: true, RunStrategy: "Always",
			Conditions: "Ready=True (Running)", Node: s.Name + "-1", IPAddresses: []string{simulator.InstanceIP(vm.UID)},
			Generation: vm.Generation, ObservedGeneration: vm.Generation, DiskImages: []string{"containerdisk:" + fedora},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: VM state (-want,+got):\n%s", s.Name, diff)
		}
		if diff := cmp.Diff(fleetv1alpha1.FleetVMReference{Namespace: "apps", Name: "web"}, r.Spec.FleetVM); diff != "" {
			t.Errorf("%s: fleetVM (-want,+got):\n%s", s.Name, diff)
		}
		// The virt-launcher pod holds 2 CPUs: three VMs fit now.
		waitFits(t, s.Name, 3)
	}

	for _, s := range f.Spokes {
		vm := &kubevirtv1.VirtualMachine{}
		if err := s.Client.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "web"}, vm); err != nil {
			t.Fatal(err)
		}
		vm.Spec.RunStrategy = ptr.To(kubevirtv1.RunStrategyHalted)
		if err := s.Client.Update(ctx, vm); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range f.Spokes {
		r := waitReport(t, s.Name, "apps.web", func(r *fleetv1alpha1.VMReport) bool {
			return len(r.Spec.VMs) == 1 && r.Spec.VMs[0].PrintableStatus == "Stopped"
		})
		if got := r.Spec.VMs[0]; got.Ready || got.Node != "" || len(got.IPAddresses) != 0 || got.RunStrategy != "Halted" {
			t.Errorf("%s: stopped VM = %+v, want not ready, no node, no IP, Halted", s.Name, got)
		}
		waitFits(t, s.Name, 4)
	}
}

// TestImageInventory: the inventory counts fleet and non-fleet VMs alike.
func TestImageInventory(t *testing.T) {
	f := fleet(t)
	ctx := t.Context()
	east := f.Spoke("east")
	const url = "https://images.example/win10.qcow2"
	for _, vm := range []*kubevirtv1.VirtualMachine{
		agenttest.VM("apps", "inv-fleet", agenttest.FleetVM("team", "inv"), agenttest.ContainerDisk("root", fedora),
			agenttest.RunStrategy(kubevirtv1.RunStrategyHalted)),
		agenttest.VM("apps", "inv-hand-made", agenttest.ContainerDisk("root", fedora),
			agenttest.DataVolumeTemplate("inv-hand-made-data", agenttest.HTTPSource(url)),
			agenttest.RunStrategy(kubevirtv1.RunStrategyHalted)),
	} {
		if err := east.Client.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
	}
	inv := &fleetv1alpha1.ImageInventory{}
	var got map[string]fleetv1alpha1.ImageUse
	if err := fleetenv.Eventually(ctx, wait, func() (bool, error) {
		if err := f.Hub.Client.Get(ctx, client.ObjectKey{Namespace: "east", Name: fleetv1alpha1.ImageInventoryName}, inv); err != nil {
			return false, err
		}
		got = map[string]fleetv1alpha1.ImageUse{}
		for _, u := range inv.Spec.Images {
			got[u.Image] = u
		}
		return got["http:"+url].References == 1, nil
	}); err != nil {
		t.Fatalf("inventory of east: %v; last: %+v", err, inv.Spec.Images)
	}
	// Other tests' VMs on east may use the fedora image too: count ours.
	use := got["containerdisk:"+fedora]
	ours := 0
	for _, u := range use.Users {
		if u == "apps/inv-fleet" || u == "apps/inv-hand-made" {
			ours++
		}
	}
	if ours != 2 {
		t.Errorf("containerdisk users = %v, want apps/inv-fleet and apps/inv-hand-made among them", use.Users)
	}
	if diff := cmp.Diff([]string{"apps/inv-hand-made"}, got["http:"+url].Users); diff != "" {
		t.Errorf("http image users (-want,+got):\n%s", diff)
	}
	if inv.Labels[fleetv1alpha1.LabelCluster] != "east" {
		t.Errorf("inventory labels = %v, want %s=east", inv.Labels, fleetv1alpha1.LabelCluster)
	}
}
