package imagerefs

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

func TestTally(t *testing.T) {
	web := types.NamespacedName{Namespace: "vms", Name: "web"}
	db := types.NamespacedName{Namespace: "vms", Name: "db"}
	tally := New()

	if got := tally.Observe(web, []string{"a", "b", "a"}); !cmp.Equal(got, map[string]int32{"a": 0, "b": 0}) {
		t.Errorf("Observe before any inventory = %v", got)
	}
	tally.Observe(db, []string{"b"})

	steps := []struct {
		name    string
		cluster string
		counts  map[string]int32
		notify  []types.NamespacedName
		totals  map[string]int32
		spread  map[string]map[string]int32
	}{
		{
			name: "first cluster", cluster: "c1", counts: map[string]int32{"a": 2, "x": 5},
			notify: []types.NamespacedName{web},
			totals: map[string]int32{"a": 2, "b": 0, "x": 5},
			spread: map[string]map[string]int32{"a": {"c1": 2}, "x": {"c1": 5}},
		},
		{
			name: "second cluster adds to the totals", cluster: "c2", counts: map[string]int32{"a": 1, "b": 3},
			notify: []types.NamespacedName{db, web},
			totals: map[string]int32{"a": 3, "b": 3, "x": 5},
			spread: map[string]map[string]int32{"a": {"c1": 2, "c2": 1}, "b": {"c2": 3}},
		},
		{
			name: "unchanged inventory notifies nobody", cluster: "c2", counts: map[string]int32{"b": 3, "a": 1},
			totals: map[string]int32{"a": 3, "b": 3, "x": 5},
		},
		{
			name: "a change of an image nobody observes notifies nobody", cluster: "c1", counts: map[string]int32{"a": 2, "x": 1},
			totals: map[string]int32{"a": 3, "x": 1},
		},
		{
			name: "cluster gone", cluster: "c1", counts: nil,
			notify: []types.NamespacedName{web},
			totals: map[string]int32{"a": 1, "b": 3, "x": 0},
			spread: map[string]map[string]int32{"a": {"c2": 1}, "x": nil},
		},
	}
	for _, s := range steps {
		if diff := cmp.Diff(s.notify, tally.Set(s.cluster, s.counts)); diff != "" {
			t.Errorf("%s: notified (-want,+got):\n%s", s.name, diff)
		}
		for image, want := range s.totals {
			if got := tally.Total(image); got != want {
				t.Errorf("%s: Total(%s) = %d, want %d", s.name, image, got, want)
			}
		}
		for image, want := range s.spread {
			if diff := cmp.Diff(want, tally.ByCluster(image)); diff != "" && (len(want) != 0 || len(tally.ByCluster(image)) != 0) {
				t.Errorf("%s: ByCluster(%s) (-want,+got):\n%s", s.name, image, diff)
			}
			if got := tally.Clusters(image); got != int32(len(want)) {
				t.Errorf("%s: Clusters(%s) = %d, want %d", s.name, image, got, len(want))
			}
		}
	}

	// A forgotten key is not notified any more.
	tally.Observe(web, nil)
	if got := tally.Set("c3", map[string]int32{"a": 1, "b": 1}); !cmp.Equal(got, []types.NamespacedName{db}) {
		t.Errorf("after Observe(web, nil), Set notified %v, want only %v", got, db)
	}
}
