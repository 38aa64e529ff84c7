package simulator

import (
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	agentcapacity "github.com/fleetvm/fleetvm/pkg/agent/capacity"
)

// TestRoomAgreesWithTheAgent: the simulator places virt-launcher pods with
// its own arithmetic (kube-scheduler's pod requests); the agent scores
// capacity with its own. On random nodes and pods (init containers,
// overhead, terminated pods, cordoned and not-ready nodes, the
// kubevirt.io/schedulable label) they must agree on every node's room, or
// the agent would promise room the "cluster" does not give, or the reverse.
func TestRoomAgreesWithTheAgent(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	q := func(upTo int, unit string) resource.Quantity {
		return resource.MustParse(fmt.Sprintf("%d%s", rng.IntN(upTo), unit))
	}
	for round := range 500 {
		var nodes []corev1.Node
		labelled := rng.IntN(2) == 0
		for i := range 1 + rng.IntN(4) {
			n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i), Labels: map[string]string{}}}
			n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: q(16000, "m"), corev1.ResourceMemory: q(64, "Gi")}
			ready := corev1.ConditionTrue
			if rng.IntN(6) == 0 {
				ready = corev1.ConditionFalse
			}
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}
			n.Spec.Unschedulable = rng.IntN(6) == 0
			if labelled {
				n.Labels[labelSchedulable] = []string{"true", "true", "false"}[rng.IntN(3)]
			}
			nodes = append(nodes, n)
		}
		var pods []corev1.Pod
		for i := range rng.IntN(8) {
			p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i)}}
			p.Spec.NodeName = fmt.Sprintf("n%d", rng.IntN(5))
			for range 1 + rng.IntN(2) {
				p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: q(3000, "m"), corev1.ResourceMemory: q(8, "Gi")}}})
			}
			if rng.IntN(3) == 0 {
				p.Spec.InitContainers = []corev1.Container{{Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: q(6000, "m"), corev1.ResourceMemory: q(16, "Gi")}}}}
			}
			if rng.IntN(3) == 0 {
				p.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: q(500, "m"), corev1.ResourceMemory: q(512, "Mi")}
			}
			p.Status.Phase = []corev1.PodPhase{corev1.PodRunning, corev1.PodRunning, corev1.PodPending, corev1.PodSucceeded, corev1.PodFailed}[rng.IntN(5)]
			pods = append(pods, p)
		}

		agent := map[string]agentcapacity.Free{}
		for _, f := range agentcapacity.FreeByNode(nodes, pods) {
			agent[f.Node] = f
		}
		sim := roomByNode(nodes, pods)
		if len(sim) != len(agent) {
			t.Fatalf("round %d: the simulator sees %d nodes with room, the agent %d", round, len(sim), len(agent))
		}
		for _, r := range sim {
			a, ok := agent[r.Node]
			if !ok {
				t.Fatalf("round %d: node %s: the simulator would place pods there, the agent does not count it", round, r.Node)
			}
			for _, c := range []struct {
				what     string
				sim, agt resource.Quantity
			}{{"CPU", r.CPU, a.CPU}, {"memory", r.Memory, a.Memory}} {
				if c.sim.Sign() < 0 {
					c.sim = resource.Quantity{} // the agent reports no room as 0
				}
				if c.sim.Cmp(c.agt) != 0 {
					t.Fatalf("round %d: node %s %s: simulator %s, agent %s", round, r.Node, c.what, c.sim.String(), c.agt.String())
				}
			}
		}
	}
}
