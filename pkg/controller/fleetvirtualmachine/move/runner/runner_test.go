package runner

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/move"
	"github.com/fleetvm/fleetvm/pkg/vmclaim"
)

// The Runner against a fake client: what each of its three calls writes
// on the hub, in milliseconds. The protocol itself is Step's (move_test.go,
// model_test.go, in package move); the real hub runs it in the integration suites.

const blankDisk = `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","spec":{
	"dataVolumeTemplates":[{"metadata":{"name":"web-data"},"spec":{"source":{"blank":{}},"storage":{"resources":{"requests":{"storage":"1Gi"}}}}}],
	"template":{"spec":{"domain":{},"volumes":[{"name":"data","dataVolume":{"name":"web-data"}},{"name":"ci","cloudInitNoCloud":{"userData":"x"}}]}}}}`

var t0 = time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)

func running() move.Copy {
	return move.Copy{Present: true, Reported: true, PrintableStatus: "Running", Ready: true, RunStrategy: "Always"}
}

func runnerFVM() *fleetv1alpha1.FleetVirtualMachine {
	return &fleetv1alpha1.FleetVirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "web", UID: "uid-web"},
		Spec: fleetv1alpha1.FleetVirtualMachineSpec{RunStrategy: fleetv1alpha1.RunStrategyAlways,
			Template: &runtime.RawExtension{Raw: []byte(blankDisk)}},
	}
}

func runnerMove(name, from string) *fleetv1alpha1.FleetVirtualMachineMove {
	return &fleetv1alpha1.FleetVirtualMachineMove{
		ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(t0)},
		Spec:       fleetv1alpha1.FleetVirtualMachineMoveSpec{FleetVirtualMachine: "web", From: from},
	}
}

// newRunner is a Runner on a fake hub holding objs, with the indexes
// SetupIndexes registers.
func newRunner(t *testing.T, objs ...client.Object) (*Runner, client.Client, *record.FakeRecorder) {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{fleetv1alpha1.AddToScheme, clusterv1.Install, workv1.Install} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithStatusSubresource(&fleetv1alpha1.FleetVirtualMachineMove{}).
		WithIndex(&fleetv1alpha1.FleetVirtualMachineMove{}, IndexMoveFleetVM, moveFleetVM).
		WithIndex(&fleetv1alpha1.FleetVirtualMachineMove{}, IndexMoveNotStarted, moveNotStarted).
		WithIndex(&workv1.ManifestWork{}, IndexMoveWork, moveWork).
		Build()
	rec := record.NewFakeRecorder(100)
	return &Runner{Client: c, Recorder: rec}, c, rec
}

func getMove(t *testing.T, c client.Client, name string) *fleetv1alpha1.FleetVirtualMachineMove {
	t.Helper()
	m := &fleetv1alpha1.FleetVirtualMachineMove{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "vms", Name: name}, m); err != nil {
		t.Fatalf("get move %s: %v", name, err)
	}
	return m
}

// TestRunnerStep: the first step of a move holds it by its finalizer,
// writes its status (the target it chose) and tells it in an event; the
// plan holds the target stopped under the move's hold, and a second move
// of the same VM waits its turn.
func TestRunnerStep(t *testing.T) {
	second := runnerMove("m2", "a")
	second.CreationTimestamp = metav1.NewTime(t0.Add(1))
	r, c, rec := newRunner(t, runnerMove("m1", "a"), second)
	var asked []string
	plan, err := r.Step(context.Background(), View{
		FVM: runnerFVM(), Now: t0, Scheduled: true,
		Copies: func() map[string]move.Copy { return map[string]move.Copy{"a": running()} },
		Targets: func(_ context.Context, to string, _ map[string]move.Copy) ([]string, string, error) {
			asked = append(asked, to)
			return []string{"b"}, "", nil
		},
	})
	if err != nil || plan.Stop {
		t.Fatalf("step: %v (stop %t)", err, plan.Stop)
	}
	m := getMove(t, c, "m1")
	if !controllerutil.ContainsFinalizer(m, fleetv1alpha1.MoveFinalizer) {
		t.Errorf("no finalizer on the started move: %v", m.Finalizers)
	}
	if m.Status.Phase != fleetv1alpha1.MoveSwitching || m.Status.To != "b" || m.Status.Method != fleetv1alpha1.MoveMethodCold {
		t.Errorf("status %+v, want Cold to b, Switching", m.Status)
	}
	if len(asked) != 1 {
		t.Errorf("targets asked %d times, want once (the waiting move asks none)", len(asked))
	}
	if w := getMove(t, c, "m2"); w.Status.Phase != fleetv1alpha1.MovePending || !strings.Contains(w.Status.Message, "m1") {
		t.Errorf("second move %+v, want Pending behind m1", w.Status)
	}
	if got := plan.Held(func(string) string { return "" })["a"]; got.RunStrategy != fleetv1alpha1.RunStrategyHalted || got.Hold != move.HoldOf(m, fleetv1alpha1.MoveSwitching) {
		t.Errorf("source held %+v, want Halted under the move's hold", got)
	}
	if len(plan.Moves) != 2 || plan.LookAgain() <= 0 {
		t.Errorf("plan %d moves, look again %s", len(plan.Moves), plan.LookAgain())
	}
	if ev := <-rec.Events; !strings.Contains(ev, "MoveSwitching") {
		t.Errorf("event %q", ev)
	}
}

// TestRunnerStepDeleted: a move deleted before it started ends at once;
// its finalizer goes, and with it the object.
func TestRunnerStepDeleted(t *testing.T) {
	m := runnerMove("m1", "a")
	m.Finalizers = []string{fleetv1alpha1.MoveFinalizer}
	m.DeletionTimestamp = &metav1.Time{Time: t0}
	r, c, _ := newRunner(t, m)
	plan, err := r.Step(context.Background(), View{FVM: runnerFVM(), Now: t0, Scheduled: true,
		Copies: func() map[string]move.Copy { return map[string]move.Copy{"a": running()} }})
	if err != nil || len(plan.Moves) != 0 {
		t.Fatalf("step: %v, %d moves under way", err, len(plan.Moves))
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(m), m); !apierrors.IsNotFound(err) {
		t.Fatalf("the deleted move is still there: %v, %+v", err, m.Status)
	}
}

// TestRunnerReleasesEnded: an ended move keeps no finalizer, and acts on
// nothing.
func TestRunnerReleasesEnded(t *testing.T) {
	m := runnerMove("m1", "a")
	m.Finalizers = []string{fleetv1alpha1.MoveFinalizer}
	m.Status.Phase = fleetv1alpha1.MoveSucceeded
	r, c, _ := newRunner(t, m)
	plan, err := r.Step(context.Background(), View{FVM: runnerFVM(), Now: t0,
		Copies: func() map[string]move.Copy { t.Error("copies read for an ended move"); return nil }})
	if err != nil || len(plan.Moves) != 0 || plan.Frozen != nil {
		t.Fatalf("step: %v, plan %+v", err, plan)
	}
	if got := getMove(t, c, "m1"); len(got.Finalizers) != 0 {
		t.Errorf("finalizers %v", got.Finalizers)
	}
}

// TestRunnerEnsureWorks: a Cold move exporting gets its export work on
// the source; a work of another move of the same VM, ended, goes.
func TestRunnerEnsureWorks(t *testing.T) {
	fvm := runnerFVM()
	old := runnerMove("m0", "a")
	stale, err := move.ExportWork(old, vmclaim.Identity(fvm), "t", move.DataVolumeTemplates(fvm))
	if err != nil {
		t.Fatal(err)
	}
	m := runnerMove("m1", "a")
	m.Status = fleetv1alpha1.FleetVirtualMachineMoveStatus{Phase: fleetv1alpha1.MoveCopying, Method: fleetv1alpha1.MoveMethodCold, To: "b"}
	r, c, _ := newRunner(t, stale)
	plan := Plan{Moves: []Stepped{{Move: m, Out: move.Output{Export: true}}}}
	if err := r.EnsureWorks(context.Background(), fvm, plan); err != nil {
		t.Fatal(err)
	}
	var works workv1.ManifestWorkList
	if err := c.List(context.Background(), &works); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range works.Items {
		names = append(names, w.Namespace+"/"+w.Name)
	}
	key := types.NamespacedName{Namespace: "vms", Name: "m1"}
	if want := []string{"a/" + move.ExportWorkName(key)}; !slices.Equal(names, want) {
		t.Fatalf("works %v, want %v", names, want)
	}
	if got := plan.Importing(); !slices.Equal(got, []string{"b"}) {
		t.Errorf("importing %v, want the target's namespace made first", got)
	}
}

// TestRunnerForget: once the FleetVirtualMachine is gone its moves under
// way fail, saying why, lose their finalizer, and their works go.
func TestRunnerForget(t *testing.T) {
	fvm := runnerFVM()
	m := runnerMove("m1", "a")
	m.Finalizers = []string{fleetv1alpha1.MoveFinalizer}
	m.Status = fleetv1alpha1.FleetVirtualMachineMoveStatus{Phase: fleetv1alpha1.MoveCopying, Method: fleetv1alpha1.MoveMethodCold, To: "b"}
	work, err := move.ExportWork(m, vmclaim.Identity(fvm), "t", move.DataVolumeTemplates(fvm))
	if err != nil {
		t.Fatal(err)
	}
	r, c, _ := newRunner(t, m, work)
	if err := r.Forget(context.Background(), types.NamespacedName{Namespace: "vms", Name: "web"}, t0); err != nil {
		t.Fatal(err)
	}
	got := getMove(t, c, "m1")
	if got.Status.Phase != fleetv1alpha1.MoveFailed || !strings.Contains(got.Status.Message, "does not exist") || len(got.Finalizers) != 0 {
		t.Errorf("move %+v, finalizers %v", got.Status, got.Finalizers)
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(work), &workv1.ManifestWork{}); !apierrors.IsNotFound(err) {
		t.Errorf("the move's work is still there: %v", err)
	}
}

// TestPlanDecision: what the moves ask of the decision, of delivery
// (imports) and of the status (notes).
func TestPlanDecision(t *testing.T) {
	m := runnerMove("m1", "a")
	plan := Plan{
		Moves:  []Stepped{{Move: m, Out: move.Output{Target: "b", Blank: true, Status: fleetv1alpha1.FleetVirtualMachineMoveStatus{To: "b", Phase: fleetv1alpha1.MovePreparing}}}},
		Frozen: map[string]fleetv1alpha1.RunStrategy{"c": fleetv1alpha1.RunStrategyHalted},
	}
	if d := plan.Decision(); len(d) != 1 || d[0].From != "a" || d[0].To != "b" {
		t.Errorf("decision %+v", d)
	}
	if imp := plan.Imports()["b"]; imp == nil || !imp.Blank {
		t.Errorf("imports %+v, want b blank", plan.Imports())
	}
	notes := plan.Notes(func(string) string { return "uid.Switching" }, func(c string) bool { return c == "a" })
	if !strings.Contains(notes["a"], "moving to b") || !strings.Contains(notes["c"], "uid.Switching") || len(notes) != 2 {
		t.Errorf("notes %v", notes)
	}
}

// TestRunnerWaitsForRolloutStep: a move of a copy that is taking a
// revision (Applying, Soaking) or returning to one (Reverting) stays
// Pending, saying so, and chooses no target; it starts once the copy's
// step ended (here, it waits its turn: ToApply).
func TestRunnerWaitsForRolloutStep(t *testing.T) {
	for _, state := range []string{"Applying", "Soaking", "Reverting", "ToApply"} {
		t.Run(state, func(t *testing.T) {
			fvm := runnerFVM()
			fvm.Status.Clusters = []fleetv1alpha1.ClusterStatus{
				{Cluster: "a", Rollout: &fleetv1alpha1.ClusterRollout{Revision: 3, State: state}},
			}
			r, c, _ := newRunner(t, runnerMove("m1", "a"))
			asked := 0
			if _, err := r.Step(context.Background(), View{
				FVM: fvm, Now: t0, Scheduled: true,
				Copies: func() map[string]move.Copy { return map[string]move.Copy{"a": running()} },
				Targets: func(context.Context, string, map[string]move.Copy) ([]string, string, error) {
					asked++
					return []string{"b"}, "", nil
				},
			}); err != nil {
				t.Fatal(err)
			}
			m := getMove(t, c, "m1")
			if state == "ToApply" {
				if m.Status.Phase == fleetv1alpha1.MovePending || m.Status.To != "b" {
					t.Errorf("a copy waiting its turn moves: status %+v", m.Status)
				}
				return
			}
			if m.Status.Phase != fleetv1alpha1.MovePending || !strings.Contains(m.Status.Message, "rollout's step on cluster a") || !strings.Contains(m.Status.Message, state) {
				t.Errorf("status %+v, want Pending on the rollout's step", m.Status)
			}
			if asked != 0 || m.Status.To != "" {
				t.Errorf("a waiting move chose a target (%d asks, to %q)", asked, m.Status.To)
			}
		})
	}
}
