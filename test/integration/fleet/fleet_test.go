package fleet

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/capacity"
	"github.com/fleetvm/fleetvm/test/agenttest"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/fleetrun"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

// create creates the FleetVirtualMachine and, when the test ends, deletes
// it and waits until its VMs are gone from the spokes.
func create(t *testing.T, fvm *fleetv1alpha1.FleetVirtualMachine) {
	t.Helper()
	if err := fleet.Hub.Tenant(t.Context(), fvm.Namespace); err != nil {
		t.Fatal(err)
	}
	if err := fleet.Hub.Client.Create(t.Context(), fvm); err != nil {
		t.Fatalf("create FleetVirtualMachine: %v", err)
	}
	key := client.ObjectKeyFromObject(fvm)
	t.Cleanup(func() {
		// t.Context() is already cancelled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if err := fleet.Hub.Client.Delete(ctx, &fleetv1alpha1.FleetVirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
			return
		}
		err := fleetenv.Eventually(ctx, wait, func() (bool, error) {
			err := fleet.Hub.Client.Get(ctx, key, &fleetv1alpha1.FleetVirtualMachine{})
			if !apierrors.IsNotFound(err) {
				return false, client.IgnoreNotFound(err)
			}
			for _, s := range fleet.Spokes {
				var vms kubevirtv1.VirtualMachineList
				if err := s.Client.List(ctx, &vms, client.MatchingLabels{fleetv1alpha1.LabelFleetVMName: key.Name}); err != nil {
					return false, err
				}
				if len(vms.Items) > 0 {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			t.Errorf("FleetVirtualMachine %s and its VMs not gone: %v%s", key, err, deletionWaits(key))
		}
	})
}

// deletionWaits says what a FleetVirtualMachine's deletion waits for: its
// finalizers and Ready condition, its Applications, and where its VMs
// still are.
func deletionWaits(key client.ObjectKey) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var b strings.Builder
	fvm := &fleetv1alpha1.FleetVirtualMachine{}
	if err := fleet.Hub.Client.Get(ctx, key, fvm); err == nil {
		fmt.Fprintf(&b, "\n  finalizers %v, deletion %v", fvm.Finalizers, fvm.DeletionTimestamp)
		if c := meta.FindStatusCondition(fvm.Status.Conditions, fleetv1alpha1.ConditionReady); c != nil {
			fmt.Fprintf(&b, "\n  Ready %s %s: %s", c.Status, c.Reason, c.Message)
		}
	}
	var apps argov1alpha1.ApplicationList
	if err := fleet.Hub.Client.List(ctx, &apps, client.MatchingLabels{fleetv1alpha1.LabelFleetVMName: key.Name, fleetv1alpha1.LabelFleetVMNamespace: key.Namespace}); err == nil {
		for _, a := range apps.Items {
			fmt.Fprintf(&b, "\n  Application %s: finalizers %v, deletion %v, owners %d, sync %s, health %s",
				a.Name, a.Finalizers, a.DeletionTimestamp, len(a.OwnerReferences), a.Status.Sync.Status, a.Status.Health.Status)
		}
	}
	for _, s := range fleet.Spokes {
		var vms kubevirtv1.VirtualMachineList
		if err := s.Client.List(ctx, &vms, client.MatchingLabels{fleetv1alpha1.LabelFleetVMName: key.Name}); err == nil {
			for _, vm := range vms.Items {
				fmt.Fprintf(&b, "\n  VM on %s: deletion %v, finalizers %v", s.Name, vm.DeletionTimestamp, vm.Finalizers)
			}
		}
	}
	return b.String()
}

// waitFVM polls the FleetVirtualMachine (as the admin) until cond holds.
func waitFVM(t *testing.T, key client.ObjectKey, what string, cond func(*fleetv1alpha1.FleetVirtualMachine) bool) *fleetv1alpha1.FleetVirtualMachine {
	t.Helper()
	return fleetrun.WaitFVM(t, fleet.Hub.Client, key, wait, what, cond)
}

func conditionIs(fvm *fleetv1alpha1.FleetVirtualMachine, typ string, status metav1.ConditionStatus, reason string) bool {
	c := meta.FindStatusCondition(fvm.Status.Conditions, typ)
	return c != nil && c.ObservedGeneration == fvm.Generation && c.Status == status && (reason == "" || c.Reason == reason)
}

func entry(fvm *fleetv1alpha1.FleetVirtualMachine, cluster string) (fleetv1alpha1.ClusterStatus, bool) {
	for _, c := range fvm.Status.Clusters {
		if c.Cluster == cluster {
			return c, true
		}
	}
	return fleetv1alpha1.ClusterStatus{}, false
}

// TestVMLifecycleAcrossTwoClusters: the VM starts on both clusters and the
// FleetVM shows 2/2 ready with node and IP; runStrategy Halted stops it
// everywhere; a cluster that becomes unavailable turns Unknown.
func TestVMLifecycleAcrossTwoClusters(t *testing.T) {
	fvm := utiltesting.MakeFleetVM("vms", "web").Clusters(2).VM(1, "1Gi").DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
	create(t, fvm)
	key := client.ObjectKeyFromObject(fvm)

	got := waitFVM(t, key, "ready on 2 clusters", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return conditionIs(f, fleetv1alpha1.ConditionReady, metav1.ConditionTrue, fleetv1alpha1.ReasonAllReady) && f.Status.Summary.Ready == 2
	})
	if n := len(got.Status.Clusters); n != 2 {
		t.Fatalf("status lists %d clusters, want 2: %+v", n, got.Status.Clusters)
	}
	for _, c := range got.Status.Clusters {
		// What the status says is what the spoke holds.
		spoke := fleet.Spoke(c.Cluster)
		var vmi kubevirtv1.VirtualMachineInstance
		if err := spoke.Client.Get(t.Context(), client.ObjectKey{Namespace: "vms", Name: "web"}, &vmi); err != nil {
			t.Fatalf("%s: VirtualMachineInstance: %v", c.Cluster, err)
		}
		var ips []string
		for _, i := range vmi.Status.Interfaces {
			ips = append(ips, i.IP)
		}
		if c.Phase != fleetv1alpha1.ClusterPhaseRunning || !c.Ready || c.PrintableStatus != "Running" {
			t.Errorf("%s: phase %s ready %v printableStatus %q, want Running/true/Running", c.Cluster, c.Phase, c.Ready, c.PrintableStatus)
		}
		if c.Node == "" || c.Node != vmi.Status.NodeName {
			t.Errorf("%s: node %q, the instance runs on %q", c.Cluster, c.Node, vmi.Status.NodeName)
		}
		if len(c.IPAddresses) == 0 || !slices.Equal(c.IPAddresses, ips) {
			t.Errorf("%s: ipAddresses %v, the instance has %v", c.Cluster, c.IPAddresses, ips)
		}
		if c.SyncStatus != "Synced" || c.Health != "Healthy" || c.Environment != "prod" {
			t.Errorf("%s: sync %q health %q env %q", c.Cluster, c.SyncStatus, c.Health, c.Environment)
		}
	}
	if s := got.Status.Summary; s.Desired != 2 || s.Placed != 2 || s.Running != 2 || s.Unknown != 0 {
		t.Errorf("summary %+v", s)
	}

	// Halted: stopped on every cluster, and that is what was asked for.
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.RunStrategy = fleetv1alpha1.RunStrategyHalted
	if err := fleet.Hub.Client.Patch(t.Context(), got, patch); err != nil {
		t.Fatal(err)
	}
	got = waitFVM(t, key, "stopped on every cluster", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		if !conditionIs(f, fleetv1alpha1.ConditionReady, metav1.ConditionTrue, fleetv1alpha1.ReasonStopped) || len(f.Status.Clusters) != 2 {
			return false
		}
		for _, c := range f.Status.Clusters {
			if c.Phase != fleetv1alpha1.ClusterPhaseStopped || c.Ready {
				return false
			}
		}
		return f.Status.Summary.Stopped == 2
	})
	for _, c := range got.Status.Clusters {
		var vm kubevirtv1.VirtualMachine
		if err := fleet.Spoke(c.Cluster).Client.Get(t.Context(), client.ObjectKey{Namespace: "vms", Name: "web"}, &vm); err != nil {
			t.Fatal(err)
		}
		if vm.Spec.RunStrategy == nil || *vm.Spec.RunStrategy != kubevirtv1.RunStrategyHalted {
			t.Errorf("%s: VM runStrategy %v, want Halted", c.Cluster, vm.Spec.RunStrategy)
		}
		if err := fleet.Spoke(c.Cluster).Client.Get(t.Context(), client.ObjectKey{Namespace: "vms", Name: "web"}, &kubevirtv1.VirtualMachineInstance{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: VirtualMachineInstance still there (%v)", c.Cluster, err)
		}
	}

	// Back to Always, then prod-b's lease expires: its entry turns Unknown
	// (never its last Running report) while prod-a stays Running.
	patch = client.MergeFrom(got.DeepCopy())
	got.Spec.RunStrategy = fleetv1alpha1.RunStrategyAlways
	if err := fleet.Hub.Client.Patch(t.Context(), got, patch); err != nil {
		t.Fatal(err)
	}
	waitFVM(t, key, "ready again", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return conditionIs(f, fleetv1alpha1.ConditionReady, metav1.ConditionTrue, fleetv1alpha1.ReasonAllReady) && f.Status.Summary.Ready == 2
	})
	if err := fleetenv.SetClusterAvailable(t.Context(), fleet.Hub.Client, "prod-b", metav1.ConditionUnknown); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := fleetenv.SetClusterAvailable(context.Background(), fleet.Hub.Client, "prod-b", metav1.ConditionTrue); err != nil {
			t.Error(err)
		}
	})
	got = waitFVM(t, key, "prod-b Unknown", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		b, ok := entry(f, "prod-b")
		a, _ := entry(f, "prod-a")
		return ok && b.Phase == fleetv1alpha1.ClusterPhaseUnknown && a.Phase == fleetv1alpha1.ClusterPhaseRunning
	})
	b, _ := entry(got, "prod-b")
	if b.Ready || b.Node != "" || len(b.IPAddresses) != 0 || b.PrintableStatus != "" {
		t.Errorf("prod-b shows stale state while unavailable: %+v", b)
	}
	if !conditionIs(got, fleetv1alpha1.ConditionDegraded, metav1.ConditionTrue, fleetv1alpha1.ReasonClustersUnknown) {
		t.Errorf("Degraded: %+v", meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionDegraded))
	}
	// The VM on prod-b is left alone: a lost lease is no reason to delete it.
	if err := fleet.Spoke("prod-b").Client.Get(t.Context(), client.ObjectKey{Namespace: "vms", Name: "web"}, &kubevirtv1.VirtualMachine{}); err != nil {
		t.Errorf("VM on prod-b: %v", err)
	}
}

// TestCapacityFillsUp: a VM that takes most of a cluster leaves no room for
// a second one there; the real scheduler, reading the scores the agents
// publish, places the next FleetVM on the other cluster.
func TestCapacityFillsUp(t *testing.T) {
	shape := capacity.Shape{CPU: resource.MustParse("12"), Memory: resource.MustParse("16Gi")}
	first := utiltesting.MakeFleetVM("vms", "big-1").Clusters(1).VM(12, "16Gi").DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
	create(t, first)
	got := waitFVM(t, client.ObjectKeyFromObject(first), "big-1 ready", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return conditionIs(f, fleetv1alpha1.ConditionReady, metav1.ConditionTrue, fleetv1alpha1.ReasonAllReady)
	})
	taken := got.Status.Clusters[0].Cluster
	other := "prod-a"
	if taken == other {
		other = "prod-b"
	}
	// The agent of the cluster big-1 runs on sees its virt-launcher pod
	// and scores that no second one fits; the other cluster still has room.
	for cluster, want := range map[string]int32{taken: 0, other: 1} {
		waitFit(t, cluster, shape, want)
	}

	second := utiltesting.MakeFleetVM("vms", "big-2").Clusters(1).VM(12, "16Gi").DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
	create(t, second)
	got = waitFVM(t, client.ObjectKeyFromObject(second), "big-2 ready", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return conditionIs(f, fleetv1alpha1.ConditionReady, metav1.ConditionTrue, fleetv1alpha1.ReasonAllReady)
	})
	if d := placedOn(got); !slices.Equal(d, []string{other}) {
		t.Errorf("big-2 placed on %v, want [%s] (%s is full)", d, other, taken)
	}
	// Once the other cluster's agent scored big-2's pod, no cluster has
	// room. (Created before that, a third would be placed on the stale
	// score, and stay there: capacity never moves a VM.)
	waitFit(t, other, shape, 0)

	// A third finds no room anywhere, and says why.
	third := utiltesting.MakeFleetVM("vms", "big-3").Clusters(1).VM(12, "16Gi").DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
	create(t, third)
	got = waitFVM(t, client.ObjectKeyFromObject(third), "big-3 not placed", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return conditionIs(f, fleetv1alpha1.ConditionPlaced, metav1.ConditionFalse, fleetv1alpha1.ReasonNoClusters)
	})
	if c := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionPlaced); !strings.Contains(c.Message, "fleetvm-capacity") {
		t.Errorf("Placed message does not explain capacity: %q", c.Message)
	}
}

// placedOn lists the clusters the status has the VM placed on.
func placedOn(fvm *fleetv1alpha1.FleetVirtualMachine) []string {
	var out []string
	for _, c := range fvm.Status.Clusters {
		if c.Phase != fleetv1alpha1.ClusterPhaseLeaving && c.Phase != fleetv1alpha1.ClusterPhaseRemoving {
			out = append(out, c.Cluster)
		}
	}
	return out
}

// fits reads how many VMs of the shape the cluster's agent says fit.
func fits(t *testing.T, cluster string, shape capacity.Shape) (int32, bool, error) {
	var score clusterv1alpha1.AddOnPlacementScore
	if err := fleet.Hub.Client.Get(t.Context(), client.ObjectKey{Namespace: cluster, Name: fleetv1alpha1.CapacityScoreName}, &score); err != nil {
		return 0, false, client.IgnoreNotFound(err)
	}
	for _, s := range score.Status.Scores {
		if s.Name == shape.Name() {
			return s.Value, true, nil
		}
	}
	return 0, false, nil
}

// waitFit waits until cluster's agent scores want VMs of shape.
func waitFit(t *testing.T, cluster string, shape capacity.Shape, want int32) {
	t.Helper()
	err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		n, ok, err := fits(t, cluster, shape)
		return ok && n == want, err
	})
	if err != nil {
		n, _, _ := fits(t, cluster, shape)
		t.Fatalf("%s: %s fits %d, want %d: %v", cluster, shape.Name(), n, want, err)
	}
}

// TestImageReferences: the hub's image inventory of a cluster counts every
// VM there, fleet-managed or not, and the FleetVM's status lists the images
// it uses and on how many of its clusters.
func TestImageReferences(t *testing.T) {
	const golden = "registry.example.com/golden/rhel9:9.4"
	const other = "registry.example.com/tools/busybox:1"
	fvm := utiltesting.MakeFleetVM("vms", "imaged").Clusters(2).VM(1, "1Gi").ContainerDisk(golden).DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
	create(t, fvm)

	// Not managed by FleetVM: two VMs on prod-a using the same image, one
	// on prod-b using another.
	spokeVMs := map[string][]*kubevirtv1.VirtualMachine{
		"prod-a": {
			agenttest.VM("legacy", "hand-1", agenttest.ContainerDisk("root", golden)),
			agenttest.VM("legacy", "hand-2", agenttest.ContainerDisk("root", golden), agenttest.RunStrategy(kubevirtv1.RunStrategyHalted)),
		},
		"prod-b": {agenttest.VM("legacy", "hand-3", agenttest.ContainerDisk("root", other), agenttest.RunStrategy(kubevirtv1.RunStrategyHalted))},
	}
	for cluster, vms := range spokeVMs {
		s := fleet.Spoke(cluster)
		if err := s.EnsureNamespace(t.Context(), "legacy"); err != nil {
			t.Fatal(err)
		}
		for _, vm := range vms {
			if err := s.Client.Create(t.Context(), vm); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Client.Delete(context.Background(), vm) })
		}
	}

	goldenID, otherID := "containerdisk:"+golden, "containerdisk:"+other
	want := map[string]map[string]int32{
		"prod-a": {goldenID: 3},
		"prod-b": {goldenID: 1, otherID: 1},
	}
	for cluster, images := range want {
		err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
			got, err := inventory(t, cluster)
			if err != nil {
				return false, client.IgnoreNotFound(err)
			}
			for image, n := range images {
				if got[image] != n {
					return false, nil
				}
			}
			return true, nil
		})
		if err != nil {
			got, _ := inventory(t, cluster)
			t.Errorf("%s inventory %v, want %v", cluster, got, images)
		}
	}
	waitFVM(t, client.ObjectKeyFromObject(fvm), "the golden image in use on both clusters", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return len(f.Status.DiskImages) == 1 && f.Status.DiskImages[0].Image == goldenID && f.Status.DiskImages[0].Clusters == 2
	})
}

func inventory(t *testing.T, cluster string) (map[string]int32, error) {
	var inv fleetv1alpha1.ImageInventory
	if err := fleet.Hub.Client.Get(t.Context(), client.ObjectKey{Namespace: cluster, Name: fleetv1alpha1.ImageInventoryName}, &inv); err != nil {
		return nil, err
	}
	out := map[string]int32{}
	for _, i := range inv.Spec.Images {
		out[i.Image] = i.References
	}
	return out, nil
}
