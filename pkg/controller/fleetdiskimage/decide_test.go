package fleetdiskimage

import (
	"fmt"
	"strings"
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

// TestPlanDeletion: deleting a FleetDiskImage removes its copies by the
// prune rules, less the retention period: never on a cluster that is
// unavailable or whose inventory is stale or missing, never where it is in
// use; it waits, and says for which clusters and why, bounded.
func TestPlanDeletion(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	works := func(clusters ...string) map[string]*workv1.ManifestWork {
		out := map[string]*workv1.ManifestWork{}
		for _, c := range clusters {
			out[c] = &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: c, Name: "fleetvm-image-team-a.rhel9"}}
		}
		return out
	}
	removing := func(c string) map[string]*workv1.ManifestWork {
		w := works(c)
		w[c].DeletionTimestamp = &metav1.Time{Time: now}
		return w
	}
	type entry struct {
		Cluster string
		Phase   fleetv1alpha1.ImagePhase
		Message string
	}
	const (
		stale = "the cluster's image inventory is stale (not confirmed for more than 15m0s)"
		down  = "the cluster is not available"
	)
	cases := map[string]struct {
		in          observed
		wantRemove  []string
		wantEntries []entry
		wantWaiting string
		wantDone    bool
		wantRequeue time.Duration
	}{
		"no copy left: done": {
			wantDone: true,
		},
		"trusted clusters: every copy removed": {
			in:         observed{Works: works("a", "b")},
			wantRemove: []string{"a", "b"},
			wantEntries: []entry{
				{"a", fleetv1alpha1.ImagePhasePruning, "the FleetDiskImage is being deleted; removing it"},
				{"b", fleetv1alpha1.ImagePhasePruning, "the FleetDiskImage is being deleted; removing it"},
			},
		},
		"an unavailable cluster and a stale inventory: kept, the deletion waits and says so": {
			in:         observed{Works: works("a", "b", "c"), Untrusted: map[string]string{"b": down, "c": stale}},
			wantRemove: []string{"a"},
			wantEntries: []entry{
				{"a", fleetv1alpha1.ImagePhasePruning, "the FleetDiskImage is being deleted; removing it"},
				{"b", fleetv1alpha1.ImagePhasePending, "the FleetDiskImage is being deleted; not removed here yet: " + down},
				{"c", fleetv1alpha1.ImagePhasePending, "the FleetDiskImage is being deleted; not removed here yet: " + stale},
			},
			wantWaiting: "waiting to remove the image from 2 clusters where it cannot go yet: b (" + down + "), c (" + stale + ")",
			wantRequeue: deletionRecheck,
		},
		"referenced where the fresh inventory says so: kept": {
			in:         observed{Works: works("a", "b"), Usage: Usage{ByCluster: map[string]int32{"b": 1}}},
			wantRemove: []string{"a"},
			wantEntries: []entry{
				{"a", fleetv1alpha1.ImagePhasePruning, "the FleetDiskImage is being deleted; removing it"},
				{"b", fleetv1alpha1.ImagePhasePending, "the FleetDiskImage is being deleted; kept while it is in use here"},
			},
			wantWaiting: "waiting to remove the image from 1 clusters where it cannot go yet: b (in use)",
			wantRequeue: deletionRecheck,
		},
		"wanted by a FleetVirtualMachine there: kept": {
			in: observed{Works: works("a"), Wanted: map[string]struct{}{"a": {}}},
			wantEntries: []entry{
				{"a", fleetv1alpha1.ImagePhasePending, "the FleetDiskImage is being deleted; kept while it is in use here"},
			},
			wantWaiting: "waiting to remove the image from 1 clusters where it cannot go yet: a (in use)",
			wantRequeue: deletionRecheck,
		},
		"a copy being removed: not done, nothing to wait for but its removal": {
			in:          observed{Works: removing("a")},
			wantEntries: []entry{{"a", fleetv1alpha1.ImagePhasePruning, "removing the image from the cluster"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := tc.in
			in.Now = now
			d := planDeletion(in)
			var removed []string
			for _, w := range d.Remove {
				removed = append(removed, w.Namespace)
			}
			if diff := cmp.Diff(tc.wantRemove, removed); diff != "" {
				t.Errorf("removed (-want,+got):\n%s", diff)
			}
			var entries []entry
			for _, e := range d.Entries {
				entries = append(entries, entry{e.Cluster, e.Phase, e.Message})
			}
			if diff := cmp.Diff(tc.wantEntries, entries); diff != "" {
				t.Errorf("entries (-want,+got):\n%s", diff)
			}
			if d.Waiting != tc.wantWaiting || d.Done != tc.wantDone || d.Requeue != tc.wantRequeue {
				t.Errorf("waiting %q done %v requeue %s, want %q %v %s", d.Waiting, d.Done, d.Requeue, tc.wantWaiting, tc.wantDone, tc.wantRequeue)
			}
		})
	}
}

// TestPlanDeletionMessageBounded: at any fleet size the message names the
// first few clusters and counts the rest.
func TestPlanDeletionMessageBounded(t *testing.T) {
	in := observed{Works: map[string]*workv1.ManifestWork{}, Untrusted: map[string]string{}}
	for i := range 5000 {
		c := fmt.Sprintf("%063d", i)
		in.Works[c] = &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: c, Name: "w"}}
		in.Untrusted[c] = "the cluster's image inventory is stale (not confirmed for more than 15m0s)"
	}
	d := planDeletion(in)
	if len(d.Remove) != 0 {
		t.Fatalf("removed %d copies on untrusted clusters", len(d.Remove))
	}
	if !strings.Contains(d.Waiting, "5000 clusters") || !strings.HasSuffix(d.Waiting, "and 4995 more") || len(d.Waiting) > 1024 {
		t.Errorf("message of %d characters, want the count, five names and the rest counted, within 1024: %q", len(d.Waiting), d.Waiting)
	}
}

// FuzzPlanDeletion: whatever the clusters, their trust, references and
// wishes, deletion never removes a copy that is in use, wanted, or on a
// cluster whose word cannot be trusted, never removes one twice, and is
// done only when no copy is left.
func FuzzPlanDeletion(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7})
	f.Add([]byte{0xff, 0x10, 0x21, 0x32, 0x43})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := observed{
			Now: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC), Works: map[string]*workv1.ManifestWork{},
			Wanted: map[string]struct{}{}, Untrusted: map[string]string{}, Usage: Usage{ByCluster: map[string]int32{}},
		}
		// Each byte is one cluster: bit 0 a copy there, 1 being removed,
		// 2 wanted, 3 referenced, 4 untrusted.
		for i, b := range data {
			c := fmt.Sprintf("c%d", i)
			if b&1 != 0 {
				in.Works[c] = &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: c, Name: "w"}}
				if b&2 != 0 {
					in.Works[c].DeletionTimestamp = &metav1.Time{Time: in.Now}
				}
			}
			if b&4 != 0 {
				in.Wanted[c] = struct{}{}
			}
			if b&8 != 0 {
				in.Usage.ByCluster[c] = int32(b >> 5)
			}
			if b&16 != 0 {
				in.Untrusted[c] = "untrusted"
			}
		}
		d := planDeletion(in)
		seen := map[string]bool{}
		for _, w := range d.Remove {
			c := w.Namespace
			_, wanted := in.Wanted[c]
			switch {
			case seen[c]:
				t.Errorf("%s removed twice", c)
			case in.Works[c] != w:
				t.Errorf("%s: removes a work it was not given", c)
			case w.DeletionTimestamp != nil:
				t.Errorf("%s: removes a copy already being removed", c)
			case wanted || in.Usage.ByCluster[c] > 0:
				t.Errorf("%s: removes a copy in use (wanted %v, references %d)", c, wanted, in.Usage.ByCluster[c])
			case in.Untrusted[c] != "":
				t.Errorf("%s: removes a copy on an untrusted cluster", c)
			}
			seen[c] = true
		}
		if d.Done != (len(in.Works) == 0) {
			t.Errorf("done %v with %d copies left", d.Done, len(in.Works))
		}
		if len(d.Entries) != len(in.Works) {
			t.Errorf("%d entries for %d copies", len(d.Entries), len(in.Works))
		}
		if d.Waiting != "" && d.Requeue == 0 {
			t.Errorf("waits (%q) without looking again", d.Waiting)
		}
	})
}
