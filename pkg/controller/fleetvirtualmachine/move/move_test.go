package move

import (
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
		ObjectMeta: metav1.ObjectMeta{Name: "m1", Namespace: "vms"},
		Spec:       fleetv1alpha1.FleetVirtualMachineMoveSpec{FleetVirtualMachine: "web", From: "a", To: to},
	}
}

func running() Copy {
	return Copy{Present: true, Reported: true, PrintableStatus: "Running", Ready: true, RunStrategy: "Always"}
}
func halted() Copy {
	return Copy{Present: true, Reported: true, PrintableStatus: "Stopped", RunStrategy: "Halted"}
}

// world is the clusters as a test moves them along; step runs the rule
// and keeps the move's new status.
type world struct {
	t      *testing.T
	move   *fleetv1alpha1.FleetVirtualMachineMove
	copies map[string]Copy
	now    time.Time
	out    Output
}

func (w *world) step() Output {
	w.t.Helper()
	w.out = Step(Input{Now: w.now, Move: w.move, RunStrategy: fleetv1alpha1.RunStrategyAlways, Method: fleetv1alpha1.MoveMethodRestart,
		Copies: w.copies, Targets: []string{"b", "c"}})
	w.move.Status = w.out.Status
	return w.out
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
	for _, tc := range []struct {
		name   string
		fvm    *fleetv1alpha1.FleetVirtualMachine
		asked  fleetv1alpha1.MoveMethod
		want   fleetv1alpha1.MoveMethod
		refuse string
	}{
		{name: "container disk", fvm: fvm(containerDisk), want: fleetv1alpha1.MoveMethodRestart},
		{name: "FleetDiskImage", fvm: fvm(fromImage, "rhel9"), want: fleetv1alpha1.MoveMethodRestart},
		{name: "DataSource not a listed image", fvm: fvm(fromImage), refuse: "volume root: DataVolume root, not from a FleetDiskImage"},
		{name: "PVC", fvm: fvm(ownDisk), asked: fleetv1alpha1.MoveMethodRestart, refuse: "volume data: PersistentVolumeClaim db"},
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
