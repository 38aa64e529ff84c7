package drain

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWavesKeepTheLimits(t *testing.T) {
	var copies []Copy
	for i, node := range []string{"n1", "n1", "n1", "n1", "n2", "n2", "n3", "", ""} {
		copies = append(copies, Copy{Namespace: "vms", FleetVM: string(rune('a' + i)), Node: node})
	}
	got := Waves(copies, Limits{PerCluster: 5, PerNode: 2})
	want := [][]Copy{
		{{"vms", "a", "n1"}, {"vms", "b", "n1"}, {"vms", "e", "n2"}, {"vms", "f", "n2"}, {"vms", "g", "n3"}},
		{{"vms", "c", "n1"}, {"vms", "d", "n1"}, {"vms", "h", ""}, {"vms", "i", ""}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("waves (-want +got):\n%s", diff)
	}
}

func TestNextCountsTheMovesRunning(t *testing.T) {
	waiting := []Copy{{"vms", "c", "n1"}, {"vms", "d", "n2"}, {"vms", "e", "n2"}}
	active := []Copy{{"vms", "a", "n1"}, {"vms", "b", "n1"}, {"vms", "x", "n3"}}
	got := Next(waiting, active, Limits{PerCluster: 5, PerNode: 2})
	if diff := cmp.Diff([]Copy{{"vms", "d", "n2"}, {"vms", "e", "n2"}}, got); diff != "" {
		t.Fatalf("next (-want +got):\n%s", diff)
	}
	if got := Next(waiting, active, Limits{PerCluster: 3, PerNode: 2}); len(got) != 0 {
		t.Fatalf("started %v past the cluster limit", got)
	}
}
