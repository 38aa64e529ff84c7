package fleetvirtualmachine

import (
	"testing"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
)

// TestRescheduleToken: a waiting FleetVirtualMachine whose inputs say some
// clusters qualify gets one token per set of them, whatever their order;
// otherwise the Placement keeps the token it has, so nothing is written.
func TestRescheduleToken(t *testing.T) {
	current := &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{rescheduleAnnotation: "old"}}}
	ab := rescheduleToken(current, true, []string{"a", "b"})
	if ab == "old" || ab == "" || ab != rescheduleToken(nil, true, []string{"b", "a"}) {
		t.Errorf("token for {a, b} = %q, want a new one, the same in any order", ab)
	}
	if abc := rescheduleToken(current, true, []string{"a", "b", "c"}); abc == ab {
		t.Errorf("{a, b, c} has the token of {a, b}")
	}
	for name, got := range map[string]string{
		"not waiting":    rescheduleToken(current, false, []string{"a"}),
		"none qualifies": rescheduleToken(current, true, nil),
	} {
		if got != "old" {
			t.Errorf("%s: token %q, want the Placement's own %q", name, got, "old")
		}
	}
	if got := rescheduleToken(nil, false, nil); got != "" {
		t.Errorf("no Placement: token %q, want none", got)
	}
}

// TestWaitingForClusters: a FleetVirtualMachine is woken by capacity
// changes while its status leaves clusters out and it has fewer than it
// asks for, or asks for every cluster that qualifies (an expired score
// leaves a cluster out without the scheduler's decision changing).
func TestWaitingForClusters(t *testing.T) {
	excluded := &fleetv1alpha1.PlacementStatus{Excluded: []fleetv1alpha1.ExclusionCount{{Reason: "AgentNotReporting", Count: 1}}}
	placed := func(s metav1.ConditionStatus) []metav1.Condition {
		return []metav1.Condition{{Type: fleetv1alpha1.ConditionPlaced, Status: s}}
	}
	cases := map[string]struct {
		clusters   *int32
		placement  *fleetv1alpha1.PlacementStatus
		conditions []metav1.Condition
		want       bool
	}{
		"fewer than asked, some left out": {ptr.To(int32(3)), excluded, placed(metav1.ConditionFalse), true},
		"placed as asked":                 {ptr.To(int32(3)), excluded, placed(metav1.ConditionTrue), false},
		"every cluster, some left out":    {nil, excluded, placed(metav1.ConditionTrue), true},
		"every cluster, none left out":    {nil, &fleetv1alpha1.PlacementStatus{}, placed(metav1.ConditionTrue), false},
		"no placement recorded yet":       {nil, nil, nil, false},
	}
	for name, c := range cases {
		f := &fleetv1alpha1.FleetVirtualMachine{}
		f.Spec.Placement.Clusters = c.clusters
		f.Status.Placement, f.Status.Conditions = c.placement, c.conditions
		if got := waitingForClusters(f); got != c.want {
			t.Errorf("%s: waitingForClusters = %v, want %v", name, got, c.want)
		}
	}
}
