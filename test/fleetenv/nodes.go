package fleetenv

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Node describes a spoke node. Spokes have no kubelet: the node is an API
// object with the capacity a real node would report.
type Node struct {
	Name string
	// CPU and Memory are the allocatable quantities, such as "16" and "64Gi".
	CPU, Memory string
	Labels      map[string]string
	// Unschedulable marks the node cordoned.
	Unschedulable bool
	// Extended are extended resources the node offers, such as a bridge's
	// "bridge.network.kubevirt.io/bridge2003": "1k".
	Extended map[corev1.ResourceName]string
}

// CreateNode creates a Ready node with the given allocatable capacity.
func (c *Cluster) CreateNode(ctx context.Context, n Node) (*corev1.Node, error) {
	cpu, err := resource.ParseQuantity(n.CPU)
	if err != nil {
		return nil, fmt.Errorf("node %s cpu: %w", n.Name, err)
	}
	mem, err := resource.ParseQuantity(n.Memory)
	if err != nil {
		return nil, fmt.Errorf("node %s memory: %w", n.Name, err)
	}
	labels := map[string]string{corev1.LabelHostname: n.Name}
	for k, v := range n.Labels {
		labels[k] = v
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels},
		Spec:       corev1.NodeSpec{Unschedulable: n.Unschedulable},
	}
	if err := c.Client.Create(ctx, node); err != nil {
		return nil, fmt.Errorf("create node %s on %s: %w", n.Name, c.Name, err)
	}
	resources := corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem, corev1.ResourcePods: resource.MustParse("110")}
	for name, q := range n.Extended {
		v, err := resource.ParseQuantity(q)
		if err != nil {
			return nil, fmt.Errorf("node %s %s: %w", n.Name, name, err)
		}
		resources[name] = v
	}
	node.Status = corev1.NodeStatus{
		Capacity:    resources,
		Allocatable: resources,
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
		}},
	}
	if err := c.Client.Status().Update(ctx, node); err != nil {
		return nil, fmt.Errorf("update node %s status on %s: %w", n.Name, c.Name, err)
	}
	return node, nil
}

// Pod describes a pod bound to a node, holding resource requests.
type Pod struct {
	Namespace, Name, Node string
	// CPU and Memory are the requests, such as "2" and "4Gi".
	CPU, Memory string
	Labels      map[string]string
	// Phase is the pod phase; Running when empty.
	Phase corev1.PodPhase
}

// CreatePod creates a pod already bound to its node, in the given phase.
func (c *Cluster) CreatePod(ctx context.Context, p Pod) (*corev1.Pod, error) {
	if err := ensureNamespace(ctx, c.Client, p.Namespace); err != nil {
		return nil, err
	}
	requests := corev1.ResourceList{}
	for name, q := range map[corev1.ResourceName]string{corev1.ResourceCPU: p.CPU, corev1.ResourceMemory: p.Memory} {
		if q == "" {
			continue
		}
		v, err := resource.ParseQuantity(q)
		if err != nil {
			return nil, fmt.Errorf("pod %s/%s %s: %w", p.Namespace, p.Name, name, err)
		}
		requests[name] = v
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels},
		Spec: corev1.PodSpec{
			NodeName: p.Node,
			Containers: []corev1.Container{{
				Name: "main", Image: "registry.invalid/placeholder",
				Resources: corev1.ResourceRequirements{Requests: requests},
			}},
		},
	}
	if err := c.Client.Create(ctx, pod); err != nil {
		return nil, fmt.Errorf("create pod %s/%s on %s: %w", p.Namespace, p.Name, c.Name, err)
	}
	phase := p.Phase
	if phase == "" {
		phase = corev1.PodRunning
	}
	pod.Status.Phase = phase
	if err := c.Client.Status().Update(ctx, pod); err != nil {
		return nil, fmt.Errorf("update pod %s/%s status on %s: %w", p.Namespace, p.Name, c.Name, err)
	}
	return pod, nil
}

// EnsureNamespace creates a namespace on the cluster if it does not exist.
func (c *Cluster) EnsureNamespace(ctx context.Context, name string) error {
	return ensureNamespace(ctx, c.Client, name)
}
