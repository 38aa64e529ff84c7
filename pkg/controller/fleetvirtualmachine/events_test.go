package fleetvirtualmachine

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// TestTransitionEvents: a rollout without trouble gives one event (Ready);
// trouble and the recovery from it give one each.
func TestTransitionEvents(t *testing.T) {
	c := func(status metav1.ConditionStatus, reason string) *metav1.Condition {
		return &metav1.Condition{Status: status, Reason: reason}
	}
	cases := []struct {
		name      string
		condition string
		old, cur  *metav1.Condition
		want      string // "" for no event
	}{
		{"placed first time", "Placed", nil, c("Unknown", "PlacementPending"), ""},
		{"placed", "Placed", c("Unknown", "PlacementPending"), c("True", "ClustersDecided"), ""},
		{"no cluster", "Placed", c("Unknown", "PlacementPending"), c("False", "NoClusters"), "Warning"},
		{"another reason", "Placed", c("False", "NoClusters"), c("False", "NotEnoughClusters"), "Warning"},
		{"placed after all", "Placed", c("False", "NotEnoughClusters"), c("True", "ClustersDecided"), "Normal"},
		{"delivered", "Delivered", c("Unknown", "Reconciling"), c("True", "ApplicationSetReady"), ""},
		{"waiting for Argo CD", "Delivered", c("Unknown", "Reconciling"), c("False", "ApplicationsMissing"), ""},
		{"delivered after waiting", "Delivered", c("False", "ApplicationsMissing"), c("True", "ApplicationSetReady"), ""},
		{"Applications lost", "Delivered", c("True", "ApplicationSetReady"), c("False", "ApplicationsMissing"), "Warning"},
		{"Applications back", "Delivered", c("False", "ApplicationsMissing"), c("True", "ApplicationSetReady"), ""},
		{"delivery failed", "Delivered", c("True", "ApplicationSetReady"), c("False", "SyncFailed"), "Warning"},
		{"rolling out", "Ready", nil, c("False", "NotEnoughReady"), ""},
		{"still rolling out", "Ready", c("False", "NotEnoughReady"), c("False", "SomeNotReady"), ""},
		{"ready", "Ready", c("False", "SomeNotReady"), c("True", "AllReady"), "Normal"},
		{"lost readiness", "Ready", c("True", "AllReady"), c("False", "SomeNotReady"), "Warning"},
		{"unchanged", "Ready", c("True", "AllReady"), c("True", "AllReady"), ""},
	}
	for _, tc := range cases {
		kind, ok := transitionEvent(tc.condition, tc.old, tc.cur)
		if (tc.want != "") != ok || kind != tc.want {
			t.Errorf("%s: event %q (%v), want %q", tc.name, kind, ok, tc.want)
		}
	}
}

// TestRolloutEvents: an event each time the rollout's revision or phase
// changes, a Warning when it failed; none while it stands still.
func TestRolloutEvents(t *testing.T) {
	r := func(rev int64, phase string) *fleetv1alpha1.RolloutStatus {
		return &fleetv1alpha1.RolloutStatus{Revision: rev, PreviousRevision: rev - 1, Phase: fleetv1alpha1.RolloutPhase(phase), Message: "m"}
	}
	cases := []struct {
		name         string
		old, cur     *fleetv1alpha1.RolloutStatus
		kind, reason string // "" for no event
	}{
		{"no rollout", nil, nil, "", ""},
		{"first revision", nil, r(1, "Progressing"), "Normal", "RolloutProgressing"},
		{"still progressing", r(1, "Progressing"), r(1, "Progressing"), "", ""},
		{"succeeded", r(1, "Progressing"), r(1, "Succeeded"), "Normal", "RolloutSucceeded"},
		{"a new revision", r(1, "Succeeded"), r(2, "Progressing"), "Normal", "RolloutProgressing"},
		{"failed", r(2, "Progressing"), r(2, "Failed"), "Warning", "RolloutFailed"},
		{"rollout removed", r(2, "Failed"), nil, "", ""},
	}
	for _, tc := range cases {
		kind, reason, msg, ok := rolloutEvent(tc.old, tc.cur)
		if (tc.kind != "") != ok || kind != tc.kind || reason != tc.reason {
			t.Errorf("%s: event %q %q (%v), want %q %q", tc.name, kind, reason, ok, tc.kind, tc.reason)
		}
		if ok && msg != fmt.Sprintf("revision %d (previous %d): %s: m", tc.cur.Revision, tc.cur.PreviousRevision, tc.cur.Phase) {
			t.Errorf("%s: message %q", tc.name, msg)
		}
	}
}
