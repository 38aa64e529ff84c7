// Package capacity computes a spoke's free capacity and publishes it to the
// hub as the fleetvm-capacity AddOnPlacementScore.
package capacity

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"

	"github.com/fleetvm/fleetvm/pkg/capacity"
)

// LabelKubeVirtSchedulable is the node label virt-handler sets on nodes that
// can run VMs. When any node carries it, only nodes with value "true" count.
const LabelKubeVirtSchedulable = "kubevirt.io/schedulable"

// Free is the CPU, memory and extended resources (such as a bridge's
// bridge.network.kubevirt.io/bridge2003) left on one node.
type Free struct {
	Node     string
	CPU      resource.Quantity
	Memory   resource.Quantity
	Extended map[corev1.ResourceName]int64
}

// Networks are the NetworkAttachmentDefinitions of a spoke,
// "namespace/name", each with the node resource it needs (its
// k8s.v1.cni.cncf.io/resourceName annotation), "" when none.
type Networks map[string]corev1.ResourceName

// AnnotationResourceName is the annotation by which a
// NetworkAttachmentDefinition names the node resource a pod attached to
// it needs (bridge-marker, SR-IOV).
const AnnotationResourceName = "k8s.v1.cni.cncf.io/resourceName"

// extended tells whether r is an extended resource (a domain-prefixed
// name, not cpu, memory or storage).
func extended(r corev1.ResourceName) bool {
	return strings.Contains(string(r), "/") && !strings.HasPrefix(string(r), corev1.ResourceHugePagesPrefix)
}

// Schedulable tells which nodes may run VMs: Ready, not cordoned and, when
// any node carries the kubevirt.io/schedulable label, labelled "true".
func Schedulable(nodes []corev1.Node) []corev1.Node {
	labelled := slices.ContainsFunc(nodes, func(n corev1.Node) bool {
		_, ok := n.Labels[LabelKubeVirtSchedulable]
		return ok
	})
	var out []corev1.Node
	for _, n := range nodes {
		if n.Spec.Unschedulable || !nodeReady(&n) {
			continue
		}
		if labelled && n.Labels[LabelKubeVirtSchedulable] != "true" {
			continue
		}
		out = append(out, n)
	}
	return out
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Terminated tells whether a pod no longer holds its requests.
func Terminated(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// PodRequests is what a pod asks its node for: the sum of its containers'
// requests, at least the largest init container's, plus its overhead.
func PodRequests(p *corev1.Pod) (cpu, memory resource.Quantity) {
	for _, c := range p.Spec.Containers {
		cpu.Add(*c.Resources.Requests.Cpu())
		memory.Add(*c.Resources.Requests.Memory())
	}
	for _, c := range p.Spec.InitContainers {
		if q := c.Resources.Requests.Cpu(); q.Cmp(cpu) > 0 {
			cpu = q.DeepCopy()
		}
		if q := c.Resources.Requests.Memory(); q.Cmp(memory) > 0 {
			memory = q.DeepCopy()
		}
	}
	if q, ok := p.Spec.Overhead[corev1.ResourceCPU]; ok {
		cpu.Add(q)
	}
	if q, ok := p.Spec.Overhead[corev1.ResourceMemory]; ok {
		memory.Add(q)
	}
	return cpu, memory
}

// FreeByNode returns, for every schedulable node sorted by name, its
// allocatable CPU and memory minus the requests of the non-terminated pods
// bound to it (never below zero).
func FreeByNode(nodes []corev1.Node, pods []corev1.Pod) []Free {
	sched := Schedulable(nodes)
	index := make(map[string]int, len(sched))
	out := make([]Free, 0, len(sched))
	for _, n := range sched {
		index[n.Name] = len(out)
		f := Free{
			Node:     n.Name,
			CPU:      n.Status.Allocatable.Cpu().DeepCopy(),
			Memory:   n.Status.Allocatable.Memory().DeepCopy(),
			Extended: map[corev1.ResourceName]int64{},
		}
		for r, q := range n.Status.Allocatable {
			if extended(r) {
				f.Extended[r] = q.Value()
			}
		}
		out = append(out, f)
	}
	for i := range pods {
		p := &pods[i]
		idx, ok := index[p.Spec.NodeName]
		if !ok || Terminated(p) {
			continue
		}
		cpu, mem := PodRequests(p)
		out[idx].CPU.Sub(cpu)
		out[idx].Memory.Sub(mem)
		for _, c := range p.Spec.Containers {
			for r, q := range c.Resources.Requests {
				if extended(r) {
					out[idx].Extended[r] -= q.Value()
				}
			}
		}
	}
	for i := range out {
		if out[i].CPU.Sign() < 0 {
			out[i].CPU = resource.Quantity{}
		}
		if out[i].Memory.Sign() < 0 {
			out[i].Memory = resource.Quantity{}
		}
		for r, n := range out[i].Extended {
			out[i].Extended[r] = max(n, 0)
		}
	}
	slices.SortFunc(out, func(a, b Free) int { return strings.Compare(a.Node, b.Node) })
	return out
}

// Fits is how many VMs of the shape fit on the free capacity of one node:
// CPU, memory and every network on that node. A network fits when its
// NetworkAttachmentDefinition exists and, if it names a node resource,
// the node has one left per VM.
func Fits(f Free, s capacity.Shape, nets Networks) int64 {
	n := int64(capacity.MaxScore)
	if cpu := s.CPU.MilliValue(); cpu > 0 {
		n = min(n, f.CPU.MilliValue()/cpu)
	}
	if mem := s.Memory.Value(); mem > 0 {
		n = min(n, f.Memory.Value()/mem)
	}
	for _, net := range s.Networks {
		res, ok := nets[net]
		if !ok {
			return 0
		}
		if res != "" {
			n = min(n, f.Extended[res])
		}
	}
	return max(n, 0)
}

// offering counts the nodes that offer network: none when its
// NetworkAttachmentDefinition is missing, every node when it names no node
// resource, else those with one of it left.
func offering(free []Free, network string, nets Networks) int {
	res, ok := nets[network]
	if !ok {
		return 0
	}
	n := 0
	for _, f := range free {
		if res == "" || f.Extended[res] > 0 {
			n++
		}
	}
	return n
}

// Scores computes the fleetvm-capacity scores of a spoke, sorted by name:
// the normalized free CPU and memory summed over schedulable nodes, and for
// each shape how many such VMs fit, counted per node (CPU, memory and
// networks on the same node) and capped at capacity.MaxScore; for each
// network a shape needs, how many nodes offer it.
func Scores(nodes []corev1.Node, pods []corev1.Pod, shapes []capacity.Shape, nets Networks) []clusterv1alpha1.AddOnPlacementScoreItem {
	free := FreeByNode(nodes, pods)
	var cpu, mem resource.Quantity
	for _, f := range free {
		cpu.Add(f.CPU)
		mem.Add(f.Memory)
	}
	byName := map[string]int32{
		capacity.ScoreCPUFree:    capacity.Normalize(cpu, capacity.ReferenceCPU),
		capacity.ScoreMemoryFree: capacity.Normalize(mem, capacity.ReferenceMemory),
	}
	for _, s := range shapes {
		for _, net := range s.Networks {
			byName[capacity.NetworkScoreName(net)] = int32(min(offering(free, net, nets), capacity.MaxScore))
		}
		var n int64
		for _, f := range free {
			n += Fits(f, s, nets)
			if n >= capacity.MaxScore {
				n = capacity.MaxScore
				break
			}
		}
		byName[s.Name()] = int32(n)
	}
	out := make([]clusterv1alpha1.AddOnPlacementScoreItem, 0, len(byName))
	for name, v := range byName {
		out = append(out, clusterv1alpha1.AddOnPlacementScoreItem{Name: name, Value: v})
	}
	slices.SortFunc(out, func(a, b clusterv1alpha1.AddOnPlacementScoreItem) int { return strings.Compare(a.Name, b.Name) })
	return out
}
