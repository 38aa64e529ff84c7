package fleetvirtualmachine

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

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
		in       overlayInput
		want     overlayChoice
		wantWait time.Duration
	}{
		"newly placed: its label at once": {
			in:   overlayInput{Label: "prod", LabelKnown: true, Placed: true},
			want: overlayChoice{Environment: "prod"},
		},
		"status lost (hub restored): the label at once": {
			in:   overlayInput{Previous: nil, Label: "dev", LabelKnown: true, Placed: true},
			want: overlayChoice{Environment: "dev"},
		},
		"label unchanged: nothing pending": {
			in:   overlayInput{Previous: delivered("prod"), Label: "prod", LabelKnown: true, Placed: true},
			want: overlayChoice{Environment: "prod"},
		},
		"relabelled: the overlay stays, the new label waits from now (rounded up to a second)": {
			in:       overlayInput{Previous: delivered("prod"), Label: "staging", LabelKnown: true, Placed: true, Now: now.Add(300 * time.Millisecond)},
			want:     overlayChoice{Environment: "prod", Pending: "staging", PendingSince: at(time.Second)},
			wantWait: grace + time.Second - 300*time.Millisecond,
		},
		"label removed: waits like any other value": {
			in:       overlayInput{Previous: delivered("prod"), Label: "", LabelKnown: true, Placed: true},
			want:     overlayChoice{Environment: "prod", Pending: "", PendingSince: at(0)},
			wantWait: grace,
		},
		"new label held for less than the grace period: no switch": {
			in:       overlayInput{Previous: pending("prod", "staging", at(-grace+time.Second)), Label: "staging", LabelKnown: true, Placed: true},
			want:     overlayChoice{Environment: "prod", Pending: "staging", PendingSince: at(-grace + time.Second)},
			wantWait: time.Second,
		},
		"new label held for the grace period: switch": {
			in:   overlayInput{Previous: pending("prod", "staging", at(-grace)), Label: "staging", LabelKnown: true, Placed: true},
			want: overlayChoice{Environment: "staging"},
		},
		"new label held past the grace period: switch": {
			in:   overlayInput{Previous: pending("prod", "staging", at(-grace-time.Hour)), Label: "staging", LabelKnown: true, Placed: true},
			want: overlayChoice{Environment: "staging"},
		},
		"label flaps back before the grace period: no switch, nothing pending": {
			in:   overlayInput{Previous: pending("prod", "staging", at(-time.Minute)), Label: "prod", LabelKnown: true, Placed: true},
			want: overlayChoice{Environment: "prod"},
		},
		"label flaps back after the grace period (not seen in between): no switch": {
			in:   overlayInput{Previous: pending("prod", "staging", at(-grace-time.Minute)), Label: "prod", LabelKnown: true, Placed: true},
			want: overlayChoice{Environment: "prod"},
		},
		"label changes again while pending: the wait restarts for the new value": {
			in:       overlayInput{Previous: pending("prod", "staging", at(-grace-time.Minute)), Label: "test", LabelKnown: true, Placed: true},
			want:     overlayChoice{Environment: "prod", Pending: "test", PendingSince: at(0)},
			wantWait: grace,
		},
		"removed label pending, a value comes back: the wait restarts": {
			in:       overlayInput{Previous: pending("prod", "", at(-grace)), Label: "staging", LabelKnown: true, Placed: true},
			want:     overlayChoice{Environment: "prod", Pending: "staging", PendingSince: at(0)},
			wantWait: grace,
		},
		"leaving copy keeps the overlay it was placed for": {
			in:   overlayInput{Previous: pending("prod", "staging", at(-grace-time.Minute)), Label: "staging", LabelKnown: true, Placed: false},
			want: overlayChoice{Environment: "prod"},
		},
		"cluster cannot be read: everything kept": {
			in:       overlayInput{Previous: pending("prod", "staging", at(-time.Minute)), LabelKnown: false, Placed: true},
			want:     overlayChoice{Environment: "prod", Pending: "staging", PendingSince: at(-time.Minute)},
			wantWait: grace - time.Minute,
		},
		"no grace period: switch within the second": {
			in:       overlayInput{Previous: delivered("prod"), Label: "staging", LabelKnown: true, Placed: true, GracePeriod: -1},
			want:     overlayChoice{Environment: "staging"},
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
			got := chooseOverlay(in)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("overlay (-want,+got):\n%s", diff)
			}
			if w := overlayWait(got.PendingSince, in.Now, in.GracePeriod); w != tc.wantWait {
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
			if got := overlayWake(tc.clusters, now, grace); got != tc.want {
				t.Errorf("wake = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestOverlayThroughStatusAndTargets follows a relabelled cluster through
// the status (computeStatus records the overlay) and the ApplicationSet's
// elements (deliveryTargets delivers what the status records): the old
// environment until the new label has held for the grace period, then the
// new one; a newly placed cluster gets its label at once.
func TestOverlayThroughStatusAndTargets(t *testing.T) {
	const grace = 5 * time.Minute
	start := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	r := &Reconciler{Clock: clk, Config: Config{EnvironmentLabel: "env", GracePeriod: grace}}
	fvm := &fleetv1alpha1.FleetVirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}
	labels := map[string]string{"a": "prod", "b": "prod"}
	reconcile := func(clusters ...string) []deliveryTarget {
		t.Helper()
		obs := &observation{Facts: map[string]clusterFacts{}}
		in := statusInputs{GracePeriod: grace, Outcome: placed(clusters...), Previous: fvm.Status,
			Now: metav1.NewTime(clk.Now()), Clusters: map[string]clusterInfo{}}
		for _, c := range clusters {
			obs.Facts[c] = clusterFacts{Cluster: &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: c, Labels: map[string]string{"env": labels[c]}}}}
			in.Clusters[c] = clusterInfo{Environment: labels[c], Available: metav1.ConditionTrue}
		}
		fvm.Status = computeStatus(in)
		return r.deliveryTargets(fvm, obs, in.Outcome)
	}
	expect := func(what string, got []deliveryTarget, want ...deliveryTarget) {
		t.Helper()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: targets (-want,+got):\n%s", what, diff)
		}
	}

	expect("placed", reconcile("a"), deliveryTarget{Name: "a", Environment: "prod"})
	labels["a"] = "dev"
	expect("relabelled", reconcile("a"), deliveryTarget{Name: "a", Environment: "prod"})
	if e := fvm.Status.Clusters[0]; e.Environment != "prod" || e.PendingEnvironment != "dev" || e.PendingEnvironmentSince == nil ||
		!e.PendingEnvironmentSince.Time.Equal(start) {
		t.Errorf("status entry after the relabel: %+v, want environment prod, pending dev since %v", e, start)
	}
	clk.Step(grace - time.Second)
	labels["b"] = "dev"
	expect("a: label held for less than the grace period; b: newly placed", reconcile("a", "b"),
		deliveryTarget{Name: "a", Environment: "prod"}, deliveryTarget{Name: "b", Environment: "dev"})
	clk.Step(time.Second)
	expect("label held for the grace period", reconcile("a", "b"),
		deliveryTarget{Name: "a", Environment: "dev"}, deliveryTarget{Name: "b", Environment: "dev"})
	if e := fvm.Status.Clusters[0]; e.PendingEnvironment != "" || e.PendingEnvironmentSince != nil {
		t.Errorf("status entry after the switch still pending: %+v", e)
	}
	labels["a"] = "prod"
	expect("relabelled back", reconcile("a", "b"),
		deliveryTarget{Name: "a", Environment: "dev"}, deliveryTarget{Name: "b", Environment: "dev"})
	clk.Step(time.Minute)
	labels["a"] = "dev"
	clk.Step(grace)
	expect("flapped back before the grace period", reconcile("a", "b"),
		deliveryTarget{Name: "a", Environment: "dev"}, deliveryTarget{Name: "b", Environment: "dev"})
}
