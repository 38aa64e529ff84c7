package placement

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

func TestChooseOverlay(t *testing.T) {
	const grace = 5 * time.Minute
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { return ptrTime(metav1.NewTime(now.Add(d))) }
	delivered := func(env string) *fleetv1alpha1.ClusterStatus {
		return &fleetv1alpha1.ClusterStatus{Cluster: "a", Environment: env}
	}
	pending := func(env, next string, since *metav1.Time) *fleetv1alpha1.ClusterStatus {
		return &fleetv1alpha1.ClusterStatus{Cluster: "a", Environment: env, PendingEnvironment: next, PendingEnvironmentSince: since}
	}
	cases := map[string]struct {
		in       OverlayInput
		want     OverlayChoice
		wantWait time.Duration
	}{
		"newly placed: its label at once": {
			in:   OverlayInput{Label: "prod", LabelKnown: true, Placed: true},
			want: OverlayChoice{Environment: "prod"},
		},
		"status lost (hub restored): the label at once": {
			in:   OverlayInput{Previous: nil, Label: "dev", LabelKnown: true, Placed: true},
			want: OverlayChoice{Environment: "dev"},
		},
		"label unchanged: nothing pending": {
			in:   OverlayInput{Previous: delivered("prod"), Label: "prod", LabelKnown: true, Placed: true},
			want: OverlayChoice{Environment: "prod"},
		},
		"relabelled: the overlay stays, the new label waits from now (rounded up to a second)": {
			in:       OverlayInput{Previous: delivered("prod"), Label: "staging", LabelKnown: true, Placed: true, Now: now.Add(300 * time.Millisecond)},
			want:     OverlayChoice{Environment: "prod", Pending: "staging", PendingSince: at(time.Second)},
			wantWait: grace + time.Second - 300*time.Millisecond,
		},
		"label removed: waits like any other value": {
			in:       OverlayInput{Previous: delivered("prod"), Label: "", LabelKnown: true, Placed: true},
			want:     OverlayChoice{Environment: "prod", Pending: "", PendingSince: at(0)},
			wantWait: grace,
		},
		"new label held for less than the grace period: no switch": {
			in:       OverlayInput{Previous: pending("prod", "staging", at(-grace+time.Second)), Label: "staging", LabelKnown: true, Placed: true},
			want:     OverlayChoice{Environment: "prod", Pending: "staging", PendingSince: at(-grace + time.Second)},
			wantWait: time.Second,
		},
		"new label held for the grace period: switch": {
			in:   OverlayInput{Previous: pending("prod", "staging", at(-grace)), Label: "staging", LabelKnown: true, Placed: true},
			want: OverlayChoice{Environment: "staging"},
		},
		"new label held past the grace period: switch": {
			in:   OverlayInput{Previous: pending("prod", "staging", at(-grace-time.Hour)), Label: "staging", LabelKnown: true, Placed: true},
			want: OverlayChoice{Environment: "staging"},
		},
		"label flaps back before the grace period: no switch, nothing pending": {
			in:   OverlayInput{Previous: pending("prod", "staging", at(-time.Minute)), Label: "prod", LabelKnown: true, Placed: true},
			want: OverlayChoice{Environment: "prod"},
		},
		"label flaps back after the grace period (not seen in between): no switch": {
			in:   OverlayInput{Previous: pending("prod", "staging", at(-grace-time.Minute)), Label: "prod", LabelKnown: true, Placed: true},
			want: OverlayChoice{Environment: "prod"},
		},
		"label changes again while pending: the wait restarts for the new value": {
			in:       OverlayInput{Previous: pending("prod", "staging", at(-grace-time.Minute)), Label: "test", LabelKnown: true, Placed: true},
			want:     OverlayChoice{Environment: "prod", Pending: "test", PendingSince: at(0)},
			wantWait: grace,
		},
		"removed label pending, a value comes back: the wait restarts": {
			in:       OverlayInput{Previous: pending("prod", "", at(-grace)), Label: "staging", LabelKnown: true, Placed: true},
			want:     OverlayChoice{Environment: "prod", Pending: "staging", PendingSince: at(0)},
			wantWait: grace,
		},
		"leaving copy keeps the overlay it was placed for": {
			in:   OverlayInput{Previous: pending("prod", "staging", at(-grace-time.Minute)), Label: "staging", LabelKnown: true, Placed: false},
			want: OverlayChoice{Environment: "prod"},
		},
		"cluster cannot be read: everything kept": {
			in:       OverlayInput{Previous: pending("prod", "staging", at(-time.Minute)), LabelKnown: false, Placed: true},
			want:     OverlayChoice{Environment: "prod", Pending: "staging", PendingSince: at(-time.Minute)},
			wantWait: grace - time.Minute,
		},
		"no grace period: switch within the second": {
			in:       OverlayInput{Previous: delivered("prod"), Label: "staging", LabelKnown: true, Placed: true, GracePeriod: -1},
			want:     OverlayChoice{Environment: "staging"},
			wantWait: 0,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := tc.in
			if in.Now.IsZero() {
				in.Now = now
			}
			if in.GracePeriod == 0 {
				in.GracePeriod = grace
			} else if in.GracePeriod < 0 {
				in.GracePeriod = 0
			}
			got := ChooseOverlay(in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("overlay (-want,+got):\n%s", diff)
			}
			if w := OverlayWait(got.PendingSince, in.Now, in.GracePeriod); w != tc.wantWait {
				t.Errorf("wait = %v, want %v", w, tc.wantWait)
			}
		})
	}
}

// TestOverlayWake: the reconcile wakes when the first pending switch is
// due, at once for one already due, never without one.
func TestOverlayWake(t *testing.T) {
	const grace = 5 * time.Minute
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	since := func(ago time.Duration) *metav1.Time { return ptrTime(metav1.NewTime(now.Add(-ago))) }
	cases := map[string]struct {
		clusters []fleetv1alpha1.ClusterStatus
		want     time.Duration
	}{
		"nothing pending": {
			clusters: []fleetv1alpha1.ClusterStatus{{Cluster: "a", Environment: "prod"}},
			want:     0,
		},
		"the earliest of two": {
			clusters: []fleetv1alpha1.ClusterStatus{
				{Cluster: "a", PendingEnvironment: "dev", PendingEnvironmentSince: since(time.Minute)},
				{Cluster: "b", PendingEnvironment: "dev", PendingEnvironmentSince: since(3 * time.Minute)},
				{Cluster: "c"},
			},
			want: 2 * time.Minute,
		},
		"already due: at once": {
			clusters: []fleetv1alpha1.ClusterStatus{{Cluster: "a", PendingEnvironmentSince: since(grace + time.Second)}},
			want:     time.Millisecond,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := OverlayWake(tc.clusters, now, grace); got != tc.want {
				t.Errorf("wake = %v, want %v", got, tc.want)
			}
		})
	}
}
