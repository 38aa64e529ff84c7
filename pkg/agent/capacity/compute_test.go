package capacity

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"

	"github.com/fleetvm/fleetvm/pkg/capacity"
)

type nodeOpt func(*corev1.Node)

func node(name, cpu, mem string, opts ...nodeOpt) corev1.Node {
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, o := range opts {
		o(&n)
	}
	return n
}

func cordoned(n *corev1.Node) { n.Spec.Unschedulable = true }
func notReady(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }
func kvLabel(v string) nodeOpt {
	return func(n *corev1.Node) { n.Labels = map[string]string{LabelKubeVirtSchedulable: v} }
}

func pod(node, cpu, mem string, phase corev1.PodPhase) corev1.Pod {
	return corev1.Pod{
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
		}}}},
		Status: corev1.PodStatus{Phase: phase},
	}
}

func shape(cpu, mem string) capacity.Shape {
	return capacity.Shape{CPU: resource.MustParse(cpu), Memory: resource.MustParse(mem)}
}

func items(kv ...any) []clusterv1alpha1.AddOnPlacementScoreItem {
	var out []clusterv1alpha1.AddOnPlacementScoreItem
	for i := 0; i < len(kv); i += 2 {
		out = append(out, clusterv1alpha1.AddOnPlacementScoreItem{Name: kv[i].(string), Value: int32(kv[i+1].(int))})
	}
	return out
}

func TestScores(t *testing.T) {
	small := shape("4", "8Gi")   // fit-4000m-8192mi
	tiny := shape("100m", "1Mi") // fit-100m-1mi
	cases := map[string]struct {
		nodes  []corev1.Node
		pods   []corev1.Pod
		shapes []capacity.Shape
		want   []clusterv1alpha1.AddOnPlacementScoreItem
	}{
		"no nodes": {
			shapes: []capacity.Shape{small},
			want:   items("cpuFree", -100, "fit-4000m-8192mi", 0, "memoryFree", -100),
		},
		"fit counted per node, not on the sum": {
			// 6 CPUs free on each node: 12 in total would fit 3 VMs, per node only 2.
			nodes:  []corev1.Node{node("a", "6", "64Gi"), node("b", "6", "64Gi")},
			shapes: []capacity.Shape{small},
			want:   items("cpuFree", -82, "fit-4000m-8192mi", 2, "memoryFree", -50),
		},
		"memory limits the fit": {
			nodes:  []corev1.Node{node("a", "64", "20Gi")},
			shapes: []capacity.Shape{small},
			want:   items("cpuFree", 0, "fit-4000m-8192mi", 2, "memoryFree", -93),
		},
		"running and pending pods hold requests, finished ones do not": {
			nodes: []corev1.Node{node("a", "16", "64Gi")},
			pods: []corev1.Pod{
				pod("a", "4", "8Gi", corev1.PodRunning),
				pod("a", "4", "8Gi", corev1.PodPending),
				pod("a", "8", "32Gi", corev1.PodSucceeded),
				pod("a", "8", "32Gi", corev1.PodFailed),
				pod("elsewhere", "8", "32Gi", corev1.PodRunning),
				pod("", "8", "32Gi", corev1.PodPending),
			},
			shapes: []capacity.Shape{small},
			want:   items("cpuFree", -88, "fit-4000m-8192mi", 2, "memoryFree", -82),
		},
		"overcommitted node counts as empty": {
			nodes:  []corev1.Node{node("a", "4", "8Gi")},
			pods:   []corev1.Pod{pod("a", "8", "16Gi", corev1.PodRunning)},
			shapes: []capacity.Shape{small},
			want:   items("cpuFree", -100, "fit-4000m-8192mi", 0, "memoryFree", -100),
		},
		"cordoned and NotReady nodes do not count": {
			nodes:  []corev1.Node{node("a", "8", "16Gi", cordoned), node("b", "8", "16Gi", notReady), node("c", "4", "8Gi")},
			shapes: []capacity.Shape{small},
			want:   items("cpuFree", -94, "fit-4000m-8192mi", 1, "memoryFree", -97),
		},
		"when any node has the KubeVirt label only labelled-true nodes count": {
			nodes: []corev1.Node{
				node("a", "8", "16Gi", kvLabel("true")),
				node("b", "8", "16Gi", kvLabel("false")),
				node("c", "8", "16Gi"),
			},
			shapes: []capacity.Shape{small},
			want:   items("cpuFree", -88, "fit-4000m-8192mi", 2, "memoryFree", -94),
		},
		"fit capped at 100, shapes sorted by name": {
			nodes:  []corev1.Node{node("a", "128", "512Gi")},
			shapes: []capacity.Shape{tiny, small},
			want:   items("cpuFree", 100, "fit-100m-1mi", 100, "fit-4000m-8192mi", 32, "memoryFree", 100),
		},
		"duplicate shapes give one score": {
			nodes:  []corev1.Node{node("a", "8", "16Gi")},
			shapes: []capacity.Shape{small, shape("4000m", "8192Mi")},
			want:   items("cpuFree", -88, "fit-4000m-8192mi", 2, "memoryFree", -94),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Scores(tc.nodes, tc.pods, tc.shapes, nil)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Scores (-want,+got):\n%s", diff)
			}
		})
	}
}

const bridge corev1.ResourceName = "bridge.network.kubevirt.io/bridge2003"

// withBridge gives the node n of the bridge resource.
func withBridge(n int64) nodeOpt {
	return func(node *corev1.Node) {
		node.Status.Allocatable[bridge] = *resource.NewQuantity(n, resource.DecimalSI)
	}
}

// bridgePod is a virt-launcher pod on node attached to the bridge.
func bridgePod(node string) corev1.Pod {
	p := pod(node, "1", "1Gi", corev1.PodRunning)
	p.Spec.Containers[0].Resources.Requests[bridge] = resource.MustParse("1")
	return p
}

// TestScoresWithNetworks: a VM that needs networks fits only where every
// NetworkAttachmentDefinition exists and, for one that names a node
// resource, on a node that has CPU, memory and that resource left, all on
// the same node.
func TestScoresWithNetworks(t *testing.T) {
	vlan := capacity.Shape{CPU: resource.MustParse("4"), Memory: resource.MustParse("8Gi"),
		Networks: []string{"default/vlan2003"}}
	twoNets := vlan
	twoNets.Networks = []string{"default/storage", "default/vlan2003"}
	gitOnly := capacity.Shape{Networks: []string{"default/vlan2003"}}
	withBridgeNAD := Networks{"default/vlan2003": bridge, "default/storage": ""}
	cases := map[string]struct {
		nodes []corev1.Node
		pods  []corev1.Pod
		nets  Networks
		shape capacity.Shape
		want  int32
	}{
		"no NetworkAttachmentDefinition": {
			nodes: []corev1.Node{node("a", "16", "64Gi", withBridge(1000))},
			nets:  Networks{"default/other": ""},
			shape: vlan, want: 0,
		},
		"same name in another namespace is not it": {
			nodes: []corev1.Node{node("a", "16", "64Gi")},
			nets:  Networks{"team-a/vlan2003": ""},
			shape: vlan, want: 0,
		},
		"network without a node resource: CPU and memory decide": {
			nodes: []corev1.Node{node("a", "16", "64Gi")},
			nets:  Networks{"default/vlan2003": ""},
			shape: vlan, want: 4,
		},
		"bridge on no node": {
			nodes: []corev1.Node{node("a", "16", "64Gi"), node("b", "16", "64Gi")},
			nets:  withBridgeNAD,
			shape: vlan, want: 0,
		},
		"the only node with room lacks the bridge": {
			nodes: []corev1.Node{node("full", "2", "4Gi", withBridge(1000)), node("roomy", "16", "64Gi")},
			nets:  withBridgeNAD,
			shape: vlan, want: 0,
		},
		"room and bridge on the same node": {
			nodes: []corev1.Node{node("full", "2", "4Gi"), node("roomy", "16", "64Gi", withBridge(1000))},
			nets:  withBridgeNAD,
			shape: vlan, want: 4,
		},
		"the bridge's ports run out before the CPU": {
			nodes: []corev1.Node{node("a", "16", "64Gi", withBridge(3))},
			pods:  []corev1.Pod{bridgePod("a"), bridgePod("a")},
			nets:  withBridgeNAD,
			shape: vlan, want: 1,
		},
		"every network must be there": {
			nodes: []corev1.Node{node("a", "16", "64Gi", withBridge(1000))},
			nets:  Networks{"default/vlan2003": bridge},
			shape: twoNets, want: 0,
		},
		"two networks, both there": {
			nodes: []corev1.Node{node("a", "16", "64Gi", withBridge(1000))},
			nets:  withBridgeNAD,
			shape: twoNets, want: 4,
		},
		"a VM from git: networks only": {
			nodes: []corev1.Node{node("a", "1", "1Gi", withBridge(2))},
			nets:  withBridgeNAD,
			shape: gitOnly, want: 2,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Scores(tc.nodes, tc.pods, []capacity.Shape{tc.shape}, tc.nets)
			for _, s := range got {
				if s.Name == tc.shape.Name() {
					if s.Value != tc.want {
						t.Errorf("fit = %d, want %d", s.Value, tc.want)
					}
					return
				}
			}
			t.Errorf("no score %s in %v", tc.shape.Name(), got)
		})
	}
}

// TestNetworkScores: for each network a shape needs, how many schedulable
// nodes offer it: the hub names the missing network from it.
func TestNetworkScores(t *testing.T) {
	vlan := capacity.Shape{CPU: resource.MustParse("4"), Memory: resource.MustParse("8Gi"), Networks: []string{"default/storage", "default/vlan2003"}}
	nodes := []corev1.Node{node("a", "16", "64Gi", withBridge(10)), node("b", "16", "64Gi"), node("c", "16", "64Gi", withBridge(1), cordoned)}
	for name, tc := range map[string]struct {
		nets          Networks
		vlan, storage int32
	}{
		"no NAD at all":                  {Networks{}, 0, 0},
		"bridge on one schedulable node": {Networks{"default/vlan2003": bridge, "default/storage": ""}, 1, 2},
		"NAD without a node resource":    {Networks{"default/vlan2003": ""}, 2, 0},
	} {
		t.Run(name, func(t *testing.T) {
			got := map[string]int32{}
			for _, s := range Scores(nodes, nil, []capacity.Shape{vlan}, tc.nets) {
				got[s.Name] = s.Value
			}
			for net, want := range map[string]int32{"default/vlan2003": tc.vlan, "default/storage": tc.storage} {
				if v, ok := got[capacity.NetworkScoreName(net)]; !ok || v != want {
					t.Errorf("%s offered by %d nodes (published: %v), want %d", net, v, ok, want)
				}
			}
		})
	}
}
