package move

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// Scenario 4: a FleetVirtualMachine orphaned mid-move and created again
// (or a hub restored from a backup taken mid-move) adopts the move's
// copies without starting the one the lost move held.
func TestFrozen(t *testing.T) {
	heldStopped := func(hold string) Copy {
		c := halted()
		c.Available, c.Hold = true, hold
		return c
	}
	receiver := Copy{Present: true, Reported: true, Available: true, PrintableStatus: "WaitingForReceiver", RunStrategy: "WaitAsReceiver", Hold: "lost.Migrating"}
	source := Copy{Present: true, Reported: true, Available: true, PrintableStatus: "Running", Ready: true, RunStrategy: "Manual", Hold: "lost.Migrating"}
	for name, tc := range map[string]struct {
		copies map[string]Copy
		active []types.UID
		want   map[string]fleetv1alpha1.RunStrategy
	}{
		"Restart, preparing: the target stays stopped": {
			copies: map[string]Copy{"a": running(), "b": heldStopped("lost.Preparing")},
			want:   map[string]fleetv1alpha1.RunStrategy{"b": fleetv1alpha1.RunStrategyHalted},
		},
		"Cold, copying: both stay stopped": {
			copies: map[string]Copy{"a": heldStopped("lost.Copying"), "b": heldStopped("lost.Copying")},
			want:   map[string]fleetv1alpha1.RunStrategy{"a": fleetv1alpha1.RunStrategyHalted, "b": fleetv1alpha1.RunStrategyHalted},
		},
		"Live, migrating: source Manual, receiver waits": {
			copies: map[string]Copy{"a": source, "b": receiver},
			want:   map[string]fleetv1alpha1.RunStrategy{"a": fleetv1alpha1.RunStrategyManual, "b": RunStrategyWaitAsReceiver},
		},
		"the move is alive: its step decides": {
			copies: map[string]Copy{"a": running(), "b": heldStopped("m1.Preparing")},
			active: []types.UID{"m1"},
		},
		"a lone copy is the VM": {
			copies: map[string]Copy{"b": heldStopped("lost.Copying")},
		},
		"no hold: the fleet's": {
			copies: map[string]Copy{"a": running(), "b": halted()},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got := Frozen(tc.copies, tc.active)
			if len(tc.want) == 0 && len(got) == 0 {
				return
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("Frozen (-want,+got):\n%s", diff)
			}
		})
	}
}
