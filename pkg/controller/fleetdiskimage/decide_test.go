package fleetdiskimage

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	workv1 "open-cluster-management.io/api/work/v1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// TestPlan: what happens to each copy of an image, at the edges a hub
// operator hits: one second before and at the end of the retention
// period, an untrusted cluster past retention, a copy still referenced
// by a VM FleetVM does not know, a copy being removed.
func TestPlan(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	retention := time.Hour
	work := func(cluster string) *workv1.ManifestWork {
		return &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: "fleetvm-image-team-a.rhel9"}}
	}
	unusedSince := func(d time.Duration) map[string]fleetv1alpha1.ImageClusterStatus {
		return map[string]fleetv1alpha1.ImageClusterStatus{"c": {Cluster: "c", LastReferencedTime: &metav1.Time{Time: now.Add(-d)}}}
	}
	type want struct {
		phase   fleetv1alpha1.ImagePhase
		ensure  bool
		prune   bool
		message string
	}
	cases := map[string]struct {
		in          observed
		want        want
		wantRequeue time.Duration
		// wantLastReferenced: the time the entry shows, nil for none.
		wantLastReferenced *time.Time
	}{
		"wanted and missing: distribute": {
			in:   observed{Wanted: map[string]struct{}{"c": {}}},
			want: want{ensure: true},
		},
		"unused, first seen: kept, the clock starts": {
			in:                 observed{Works: map[string]*workv1.ManifestWork{"c": work("c")}},
			want:               want{phase: fleetv1alpha1.ImagePhasePending, message: "unused since 2026-11-23T12:00:00Z; pruned after the retention period (1h0m0s)"},
			wantRequeue:        retention,
			wantLastReferenced: &now,
		},
		"unused one second short of retention: kept": {
			in:          observed{Works: map[string]*workv1.ManifestWork{"c": work("c")}, Previous: unusedSince(retention - time.Second)},
			want:        want{phase: fleetv1alpha1.ImagePhasePending, message: "unused since 2026-11-23T11:00:01Z; pruned after the retention period (1h0m0s)"},
			wantRequeue: time.Second,
		},
		"unused for exactly the retention period: pruned": {
			in:   observed{Works: map[string]*workv1.ManifestWork{"c": work("c")}, Previous: unusedSince(retention)},
			want: want{phase: fleetv1alpha1.ImagePhasePruning, prune: true, message: "unused for longer than the retention period (1h0m0s); removing it"},
		},
		"past retention on an untrusted cluster: kept": {
			in: observed{Works: map[string]*workv1.ManifestWork{"c": work("c")}, Previous: unusedSince(10 * retention),
				Untrusted: map[string]string{"c": "the cluster is not available"}},
			want: want{phase: fleetv1alpha1.ImagePhasePending, message: "unused, but not pruned: the cluster is not available"},
		},
		"past retention, referenced by a VM FleetVM does not manage: kept": {
			in: observed{Works: map[string]*workv1.ManifestWork{"c": work("c")}, Previous: unusedSince(10 * retention),
				Usage: Usage{ByCluster: map[string]int32{"c": 1}}},
			want: want{ensure: true},
		},
		"being removed": {
			in: observed{Works: map[string]*workv1.ManifestWork{"c": func() *workv1.ManifestWork {
				w := work("c")
				w.DeletionTimestamp = &metav1.Time{Time: now}
				return w
			}()}},
			want:               want{phase: fleetv1alpha1.ImagePhasePruning, message: "removing the image from the cluster"},
			wantLastReferenced: &now,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := tc.in
			in.Now, in.Retention = now, retention
			steps, requeue := plan(in)
			if len(steps) != 1 {
				t.Fatalf("%d steps, want 1: %+v", len(steps), steps)
			}
			s := steps[0]
			got := want{phase: s.Entry.Phase, ensure: s.Ensure, prune: s.Prune != nil, message: s.Entry.Message}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("step (-want,+got):\n%s", diff)
			}
			if requeue != tc.wantRequeue {
				t.Errorf("requeue %s, want %s", requeue, tc.wantRequeue)
			}
			if tc.wantLastReferenced != nil {
				if lr := s.Entry.LastReferencedTime; lr == nil || !lr.Time.Equal(*tc.wantLastReferenced) {
					t.Errorf("lastReferencedTime %v, want %v", lr, tc.wantLastReferenced)
				}
			}
		})
	}
}

// TestPlanNeverPrunesInUse: whatever the clock and the status say, a copy
// a FleetVirtualMachine wants or a VM references is never pruned.
func TestPlanNeverPrunesInUse(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for _, ago := range []time.Duration{0, time.Second, time.Hour, 1000 * time.Hour} {
		for _, in := range []observed{
			{Wanted: map[string]struct{}{"c": {}}},
			{Usage: Usage{ByCluster: map[string]int32{"c": 2}}},
		} {
			in.Now, in.Retention = now, time.Minute
			in.Works = map[string]*workv1.ManifestWork{"c": {ObjectMeta: metav1.ObjectMeta{Namespace: "c", Name: "w"}}}
			in.Previous = map[string]fleetv1alpha1.ImageClusterStatus{"c": {Cluster: "c", LastReferencedTime: &metav1.Time{Time: now.Add(-ago)}}}
			steps, _ := plan(in)
			for _, s := range steps {
				if s.Prune != nil {
					t.Errorf("unused-since %s ago, wanted %v, references %v: pruned", ago, in.Wanted, in.Usage.ByCluster)
				}
				if s.Entry.LastReferencedTime != nil {
					t.Errorf("in use, but lastReferencedTime is set: %v", s.Entry.LastReferencedTime)
				}
			}
		}
	}
}
