package fleetvirtualmachine

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
