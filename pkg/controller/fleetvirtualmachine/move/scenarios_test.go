package move

import (
	"strings"
	"testing"
	"time"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// The scenarios of the move protocol's review, each from the state the
// hub meets it in. Each failed on the rule before proofs, success first
// and the finalizer.

// Scenario 1: the hub sees both migrations Succeeded only after the
// timeout: the VM runs on the target with everything written since; the
// move goes on.
func TestMoveLiveSuccessSeenAfterTheDeadline(t *testing.T) {
	w := &world{t: t, move: newMove("b"), copies: map[string]Copy{"a": running()}, now: t0, method: fleetv1alpha1.MoveMethodCold,
		live: map[string]bool{"a": true, "b": true}}
	w.step()
	w.copies["b"] = Copy{Present: true, Reported: true, PrintableStatus: "WaitingForReceiver", RunStrategy: "WaitAsReceiver"}
	w.copies["a"] = manualRunning()
	w.mig = Migration{ReceiverAddress: "sync.b:9185", ReceiverPhase: "WaitingForSync"}
	w.step()
	w.expect(fleetv1alpha1.MoveMigrating)

	w.now = t0.Add(DefaultTimeout + time.Minute)
	w.mig.SenderPhase, w.mig.ReceiverPhase = "Succeeded", "Succeeded"
	w.step()
	w.expect(fleetv1alpha1.MoveVerifying, "a")
	if w.out.RemoveTo {
		t.Fatal("the target, which runs the VM, is removed")
	}
}

// The deadline passes while the migration runs, outcome unknown: the
// rollback aborts the migrations and releases or removes nothing until a
// cluster proves where the VM runs; a migration found Succeeded meanwhile
// goes on.
func TestMoveLiveRollbackWaitsForProof(t *testing.T) {
	start := func(t *testing.T) *world {
		w := &world{t: t, move: newMove("b"), copies: map[string]Copy{"a": running()}, now: t0, method: fleetv1alpha1.MoveMethodCold,
			live: map[string]bool{"a": true, "b": true}}
		w.step()
		w.copies["b"] = Copy{Present: true, Reported: true, PrintableStatus: "WaitingForReceiver", RunStrategy: "WaitAsReceiver"}
		w.copies["a"] = manualRunning()
		w.mig = Migration{ReceiverAddress: "sync.b:9185", ReceiverPhase: "WaitingForSync"}
		w.step()
		w.mig.SenderPhase, w.mig.ReceiverPhase = "Running", "Running"
		w.now = t0.Add(DefaultTimeout + time.Minute)
		w.step()
		w.expect(fleetv1alpha1.MoveAborting)
		if w.out.Send || w.out.Receive || w.out.RemoveTo || w.out.Holds["a"] != fleetv1alpha1.RunStrategyManual ||
			w.out.Holds["b"] != RunStrategyWaitAsReceiver {
			t.Fatalf("past the deadline mid-migration: %+v, want the migrations gone, both holds kept", w.out)
		}
		return w
	}
	t.Run("the source proves it runs", func(t *testing.T) {
		w := start(t)
		// Gone, but a's report predates the rollback's hold: no proof.
		w.mig = Migration{}
		w.copies["a"] = manualRunning()
		w.step()
		w.expect(fleetv1alpha1.MoveRollingBack)
		if w.out.RemoveTo {
			t.Fatal("b removed on a report that proves nothing")
		}
		w.copies["a"] = manualRunning()
		w.step()
		w.expect(fleetv1alpha1.MoveRollingBack, "b")
		if !w.out.RemoveTo {
			t.Fatal("b kept once a proved the VM runs there")
		}
	})
	t.Run("the migration succeeded after all", func(t *testing.T) {
		w := start(t)
		w.mig.SenderPhase, w.mig.ReceiverPhase = "Succeeded", "Succeeded"
		w.step()
		w.expect(fleetv1alpha1.MoveVerifying, "a")
		if w.out.RemoveTo {
			t.Fatal("the target, which runs the VM, is removed")
		}
	})
}

// Scenario 2: the target reports ready on the step that also finds the
// timeout passed: the move completes.
func TestMoveReadyAtTheDeadlineCompletes(t *testing.T) {
	for _, method := range []fleetv1alpha1.MoveMethod{fleetv1alpha1.MoveMethodRestart, fleetv1alpha1.MoveMethodCold} {
		t.Run(string(method), func(t *testing.T) {
			w := &world{t: t, move: newMove("b"), copies: map[string]Copy{"a": running()}, now: t0, method: method, export: Export{Ready: true}}
			toVerifying(w)
			w.now = t0.Add(DefaultTimeout + time.Second)
			w.copies["b"] = running()
			w.step()
			w.expect(fleetv1alpha1.MoveCompleting, "a")
		})
	}
}

// toVerifying drives a Restart or Cold move to Verifying.
func toVerifying(w *world) {
	w.t.Helper()
	for range 6 {
		if w.out.Status.Phase == fleetv1alpha1.MoveVerifying {
			return
		}
		w.step()
		for _, c := range w.out.Halt {
			w.copies[c] = halted()
		}
	}
	w.expect(fleetv1alpha1.MoveVerifying, "a")
}

// Past its release a Cold move's target holds the newest data: neither
// the timeout nor a failure rolls it back.
func TestMoveColdDoesNotRollBackOnceReleased(t *testing.T) {
	w := &world{t: t, move: newMove("b"), copies: map[string]Copy{"a": running()}, now: t0, method: fleetv1alpha1.MoveMethodCold, export: Export{Ready: true}}
	toVerifying(w)
	w.copies["b"] = Copy{Present: true, Reported: true, PrintableStatus: "CrashLoopBackOff", RunStrategy: "Always"}
	w.now = t0.Add(DefaultTimeout + time.Hour)
	w.step()
	w.expect(fleetv1alpha1.MoveVerifying, "a")
	if w.out.RemoveTo || !strings.Contains(w.out.Status.Message, "does not roll back") {
		t.Fatalf("%+v", w.out)
	}
}

// Scenario 3: deleting a started move rolls it back (Restart, before the
// point of no return) or finishes it (Cold, past it); a move deleted
// before it started just ends.
func TestMoveDeleted(t *testing.T) {
	t.Run("Restart, preparing", func(t *testing.T) {
		w := &world{t: t, move: newMove("b"), copies: map[string]Copy{"a": running()}, now: t0}
		w.step()
		w.expect(fleetv1alpha1.MovePreparing, "b")
		w.copies["b"] = Copy{Present: true, Reported: true, PrintableStatus: "Provisioning", RunStrategy: "Halted"}
		w.deleted = true
		w.step()
		w.expect(fleetv1alpha1.MoveRollingBack, "b")
		if !w.out.RemoveTo || !strings.Contains(w.out.Status.Message, "the move was deleted") {
			t.Fatalf("%+v", w.out)
		}
		delete(w.copies, "b")
		w.step()
		w.expect(fleetv1alpha1.MoveFailed)
	})
	t.Run("Cold, released", func(t *testing.T) {
		w := &world{t: t, move: newMove("b"), copies: map[string]Copy{"a": running()}, now: t0, method: fleetv1alpha1.MoveMethodCold, export: Export{Ready: true}}
		toVerifying(w)
		w.deleted = true
		w.step()
		w.expect(fleetv1alpha1.MoveVerifying, "a")
		w.copies["b"] = running()
		w.step()
		w.expect(fleetv1alpha1.MoveCompleting, "a")
	})
	t.Run("pending", func(t *testing.T) {
		w := &world{t: t, move: newMove("b"), copies: map[string]Copy{"a": running()}, now: t0, deleted: true}
		w.step()
		w.expect(fleetv1alpha1.MoveFailed)
	})
}

// Scenario 5: on storage that binds at the first consumer a halted VM
// reads Stopped before anything is imported: the move waits for CDI.
func TestMoveColdWaitsForTheImport(t *testing.T) {
	w := &world{t: t, move: newMove("b"), copies: map[string]Copy{"a": halted()}, now: t0, method: fleetv1alpha1.MoveMethodCold,
		export: Export{Ready: true}, fleet: fleetv1alpha1.RunStrategyHalted}
	w.step()
	w.copies["a"] = halted()
	w.step()
	w.expect(fleetv1alpha1.MoveCopying, "a", "b")
	w.copies["b"] = Copy{Present: true, Reported: true, PrintableStatus: "Stopped", RunStrategy: "Halted", DataVolumes: fleetv1alpha1.DataVolumesNotReady}
	for range 3 {
		w.step()
		w.expect(fleetv1alpha1.MoveCopying, "a", "b")
	}
	w.copies["b"] = halted()
	w.step()
	w.expect(fleetv1alpha1.MoveCompleting, "a")
}

// Scenario 6: rolling back, a target released to run proves itself
// stopped only by a report observed under the rollback's hold, from an
// available cluster.
func TestMoveRollbackNeedsFreshProof(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    func(w *world) Copy
	}{
		{name: "observed before the rollback", b: func(w *world) Copy {
			c := halted()
			c.Available, c.Hold = true, HoldOf(w.move, fleetv1alpha1.MovePreparing)
			return c
		}},
		{name: "from an unavailable cluster", b: func(w *world) Copy {
			w.unavailable = map[string]bool{"b": true}
			return halted()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &world{t: t, move: newMove("b"), copies: map[string]Copy{"a": running()}, now: t0}
			toVerifying(w)
			w.copies["b"] = Copy{Present: true, Reported: true, PrintableStatus: "Starting", RunStrategy: "Always"}
			w.now = t0.Add(DefaultTimeout + time.Second)
			w.step()
			w.expect(fleetv1alpha1.MoveRollingBack, "a", "b")
			w.copies["b"] = tc.b(w)
			w.step()
			w.expect(fleetv1alpha1.MoveRollingBack, "a", "b")
			if w.out.RemoveTo {
				t.Fatal("b removed, and a released, on a report that proves nothing")
			}
			w.unavailable = nil
			w.copies["b"] = halted()
			w.step()
			w.expect(fleetv1alpha1.MoveRollingBack, "b")
		})
	}
}

// A move that cannot start fails at its timeout instead of waiting for
// ever.
func TestMovePendingHasADeadline(t *testing.T) {
	in := Input{Now: t0, Move: newMove("b"), Method: fleetv1alpha1.MoveMethodRestart, WaitFor: "the OCM scheduler",
		Copies: map[string]Copy{"a": running()}}
	out := Step(in)
	if out.Status.Phase != fleetv1alpha1.MovePending || out.Status.PendingTime == nil || !out.Status.PendingTime.Time.Equal(t0) {
		t.Fatalf("%+v", out.Status)
	}
	in.Move.Status = out.Status
	in.Now = t0.Add(time.Minute)
	if out := Step(in); out.Status.Phase != fleetv1alpha1.MovePending || out.LookAgain != DefaultTimeout-time.Minute {
		t.Fatalf("%+v", out)
	}
	in.Now = t0.Add(DefaultTimeout)
	if out := Step(in); out.Status.Phase != fleetv1alpha1.MoveFailed || !strings.Contains(out.Status.Message, "could not start within 15m0s") {
		t.Fatalf("%+v", out.Status)
	}
}
