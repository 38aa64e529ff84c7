package placement

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"
)

// TestDecideWithMoves: a move's target is the moving copy, not one more;
// the source goes as soon as the move says so, without a grace period;
// a rolled-back target goes the same way.
func TestDecideWithMoves(t *testing.T) {
	base := func(moves ...Move) Input {
		return Input{Now: t0, GracePeriod: grace, Desired: ptr.To[int32](1), DesiredBefore: ptr.To[int32](1), Scheduled: true,
			Decision: []string{"a", "c"},
			Clusters: map[string]Presence{"a": running()},
			Intent:   map[string]Intent{"a": included(), "b": included(), "c": included()},
			Moves:    moves}
	}
	for _, tc := range []struct {
		name string
		in   Input
		want summaryOf
	}{{
		name: "the target is added, not another copy",
		in:   base(Move{Name: "m", From: "a", To: "b"}),
		want: summaryOf{States: map[string]string{"a": "Placed", "b": "Placed+added"}},
	}, {
		name: "a delivered target is no surplus",
		in: func() Input {
			in := base(Move{Name: "m", From: "a", To: "b"})
			in.Clusters["b"] = running()
			return in
		}(),
		want: summaryOf{States: map[string]string{"a": "Placed", "b": "Placed"}},
	}, {
		name: "the source goes at once when the VM is ready on the target",
		in: func() Input {
			in := base(Move{Name: "m", From: "a", To: "b", RemoveFrom: true})
			in.Clusters["b"] = running()
			in.Now = t0.Add(1500 * 1e6) // not on a whole second
			return in
		}(),
		want: summaryOf{States: map[string]string{"a": "Removing@1.5s", "b": "Placed"}, Remove: []string{"a"}},
	}, {
		name: "on a whole second too",
		in: func() Input {
			in := base(Move{Name: "m", From: "a", To: "b", RemoveFrom: true})
			in.Clusters["b"] = running()
			return in
		}(),
		want: summaryOf{States: map[string]string{"a": "Removing@0s", "b": "Placed"}, Remove: []string{"a"}},
	}, {
		name: "a rolled-back target is removed at once",
		in: func() Input {
			in := base(Move{Name: "m", From: "a", To: "b", RemoveTo: true})
			in.Clusters["b"] = running()
			return in
		}(),
		want: summaryOf{States: map[string]string{"a": "Placed", "b": "Removing@0s"}, Remove: []string{"b"}},
	}, {
		name: "a rolled-back target never delivered is nothing",
		in:   base(Move{Name: "m", From: "a", To: "b", RemoveTo: true}),
		want: summaryOf{States: map[string]string{"a": "Placed"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, summarizeOutcome(Decide(tc.in))); diff != "" {
				t.Fatalf("outcome (-want +got):\n%s", diff)
			}
		})
	}
}
