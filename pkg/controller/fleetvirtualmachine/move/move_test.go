package move

import (
	"cmp"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

var t0 = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

func newMove(to string) *fleetv1alpha1.FleetVirtualMachineMove {
	return &fleetv1alpha1.FleetVirtualMachineMove{
		ObjectMeta: metav1.ObjectMeta{Name: "m1", Namespace: "vms", UID: "uid-m1", CreationTimestamp: metav1.NewTime(t0)},
		Spec:       fleetv1alpha1.FleetVirtualMachineMoveSpec{FleetVirtualMachine: "web", From: "a", To: to},
	}
}

func running() Copy {
	return Copy{Present: true, Reported: true, PrintableStatus: "Running", Ready: true, RunStrategy: "Always"}
}
func manualRunning() Copy {
	return Copy{Present: true, Reported: true, PrintableStatus: "Running", Ready: true, RunStrategy: "Manual", DataVolumes: fleetv1alpha1.DataVolumesReady}
}
func halted() Copy {
	return Copy{Present: true, Reported: true, PrintableStatus: "Stopped", RunStrategy: "Halted", DataVolumes: fleetv1alpha1.DataVolumesReady}
}

// world is the clusters as a test moves them along; step runs the rule
// and keeps the move's new status.
type world struct {
	t      *testing.T
	move   *fleetv1alpha1.FleetVirtualMachineMove
	copies map[string]Copy
	now    time.Time
	out    Output
	// method is the method the VM allows (Restart when unset); export
	// the source's export.
	method fleetv1alpha1.MoveMethod
	export Export
	live   map[string]bool
	mig    Migration
	// fleet is the FleetVirtualMachine's run strategy (Always when
	// unset); deleted: the move is being deleted; unavailable: clusters
	// whose reports come from an unavailable cluster.
	fleet       fleetv1alpha1.RunStrategy
	deleted     bool
	unavailable map[string]bool
}

func (w *world) step() Output {
	w.t.Helper()
	w.observe()
	w.out = Step(Input{Now: w.now, Move: w.move, RunStrategy: cmp.Or(w.fleet, fleetv1alpha1.RunStrategyAlways), Deleted: w.deleted,
		Method: cmpOr(w.method, fleetv1alpha1.MoveMethodRestart), Copies: w.copies, Targets: []string{"b", "c"}, Export: w.export,
		Live: w.live, Migration: w.mig})
	w.move.Status = w.out.Status
	return w.out
}

// observe stamps each copy a test set since the last step as a fresh
// report: from an available cluster, observed under the hold the last
// step delivered there. A copy set with Available already is kept as is
// (a stale or unavailable report).
func (w *world) observe() {
	for c, cp := range w.copies {
		if cp.Available {
			continue
		}
		cp.Available = !w.unavailable[c]
		if _, held := w.out.Holds[c]; held || slices.Contains(w.out.Halt, c) {
			cp.Hold = w.out.Hold
		}
		w.copies[c] = cp
	}
}

func (w *world) expect(phase fleetv1alpha1.MovePhase, halt ...string) {
	w.t.Helper()
	if w.out.Status.Phase != phase {
		w.t.Fatalf("phase %s, want %s (message %q)", w.out.Status.Phase, phase, w.out.Status.Message)
	}
	if strings.Join(w.out.Halt, ",") != strings.Join(halt, ",") {
		w.t.Fatalf("in %s: halt %v, want %v", phase, w.out.Halt, halt)
	}
}

func TestMoveRunsMakeBeforeBreak(t *testing.T) {
	w := &world{t: t, move: newMove(""), copies: map[string]Copy{"a": running()}, now: t0}

	w.step()
	w.expect(fleetv1alpha1.MovePreparing, "b")
	if w.out.Status.To != "b" || w.out.Target != "b" || w.out.Status.Method != fleetv1alpha1.MoveMethodRestart {
		t.Fatalf("target %q/%q method %q, want b, Restart", w.out.Status.To, w.out.Target, w.out.Status.Method)
	}
	// Argo CD delivers the VM to b, held stopped; CDI provisions its disks.
	w.copies["b"] = Copy{Present: true, Reported: true, PrintableStatus: "Provisioning", RunStrategy: "Halted"}
	w.step()
	w.expect(fleetv1alpha1.MovePreparing, "b")

	// Ready to start on b: now, and only now, a stops.
	w.copies["b"] = halted()
	w.step()
	w.expect(fleetv1alpha1.MoveSwitching, "a", "b")
	w.copies["a"] = Copy{Present: true, Reported: true, PrintableStatus: "Stopping", RunStrategy: "Halted"}
	w.step()
	w.expect(fleetv1alpha1.MoveSwitching, "a", "b")

	// a reports stopped: b starts.
	w.now = t0.Add(time.Minute)
	w.copies["a"] = halted()
	w.step()
	w.expect(fleetv1alpha1.MoveVerifying, "a")
	if !w.out.Status.StoppedTime.Time.Equal(w.now) {
		t.Fatalf("stoppedTime %v", w.out.Status.StoppedTime)
	}
	w.copies["b"] = Copy{Present: true, Reported: true, PrintableStatus: "Starting", RunStrategy: "Always"}
	w.step()
	w.expect(fleetv1alpha1.MoveVerifying, "a")

	// b ready: a's copy is removed.
	w.now = t0.Add(90 * time.Second)
	w.copies["b"] = running()
	w.step()
	w.expect(fleetv1alpha1.MoveCompleting, "a")
	if !w.out.RemoveFrom || w.out.RemoveTo {
		t.Fatalf("RemoveFrom %v RemoveTo %v, want true, false", w.out.RemoveFrom, w.out.RemoveTo)
	}
	if w.out.Status.ReadyTime.Sub(w.out.Status.StoppedTime.Time) != 30*time.Second {
		t.Fatalf("hand-over %v, want 30s", w.out.Status.ReadyTime.Sub(w.out.Status.StoppedTime.Time))
	}
	w.step()
	w.expect(fleetv1alpha1.MoveCompleting, "a")

	delete(w.copies, "a")
	w.step()
	w.expect(fleetv1alpha1.MoveSucceeded)
	if w.out.Target != "" || w.out.Status.CompletionTime == nil {
		t.Fatalf("a succeeded move still targets %q, completion %v", w.out.Target, w.out.Status.CompletionTime)
	}
}

func cmpOr(a, b fleetv1alpha1.MoveMethod) fleetv1alpha1.MoveMethod {
	if a != "" {
		return a
	}
	return b
}

// expectCold checks what a Cold step asks of delivery besides the holds.
func (w *world) expectCold(target string, export, imports bool) {
	w.t.Helper()
	if w.out.Target != target || w.out.Export != export || w.out.Import != imports {
		w.t.Fatalf("in %s: target %q export %v import %v, want %q %v %v", w.out.Status.Phase, w.out.Target, w.out.Export, w.out.Import, target, export, imports)
	}
}

func TestMoveColdCopiesTheDisks(t *testing.T) {
	w := &world{t: t, move: newMove(""), copies: map[string]Copy{"a": running()}, now: t0, method: fleetv1alpha1.MoveMethodCold}

	// The VM stops on a first: its disks can be exported only then. The
	// export is asked at once; nothing is delivered to b yet.
	w.step()
	w.expect(fleetv1alpha1.MoveSwitching, "a")
	w.expectCold("", true, false)
	if w.out.Status.To != "b" || w.out.Status.Method != fleetv1alpha1.MoveMethodCold {
		t.Fatalf("to %q method %q, want b, Cold", w.out.Status.To, w.out.Status.Method)
	}
	w.copies["a"] = Copy{Present: true, Reported: true, PrintableStatus: "Stopping", RunStrategy: "Halted"}
	w.step()
	w.expect(fleetv1alpha1.MoveSwitching, "a")

	// a stopped: the export serves once KubeVirt says so.
	w.now = t0.Add(time.Minute)
	w.copies["a"] = halted()
	w.step()
	w.expect(fleetv1alpha1.MoveCopying, "a")
	w.expectCold("", true, false)
	if !w.out.Status.StoppedTime.Time.Equal(w.now) {
		t.Fatalf("stoppedTime %v", w.out.Status.StoppedTime)
	}

	// Ready: b gets the VM, held stopped, importing from the export.
	w.export.Ready = true
	w.step()
	w.expect(fleetv1alpha1.MoveCopying, "a", "b")
	w.expectCold("b", true, true)
	w.copies["b"] = Copy{Present: true, Reported: true, PrintableStatus: "Provisioning", RunStrategy: "Halted"}
	w.step()
	w.expect(fleetv1alpha1.MoveCopying, "a", "b")

	// Imported: b starts, rendered as it was, the export kept for it.
	w.now = t0.Add(3 * time.Minute)
	w.copies["b"] = halted()
	w.step()
	w.expect(fleetv1alpha1.MoveVerifying, "a")
	w.expectCold("b", true, true)
	if !w.out.Status.CopiedTime.Time.Equal(w.now) {
		t.Fatalf("copiedTime %v", w.out.Status.CopiedTime)
	}
	w.copies["b"] = running()
	w.now = t0.Add(4 * time.Minute)
	w.step()
	w.expect(fleetv1alpha1.MoveCompleting, "a")
	w.expectCold("b", true, true)
	if !w.out.RemoveFrom {
		t.Fatal("a's copy kept once b is ready")
	}
	delete(w.copies, "a")
	w.step()
	w.expect(fleetv1alpha1.MoveSucceeded)
	w.expectCold("", false, false)
}

// expectLive checks what a Live step asks of delivery.
func (w *world) expectLive(target string, holds map[string]fleetv1alpha1.RunStrategy, receive, send bool) {
	w.t.Helper()
	o := w.out
	if o.Target != target || !maps.Equal(o.Holds, holds) || o.Receive != receive || o.Send != send || (target != "") != o.Blank {
		w.t.Fatalf("in %s: target %q holds %v receive %v send %v blank %v; want %q %v %v %v", o.Status.Phase, o.Target, o.Holds,
			o.Receive, o.Send, o.Blank, target, holds, receive, send)
	}
}

func TestMoveLiveMigratesRunning(t *testing.T) {
	both := map[string]bool{"a": true, "b": true}
	w := &world{t: t, move: newMove(""), copies: map[string]Copy{"a": running()}, now: t0, method: fleetv1alpha1.MoveMethodCold, live: both}
	prep := map[string]fleetv1alpha1.RunStrategy{"a": fleetv1alpha1.RunStrategyManual, "b": RunStrategyWaitAsReceiver}

	// Auto, data of its own, both clusters offer it: Live. b receives;
	// a serves on, held Manual so nothing restarts it once it stopped.
	w.step()
	w.expect(fleetv1alpha1.MovePreparing)
	w.expectLive("b", prep, false, false)
	if w.out.Status.Method != fleetv1alpha1.MoveMethodLive {
		t.Fatalf("method %q, want Live", w.out.Status.Method)
	}
	// KubeVirt on b waits for it: the receiving migration is made; a
	// reports its Manual hold.
	w.copies["b"] = Copy{Present: true, Reported: true, PrintableStatus: "WaitingForReceiver", RunStrategy: "WaitAsReceiver"}
	w.copies["a"] = manualRunning()
	w.step()
	w.expect(fleetv1alpha1.MovePreparing)
	w.expectLive("b", prep, true, false)
	// It reports where to connect: the sending migration follows.
	w.mig = Migration{ReceiverAddress: "sync.b:9185", ReceiverPhase: "WaitingForSync"}
	w.step()
	w.expect(fleetv1alpha1.MoveMigrating)
	w.expectLive("b", prep, true, true)
	w.mig.SenderPhase, w.mig.ReceiverPhase = "Running", "Running"
	w.step()
	w.expect(fleetv1alpha1.MoveMigrating)

	// Done: a is held stopped, b takes the fleet's run strategy.
	w.now = t0.Add(time.Minute)
	w.mig.SenderPhase, w.mig.ReceiverPhase = "Succeeded", "Succeeded"
	w.copies["a"] = halted()
	w.step()
	w.expect(fleetv1alpha1.MoveVerifying, "a")
	w.expectLive("b", nil, true, true)
	if !w.out.Status.StoppedTime.Time.Equal(w.now) {
		t.Fatalf("stoppedTime %v", w.out.Status.StoppedTime)
	}
	// No rollback once migrated, whatever the time.
	w.now = t0.Add(DefaultTimeout + time.Hour)
	w.step()
	w.expect(fleetv1alpha1.MoveVerifying, "a")
	w.copies["b"] = running()
	w.step()
	w.expect(fleetv1alpha1.MoveCompleting, "a")
	if !w.out.RemoveFrom {
		t.Fatal("a's copy kept once b is ready")
	}
	delete(w.copies, "a")
	w.step()
	w.expect(fleetv1alpha1.MoveSucceeded)
	w.expectLive("", nil, false, false)
}

func TestMoveLiveRollsBackOrRefuses(t *testing.T) {
	t.Run("migration fails halfway", func(t *testing.T) {
		w := &world{t: t, move: newMove("b"), copies: map[string]Copy{"a": running()}, now: t0, method: fleetv1alpha1.MoveMethodCold,
			live: map[string]bool{"a": true, "b": true}}
		w.step()
		w.copies["b"] = Copy{Present: true, Reported: true, PrintableStatus: "WaitingForReceiver", RunStrategy: "WaitAsReceiver"}
		w.copies["a"] = manualRunning()
		w.mig = Migration{ReceiverAddress: "sync.b:9185", ReceiverPhase: "WaitingForSync"}
		w.step()
		w.expect(fleetv1alpha1.MoveMigrating)
		w.mig = Migration{ReceiverAddress: "sync.b:9185", ReceiverPhase: "Failed", SenderPhase: "Failed", Failed: "Live migration failed"}
		w.step()
		// The migrations go first; nothing is released or removed yet.
		w.expect(fleetv1alpha1.MoveAborting)
		if w.out.Receive || w.out.Send || w.out.RemoveTo || w.out.Holds["a"] != fleetv1alpha1.RunStrategyManual {
			t.Fatalf("aborting: %+v, want the migrations gone, a held Manual", w.out)
		}
		// They are gone: a report observed before proves nothing.
		w.mig = Migration{}
		w.copies["a"] = manualRunning()
		w.step()
		w.expect(fleetv1alpha1.MoveRollingBack)
		if w.out.RemoveTo {
			t.Fatal("b removed on a report observed while the migrations could still run")
		}
		// a proves, under the rollback's hold, that the VM still runs there.
		w.copies["a"] = manualRunning()
		w.step()
		// The source never stopped: it serves on, unheld; b goes.
		w.expect(fleetv1alpha1.MoveRollingBack, "b")
		if w.out.Target != "b" || w.out.Holds != nil || w.out.Receive || w.out.Send {
			t.Fatalf("rolling back: %+v, want b held stopped, the migrations gone", w.out)
		}
		if !w.out.RemoveTo || !strings.Contains(w.out.Status.Message, "the live migration failed: Live migration failed") {
			t.Fatalf("RemoveTo %v message %q", w.out.RemoveTo, w.out.Status.Message)
		}
		delete(w.copies, "b")
		w.step()
		w.expect(fleetv1alpha1.MoveFailed)
	})
	t.Run("Live asked, b does not offer it", func(t *testing.T) {
		m := newMove("b")
		m.Spec.Method = fleetv1alpha1.MoveMethodLive
		w := &world{t: t, move: m, copies: map[string]Copy{"a": running()}, now: t0, method: fleetv1alpha1.MoveMethodLive, live: map[string]bool{"a": true}}
		w.step()
		w.expect(fleetv1alpha1.MoveFailed)
		if !strings.Contains(w.out.Status.Message, "a does, b does not") {
			t.Fatalf("message %q", w.out.Status.Message)
		}
	})
	t.Run("Auto, b does not offer it: Cold", func(t *testing.T) {
		w := &world{t: t, move: newMove("b"), copies: map[string]Copy{"a": running()}, now: t0, method: fleetv1alpha1.MoveMethodCold, live: map[string]bool{"a": true}}
		w.step()
		if w.out.Status.Method != fleetv1alpha1.MoveMethodCold {
			t.Fatalf("method %q, want Cold", w.out.Status.Method)
		}
	})
}

func TestMoveColdRollsBack(t *testing.T) {
	for _, tc := range []struct {
		name  string
		drive func(w *world)
		// reason is in the message; bPresent: b has a copy to remove.
		reason   string
		bPresent bool
	}{{
		name: "source never stops",
		drive: func(w *world) {
			w.now = t0.Add(DefaultTimeout)
		},
		reason: "not reported stopped on a within 15m0s",
	}, {
		name: "export fails",
		drive: func(w *world) {
			w.copies["a"] = halted()
			w.step()
			w.export.Failed = "KubeVirt reports Unknown"
		},
		reason: "the export of the VM's disks on a failed: KubeVirt reports Unknown",
	}, {
		name: "import fails",
		drive: func(w *world) {
			w.copies["a"] = halted()
			w.export.Ready = true
			w.step()
			w.copies["b"] = Copy{Present: true, Reported: true, PrintableStatus: "DataVolumeError", RunStrategy: "Halted"}
		},
		reason:   "cannot be imported on b: KubeVirt reports DataVolumeError",
		bPresent: true,
	}, {
		name: "import too slow",
		drive: func(w *world) {
			w.copies["a"] = halted()
			w.export.Ready = true
			w.step()
			w.copies["b"] = Copy{Present: true, Reported: true, PrintableStatus: "Provisioning", RunStrategy: "Halted"}
			w.now = t0.Add(DefaultTimeout)
		},
		reason:   "not copied to b within 15m0s (last reported Provisioning)",
		bPresent: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			w := &world{t: t, move: newMove(""), copies: map[string]Copy{"a": running()}, now: t0, method: fleetv1alpha1.MoveMethodCold}
			w.step()
			tc.drive(w)
			w.step()
			// Without a copy on b, the rollback ends in the same step.
			want := fleetv1alpha1.MoveFailed
			if tc.bPresent {
				want = fleetv1alpha1.MoveRollingBack
			}
			if w.out.Status.Phase != want || !strings.Contains(w.out.Status.Message, tc.reason) {
				t.Fatalf("phase %s message %q, want %s with %q", w.out.Status.Phase, w.out.Status.Message, want, tc.reason)
			}
			if w.out.Export {
				t.Fatal("the export stays while rolling back: the source could not start")
			}
			if tc.bPresent {
				// b never started: a starts again at once, b goes.
				w.expect(fleetv1alpha1.MoveRollingBack, "b")
				if !w.out.RemoveTo {
					t.Fatal("b's copy kept")
				}
				delete(w.copies, "b")
				w.step()
			}
			w.expect(fleetv1alpha1.MoveFailed)
			if !strings.HasSuffix(w.out.Status.Message, "the VM stays on a") {
				t.Fatalf("message %q", w.out.Status.Message)
			}
		})
	}
}

func TestMoveRollsBack(t *testing.T) {
	for _, tc := range []struct {
		name string
		// drive moves the world to the fault.
		drive  func(w *world)
		reason string
		// haltBoth: the target may have started, so the source stays
		// stopped until the target is known stopped.
		haltBoth bool
	}{{
		name: "target never ready to start",
		drive: func(w *world) {
			w.copies["b"] = Copy{Present: true, Reported: true, PrintableStatus: "Provisioning", RunStrategy: "Halted"}
			w.step()
			w.now = t0.Add(DefaultTimeout)
		},
		reason: "not prepared on b within 15m0s (last reported Provisioning)",
	}, {
		name: "target cannot be scheduled",
		drive: func(w *world) {
			w.copies["b"] = halted()
			w.step()
			w.copies["a"] = halted()
			w.step()
			w.copies["b"] = Copy{Present: true, Reported: true, PrintableStatus: "ErrorUnschedulable", RunStrategy: "Always"}
		},
		reason:   "failed on b: KubeVirt reports ErrorUnschedulable",
		haltBoth: true,
	}, {
		name: "target not ready in time",
		drive: func(w *world) {
			w.copies["b"] = halted()
			w.step()
			w.copies["a"] = halted()
			w.step()
			w.copies["b"] = Copy{Present: true, Reported: true, PrintableStatus: "Starting", RunStrategy: "Always"}
			w.now = t0.Add(DefaultTimeout + time.Second)
		},
		reason:   "did not become ready on b",
		haltBoth: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			w := &world{t: t, move: newMove(""), copies: map[string]Copy{"a": running()}, now: t0}
			w.step()
			tc.drive(w)
			w.step()
			if w.out.Status.Phase != fleetv1alpha1.MoveRollingBack || !strings.Contains(w.out.Status.Message, tc.reason) {
				t.Fatalf("phase %s message %q, want RollingBack with %q", w.out.Status.Phase, w.out.Status.Message, tc.reason)
			}
			if tc.haltBoth {
				// b may run: a stays stopped until b is known stopped.
				w.expect(fleetv1alpha1.MoveRollingBack, "a", "b")
				if w.out.RemoveTo {
					t.Fatal("b removed before it was known stopped")
				}
				w.copies["b"] = halted()
				w.step()
			}
			w.expect(fleetv1alpha1.MoveRollingBack, "b")
			if !w.out.RemoveTo || w.out.RemoveFrom {
				t.Fatalf("RemoveTo %v RemoveFrom %v, want true, false", w.out.RemoveTo, w.out.RemoveFrom)
			}
			// a's hold is lifted; b goes.
			delete(w.copies, "b")
			w.step()
			w.expect(fleetv1alpha1.MoveFailed)
			if !strings.Contains(w.out.Status.Message, tc.reason) || !strings.HasSuffix(w.out.Status.Message, "the VM stays on a") {
				t.Fatalf("message %q", w.out.Status.Message)
			}
		})
	}
}

func TestMoveRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		to      string
		copies  map[string]Copy
		method  fleetv1alpha1.MoveMethod
		refused string
		targets []string
		want    string
	}{
		{name: "no copy on from", copies: map[string]Copy{"b": running()}, targets: []string{"c"}, want: "no copy on cluster a"},
		{name: "target holds a copy", to: "b", copies: map[string]Copy{"a": running(), "b": running()}, targets: []string{"c"}, want: "cluster b already holds a copy"},
		{name: "target does not qualify", to: "d", copies: map[string]Copy{"a": running()}, targets: []string{"b"}, want: "cluster d does not qualify"},
		{name: "no target", copies: map[string]Copy{"a": running()}, want: "no other cluster qualifies"},
		{name: "data of its own", copies: map[string]Copy{"a": running()}, targets: []string{"b"}, refused: "the VM keeps data of its own", want: "keeps data of its own"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := fleetv1alpha1.MoveMethodRestart
			if tc.refused != "" {
				method = ""
			}
			out := Step(Input{Now: t0, Move: newMove(tc.to), RunStrategy: fleetv1alpha1.RunStrategyAlways, Method: method, Refused: tc.refused,
				Copies: tc.copies, Targets: tc.targets})
			if out.Status.Phase != fleetv1alpha1.MoveFailed || !strings.Contains(out.Status.Message, tc.want) {
				t.Fatalf("phase %s message %q, want Failed with %q", out.Status.Phase, out.Status.Message, tc.want)
			}
			if out.Target != "" || len(out.Halt) > 0 || out.RemoveFrom || out.RemoveTo {
				t.Fatalf("a refused move acts: %+v", out)
			}
		})
	}
}

func TestMoveWaitsItsTurn(t *testing.T) {
	out := Step(Input{Now: t0, Move: newMove(""), Method: fleetv1alpha1.MoveMethodRestart, Busy: "m0",
		Copies: map[string]Copy{"a": running()}, Targets: []string{"b"}})
	if out.Status.Phase != fleetv1alpha1.MovePending || out.Target != "" || !strings.Contains(out.Status.Message, "m0") {
		t.Fatalf("%+v", out)
	}
}

func TestMethodFor(t *testing.T) {
	fvm := func(template string, images ...string) *fleetv1alpha1.FleetVirtualMachine {
		f := &fleetv1alpha1.FleetVirtualMachine{Spec: fleetv1alpha1.FleetVirtualMachineSpec{Template: &runtime.RawExtension{Raw: []byte(template)}}}
		for _, i := range images {
			f.Spec.DiskImages = append(f.Spec.DiskImages, fleetv1alpha1.DiskImageReference{Name: i})
		}
		return f
	}
	const containerDisk = `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","spec":{"template":{"spec":{"domain":{},
		"volumes":[{"name":"root","containerDisk":{"image":"quay.io/containerdisks/fedora"}},{"name":"ci","cloudInitNoCloud":{"userData":"x"}}]}}}}`
	const fromImage = `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","spec":{
		"dataVolumeTemplates":[{"metadata":{"name":"root"},"spec":{"sourceRef":{"kind":"DataSource","name":"rhel9"}}}],
		"template":{"spec":{"domain":{},"volumes":[{"name":"root","dataVolume":{"name":"root"}}]}}}}`
	const ownDisk = `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","spec":{
		"template":{"spec":{"domain":{},"volumes":[{"name":"data","persistentVolumeClaim":{"claimName":"db"}}]}}}}`
	const hostDisk = `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","spec":{
		"dataVolumeTemplates":[{"metadata":{"name":"root"},"spec":{"sourceRef":{"kind":"DataSource","name":"rhel9"}}}],
		"template":{"spec":{"domain":{},"volumes":[{"name":"root","dataVolume":{"name":"root"}},{"name":"scratch","hostDisk":{"path":"/x"}}]}}}}`
	for _, tc := range []struct {
		name   string
		fvm    *fleetv1alpha1.FleetVirtualMachine
		asked  fleetv1alpha1.MoveMethod
		want   fleetv1alpha1.MoveMethod
		refuse string
	}{
		{name: "container disk", fvm: fvm(containerDisk), want: fleetv1alpha1.MoveMethodRestart},
		{name: "FleetDiskImage", fvm: fvm(fromImage, "rhel9"), want: fleetv1alpha1.MoveMethodRestart},
		{name: "container disk, Cold", fvm: fvm(containerDisk), asked: fleetv1alpha1.MoveMethodCold, want: fleetv1alpha1.MoveMethodRestart},
		{name: "FleetDiskImage, Cold", fvm: fvm(fromImage, "rhel9"), asked: fleetv1alpha1.MoveMethodCold, want: fleetv1alpha1.MoveMethodCold},
		{name: "DataSource not a listed image", fvm: fvm(fromImage), want: fleetv1alpha1.MoveMethodCold},
		{name: "own data, Restart asked", fvm: fvm(fromImage), asked: fleetv1alpha1.MoveMethodRestart, want: fleetv1alpha1.MoveMethodCold},
		{name: "PVC", fvm: fvm(ownDisk), refuse: "volume data: PersistentVolumeClaim db is not made by the VM"},
		{name: "host disk", fvm: fvm(hostDisk), refuse: "host disk /x stays on its node"},
		{name: "container disk, Live", fvm: fvm(containerDisk), asked: fleetv1alpha1.MoveMethodLive, want: fleetv1alpha1.MoveMethodLive},
		{name: "host disk, Live", fvm: fvm(hostDisk), asked: fleetv1alpha1.MoveMethodLive, refuse: "a live migration cannot fill on the target"},
		{name: "git, Live", fvm: &fleetv1alpha1.FleetVirtualMachine{}, asked: fleetv1alpha1.MoveMethodLive, refuse: "spec.method must be Restart"},
		{name: "git, Auto", fvm: &fleetv1alpha1.FleetVirtualMachine{}, refuse: "spec.method must be Restart for a VM from git"},
		{name: "git, Restart", fvm: &fleetv1alpha1.FleetVirtualMachine{}, asked: fleetv1alpha1.MoveMethodRestart, want: fleetv1alpha1.MoveMethodRestart},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := MethodFor(tc.fvm, tc.asked)
			if got != tc.want || (tc.refuse == "") != (why == "") || !strings.Contains(why, tc.refuse) {
				t.Fatalf("MethodFor = %q, %q; want %q, %q", got, why, tc.want, tc.refuse)
			}
		})
	}
}
