package simulator

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// The simulator's node fit is its own, written as kube-scheduler's
// NodeResourcesFit filter and KubeVirt's virt-launcher scheduling do it,
// not shared with the agent's capacity arithmetic: a bug in one then shows
// as a disagreement in the tests instead of hiding in both.

// labelSchedulable is the label virt-handler puts on the nodes that can run
// VMs; virt-launcher pods select it. Test fleets whose nodes carry no such
// label at all stand for clusters where every node runs virt-handler.
const labelSchedulable = "kubevirt.io/schedulable"

// nodeRoom is what a node has left for one more pod.
type nodeRoom struct {
	Node        string
	CPU, Memory resource.Quantity
	// Extended are the extended resources left, such as a bridge's
	// bridge.network.kubevirt.io/bridge2003.
	Extended corev1.ResourceList
}

// fits tells whether requests fit in the room, as kube-scheduler's
// NodeResourcesFit does: every requested resource, extended ones included.
func (r nodeRoom) fits(requests corev1.ResourceList) bool {
	for name, q := range requests {
		var left resource.Quantity
		switch name {
		case corev1.ResourceCPU:
			left = r.CPU
		case corev1.ResourceMemory:
			left = r.Memory
		default:
			left = r.Extended[name]
		}
		if left.Cmp(q) < 0 {
			return false
		}
	}
	return true
}

// roomByNode returns, for every node a virt-launcher pod could land on, its
// allocatable CPU and memory minus the requests of the pods bound to it
// that still hold resources (kube-scheduler's PodRequests: containers,
// init containers, pod-level requests and overhead).
func roomByNode(nodes []corev1.Node, pods []corev1.Pod) []nodeRoom {
	anyLabelled := false
	for _, n := range nodes {
		if _, ok := n.Labels[labelSchedulable]; ok {
			anyLabelled = true
		}
	}
	var out []nodeRoom
	byName := map[string]int{}
	for _, n := range nodes {
		if n.Spec.Unschedulable || !ready(&n) || (anyLabelled && n.Labels[labelSchedulable] != "true") {
			continue
		}
		byName[n.Name] = len(out)
		room := nodeRoom{Node: n.Name, CPU: n.Status.Allocatable.Cpu().DeepCopy(), Memory: n.Status.Allocatable.Memory().DeepCopy(),
			Extended: corev1.ResourceList{}}
		for name, q := range n.Status.Allocatable {
			if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
				room.Extended[name] = q.DeepCopy()
			}
		}
		out = append(out, room)
	}
	for i := range pods {
		p := &pods[i]
		idx, ok := byName[p.Spec.NodeName]
		if !ok || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		req := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
		out[idx].CPU.Sub(req[corev1.ResourceCPU])
		out[idx].Memory.Sub(req[corev1.ResourceMemory])
		for name, q := range req {
			if left, ok := out[idx].Extended[name]; ok {
				left.Sub(q)
				out[idx].Extended[name] = left
			}
		}
	}
	return out
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
