package kubectlfleetvm

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

func moves(t *testing.T, ns string) []fleetv1alpha1.FleetVirtualMachineMove {
	t.Helper()
	list := &fleetv1alpha1.FleetVirtualMachineMoveList{}
	if err := fleet.Hub.Client.List(t.Context(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

var created = regexp.MustCompile(`^fleetvirtualmachinemove\.fleetvm\.io/(web-[a-z0-9]{5}) created\n`)

// TestMove: a move the hub would refuse is refused before anything is
// written; otherwise the move is created as asked, and its name printed.
func TestMove(t *testing.T) {
	ns := namespace(t, "move")
	create(t, utiltesting.MakeFleetVM(ns, "web").ContainerDisk("quay.io/containerdisks/fedora:41").Obj())
	placeOn(t, ns, "web", copyOn("prod-a", "node-1"), copyOn("prod-b", "node-2"))
	// mover has, in this namespace only, what the guide lists for move.
	grantNamespace(t, ns, "mover", moveRules)

	r := kubectl(t, time.Time{}, "move", "web", "-n", ns, "--from", "prod-x", "--as", "mover")
	if want := "--from prod-x: FleetVirtualMachine move/web has no copy there (its copies: prod-a, prod-b)"; r.err == nil || r.err.Error() != want {
		t.Errorf("move from a cluster without a copy: error %v, want %q", r.err, want)
	}
	r = kubectl(t, time.Time{}, "move", "web", "-n", ns, "--from", "prod-a", "--to", "prod-b", "--as", "mover")
	if want := "--to prod-b: FleetVirtualMachine move/web already has a copy there: a move goes to a cluster without one"; r.err == nil || r.err.Error() != want {
		t.Errorf("move to a cluster with a copy: error %v, want %q", r.err, want)
	}
	r = kubectl(t, time.Time{}, "move", "nope", "-n", ns, "--from", "prod-a", "--as", "mover")
	if want := `FleetVirtualMachine "nope" not found in namespace "move"`; r.err == nil || r.err.Error() != want {
		t.Errorf("move of a missing FleetVM: error %v, want %q", r.err, want)
	}
	if got := moves(t, ns); len(got) != 0 {
		t.Fatalf("refused moves were created: %d moves", len(got))
	}

	r = kubectl(t, time.Time{}, "move", "web", "-n", ns, "--from", "prod-a", "--as", "mover")
	if r.err != nil {
		t.Fatalf("move: %v\n%s", r.err, r.errOut)
	}
	m := created.FindStringSubmatch(r.out)
	if m == nil {
		t.Fatalf("move printed %q, want %s", r.out, created)
	}
	mv := &fleetv1alpha1.FleetVirtualMachineMove{}
	if err := fleet.Hub.Client.Get(t.Context(), key(ns, m[1]), mv); err != nil {
		t.Fatal(err)
	}
	want := fleetv1alpha1.FleetVirtualMachineMoveSpec{FleetVirtualMachine: "web", From: "prod-a", Method: fleetv1alpha1.MoveMethodAuto,
		Timeout: &metav1.Duration{Duration: 15 * time.Minute}, TTLSecondsAfterFinished: ptr.To[int32](fleetv1alpha1.DefaultMoveTTLSecondsAfterFinished)}
	if diff := cmp.Diff(want, mv.Spec); diff != "" {
		t.Errorf("move spec (-want,+got):\n%s", diff)
	}
	if got := moves(t, ns); len(got) != 1 {
		t.Errorf("moves = %d, want 1", len(got))
	}
}

// TestMoveWait: --wait prints every phase the move goes through, even
// when they follow each other faster than any poll, and fails when the
// move does.
func TestMoveWait(t *testing.T) {
	ns := namespace(t, "move-wait")
	create(t, utiltesting.MakeFleetVM(ns, "web").ContainerDisk("quay.io/containerdisks/fedora:41").Obj())
	placeOn(t, ns, "web", copyOn("prod-a", "node-1"))
	grantNamespace(t, ns, "waiting-mover", moveRules)

	r := start(t.Context(), time.Time{}, "move", "web", "-n", ns, "--from", "prod-a", "--to", "prod-c", "--method", "Restart",
		"--timeout", "1m", "--wait", "--as", "waiting-mover")
	r.printed(t, "waiting for the hub to start the move")
	m := created.FindStringSubmatch(r.out.String())
	if m == nil {
		t.Fatalf("move printed %q, want %s", r.out, created)
	}
	mv := &fleetv1alpha1.FleetVirtualMachineMove{}
	if err := fleet.Hub.Client.Get(t.Context(), key(ns, m[1]), mv); err != nil {
		t.Fatal(err)
	}
	// The hub's move controller does not run here: the test writes the
	// phases it would, one right after the other.
	for _, st := range []fleetv1alpha1.FleetVirtualMachineMoveStatus{
		{Phase: fleetv1alpha1.MovePreparing, Message: "creating the VM stopped on prod-c"},
		{Phase: fleetv1alpha1.MoveSwitching, Message: "stopping the VM on prod-a"},
		{Phase: fleetv1alpha1.MoveVerifying, Message: "starting the VM on prod-c"},
		{Phase: fleetv1alpha1.MoveRollingBack, Message: "ErrorUnschedulable on prod-c"},
		{Phase: fleetv1alpha1.MoveFailed, Message: "ErrorUnschedulable on prod-c: rolled back"},
	} {
		mv.Status = st
		mv.Status.Method, mv.Status.To = fleetv1alpha1.MoveMethodRestart, "prod-c"
		if err := fleet.Hub.Client.Status().Update(t.Context(), mv); err != nil {
			t.Fatal(err)
		}
	}
	r.wait(t)
	wantErr := "fleetvirtualmachinemove.fleetvm.io/" + m[1] + " failed: ErrorUnschedulable on prod-c: rolled back; the VM is where it was"
	if r.err == nil || r.err.Error() != wantErr {
		t.Errorf("move --wait: error %v, want %q", r.err, wantErr)
	}
	want := `waiting for the hub to start the move
Preparing: creating the VM stopped on prod-c
Switching: stopping the VM on prod-a
Verifying: starting the VM on prod-c
RollingBack: ErrorUnschedulable on prod-c
Failed: ErrorUnschedulable on prod-c: rolled back
`
	if diff := cmp.Diff(want, r.errOut.String()); diff != "" {
		t.Errorf("move --wait printed (-want,+got):\n%s", diff)
	}
	if strings.Count(r.out.String(), "\n") != 1 {
		t.Errorf("move --wait printed on stdout %q, want only the move's name", r.out)
	}
}
