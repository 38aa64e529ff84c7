package fleet

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	agentcapacity "github.com/fleetvm/fleetvm/pkg/agent/capacity"
	"github.com/fleetvm/fleetvm/pkg/capacity"
	"github.com/fleetvm/fleetvm/pkg/kubectlfleetvm"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

const bridge2003 corev1.ResourceName = "bridge.network.kubevirt.io/bridge2003"

// nad is the NetworkAttachmentDefinition default/vlan2003 of seed 001: a
// Linux bridge, whose pods need the node resource bridge-marker publishes.
func nad() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(agentcapacity.NetworkAttachmentDefinitionGVK)
	u.SetNamespace("default")
	u.SetName("vlan2003")
	u.SetAnnotations(map[string]string{agentcapacity.AnnotationResourceName: string(bridge2003)})
	u.Object["spec"] = map[string]any{"config": `{"cniVersion":"0.3.1","type":"bridge","bridge":"bridge2003","vlan":2003}`}
	return u
}

// setBridge gives a node the bridge resource (n > 0) or takes it away.
func setBridge(ctx context.Context, t *testing.T, c client.Client, node string, n int64) {
	t.Helper()
	var got corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: node}, &got); err != nil {
		t.Fatal(err)
	}
	for _, l := range []corev1.ResourceList{got.Status.Allocatable, got.Status.Capacity} {
		if n > 0 {
			l[bridge2003] = *resource.NewQuantity(n, resource.DecimalSI)
		} else {
			delete(l, bridge2003)
		}
	}
	if err := c.Status().Update(ctx, &got); err != nil {
		t.Fatal(err)
	}
}

// TestNetworkFit, with the real OCM scheduler and the agents' scores:
// prod-a has default/vlan2003, backed by a bridge that only a small node
// offers; prod-b has no such network. A VM on vlan2003 lands nowhere (the
// only node with room lacks the bridge) until the big node gets the bridge,
// then only on prod-a; the same VM without the network fits both. When
// the network is removed under the running VM, the VM stays, past the
// grace period, and its cluster's entry says the network is missing.
func TestNetworkFit(t *testing.T) {
	ctx := t.Context()
	prodA := fleet.Spoke("prod-a").Client
	if err := prodA.Create(ctx, nad()); err != nil {
		t.Fatal(err)
	}
	// t.Context() is cancelled when cleanups run.
	cleanup, cancel := context.WithTimeout(context.Background(), 4*wait)
	t.Cleanup(cancel)
	t.Cleanup(func() { _ = client.IgnoreNotFound(prodA.Delete(cleanup, nad())) })
	small, err := fleet.Spoke("prod-a").CreateNode(ctx, fleetenv.Node{Name: "prod-a-bridge", CPU: "1", Memory: "2Gi",
		Extended: map[corev1.ResourceName]string{bridge2003: "1k"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = prodA.Delete(cleanup, small) })

	bridged := utiltesting.MakeFleetVM("vms", "bridged").Clusters(1).VM(4, "8Gi").Network("default/vlan2003").
		DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
	shape := capacity.Shape{CPU: resource.MustParse("4"), Memory: resource.MustParse("8Gi"), Networks: []string{"default/vlan2003"}}
	create(t, bridged)
	key := client.ObjectKeyFromObject(bridged)
	waitFit(t, "prod-a", shape, 0)
	waitFit(t, "prod-b", shape, 0)
	// The status says why, cluster by cluster, not just "no cluster
	// qualifies".
	why := []string{
		"1 MissingNetwork (prod-b: network default/vlan2003 is on no node",
		"1 NoRoom (prod-a: no node has room for 4 CPU and 8Gi memory with default/vlan2003)",
	}
	got := waitFVM(t, key, "not placed, saying why", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		c := meta.FindStatusCondition(f.Status.Conditions, fleetv1alpha1.ConditionPlaced)
		return conditionIs(f, fleetv1alpha1.ConditionPlaced, metav1.ConditionFalse, fleetv1alpha1.ReasonNoClusters) &&
			strings.Contains(c.Message, why[0]) && strings.Contains(c.Message, why[1])
	})
	wantExcluded := []fleetv1alpha1.ExclusionCount{
		{Reason: "MissingNetwork", Count: 1, Clusters: []string{"prod-b"},
			Detail: "network default/vlan2003 is on no node (no NetworkAttachmentDefinition, or no node has its resource)"},
		{Reason: "NoRoom", Count: 1, Clusters: []string{"prod-a"}, Detail: "no node has room for 4 CPU and 8Gi memory with default/vlan2003"},
	}
	if diff := cmp.Diff(wantExcluded, got.Status.Placement.Excluded); diff != "" {
		t.Errorf("status.placement.excluded (-want,+got):\n%s", diff)
	}
	// kubectl fleetvm explain names the reason of every cluster: prod-b
	// has no vlan2003 at all; on prod-a the bridge is only on a node
	// without room.
	out := explainCmd(t, "explain", "bridged", "-n", "vms")
	t.Logf("kubectl fleetvm explain bridged -n vms:\n%s", out)
	for _, want := range []string{
		"prod-a   NoRoom          no node has room for 4 CPU and 8Gi memory with default/vlan2003",
		"prod-b   MissingNetwork  network default/vlan2003 is on no node",
		"2 clusters: 1 MissingNetwork, 1 NoRoom",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain does not say %q:\n%s", want, out)
		}
	}

	// The node with room gets the bridge: the VM goes to prod-a, never to
	// prod-b, which has room but not the network.
	setBridge(ctx, t, prodA, "prod-a-node-1", 1000)
	t.Cleanup(func() { setBridge(cleanup, t, prodA, "prod-a-node-1", 0) })
	got = waitFVM(t, key, "ready on prod-a", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return conditionIs(f, fleetv1alpha1.ConditionReady, metav1.ConditionTrue, fleetv1alpha1.ReasonAllReady)
	})
	if d := placedOn(got); !slices.Equal(d, []string{"prod-a"}) {
		t.Fatalf("bridged placed on %v, want [prod-a]", d)
	}
	if got.Status.Placement.Excluded != nil {
		t.Errorf("placed as asked, the status still lists exclusions: %+v", got.Status.Placement.Excluded)
	}
	if out := explainCmd(t, "explain", "bridged", "-n", "vms"); !strings.Contains(out, "prod-a   Chosen") ||
		!strings.Contains(out, "prod-b   MissingNetwork") {
		t.Errorf("explain once placed:\n%s", out)
	}

	// The same VM without the network fits both clusters.
	plain := utiltesting.MakeFleetVM("vms", "plain").Clusters(2).VM(4, "8Gi").DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
	create(t, plain)
	got = waitFVM(t, client.ObjectKeyFromObject(plain), "plain ready on both", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return conditionIs(f, fleetv1alpha1.ConditionReady, metav1.ConditionTrue, fleetv1alpha1.ReasonAllReady)
	})
	if d := placedOn(got); !slices.Equal(d, []string{"prod-a", "prod-b"}) {
		t.Errorf("plain placed on %v, want [prod-a prod-b]", d)
	}

	// The network is removed under the running VM: prod-a no longer
	// qualifies, and the VM stays, past the grace period.
	if err := prodA.Delete(ctx, nad()); err != nil {
		t.Fatal(err)
	}
	waitFit(t, "prod-a", shape, 0)
	imageClock.Step(2 * time.Minute)
	got = waitFVM(t, key, "still on prod-a after the grace period, flagged", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		c, ok := entry(f, "prod-a")
		return ok && c.Phase == fleetv1alpha1.ClusterPhaseRunning && f.Status.ObservedGeneration == f.Generation &&
			strings.Contains(c.Message, "network default/vlan2003 missing on this cluster")
	})
	if d := placedOn(got); !slices.Equal(d, []string{"prod-a"}) {
		t.Errorf("after the network went away bridged is on %v, want [prod-a]", d)
	}
	if err := prodA.Get(ctx, client.ObjectKey{Namespace: "vms", Name: "bridged"}, &kubevirtv1.VirtualMachine{}); err != nil {
		t.Errorf("VM on prod-a: %v", err)
	}
}

// explainCmd runs kubectl fleetvm against the hub and returns what it
// printed.
func explainCmd(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := kubectlfleetvm.NewCommand(kubectlfleetvm.Config{IOStreams: genericiooptions.IOStreams{Out: &out, ErrOut: &errOut}})
	cmd.SetArgs(append([]string{"--kubeconfig", fleet.Hub.Kubeconfig}, args...))
	if err := cmd.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("kubectl fleetvm %v: %v\n%s", args, err, errOut.String())
	}
	return out.String()
}
