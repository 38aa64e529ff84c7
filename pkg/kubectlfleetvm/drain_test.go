package kubectlfleetvm

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/drain"
)

func TestDrainTaints(t *testing.T) {
	other := clusterv1.Taint{Key: "maintenance", Value: "disk", Effect: clusterv1.TaintEffectNoSelect, TimeAdded: *ago(time.Hour)}
	unreachable := clusterv1.Taint{Key: clusterv1.ManagedClusterTaintUnreachable, Effect: clusterv1.TaintEffectNoSelect}
	ours := drainTaint(now)
	byHand := clusterv1.Taint{Key: fleetv1alpha1.DrainTaintKey, Effect: clusterv1.TaintEffectNoSelect}
	for name, tc := range map[string]struct {
		taints      []clusterv1.Taint
		on          bool
		want        []clusterv1.Taint
		wantChanged bool
	}{
		"drain a cluster without taints": {
			on: true, want: []clusterv1.Taint{ours}, wantChanged: true,
		},
		"drain keeps the other taints, in order": {
			taints: []clusterv1.Taint{other, unreachable}, on: true,
			want: []clusterv1.Taint{other, unreachable, ours}, wantChanged: true,
		},
		"drain a cluster draining already: no change": {
			taints: []clusterv1.Taint{other, ours}, on: true, want: []clusterv1.Taint{other, ours},
		},
		"a drain taint put on by hand, with another effect, counts": {
			taints: []clusterv1.Taint{byHand}, on: true, want: []clusterv1.Taint{byHand},
		},
		"undrain keeps the other taints": {
			taints: []clusterv1.Taint{other, ours, unreachable}, want: []clusterv1.Taint{other, unreachable}, wantChanged: true,
		},
		"undrain a cluster not draining: no change": {
			taints: []clusterv1.Taint{other}, want: []clusterv1.Taint{other},
		},
	} {
		t.Run(name, func(t *testing.T) {
			before := append([]clusterv1.Taint(nil), tc.taints...)
			got, changed := drainTaints(tc.taints, tc.on, now)
			if changed != tc.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tc.wantChanged)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("taints (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(before, tc.taints); diff != "" {
				t.Errorf("the taints read were changed (-before,+after):\n%s", diff)
			}
		})
	}
	if ours.Key != "fleetvm.io/drain" || ours.Effect != clusterv1.TaintEffectNoSelectIfNew || !ours.TimeAdded.Equal(&metav1.Time{Time: now}) {
		t.Errorf("drain taint = %+v, want fleetvm.io/drain:NoSelectIfNew added now", ours)
	}
}

func TestTaintsPatch(t *testing.T) {
	for name, tc := range map[string]struct {
		taints []clusterv1.Taint
		want   string
	}{
		"with the resourceVersion read": {
			taints: []clusterv1.Taint{drainTaint(now)},
			want:   `{"metadata":{"resourceVersion":"42"},"spec":{"taints":[{"key":"fleetvm.io/drain","effect":"NoSelectIfNew","timeAdded":"2025-06-01T12:00:00Z"}]}}`,
		},
		"no taint left: an empty list, not null": {
			want: `{"metadata":{"resourceVersion":"42"},"spec":{"taints":[]}}`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := taintsPatch(tc.taints, "42")
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("patch (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestDrainProgress(t *testing.T) {
	mv := func(ns, fvm string, created time.Duration, spec fleetv1alpha1.FleetVirtualMachineMoveSpec, st fleetv1alpha1.FleetVirtualMachineMoveStatus) fleetv1alpha1.FleetVirtualMachineMove {
		spec.FleetVirtualMachine, spec.From = fvm, "prod-a"
		return fleetv1alpha1.FleetVirtualMachineMove{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prod-a." + fvm, CreationTimestamp: *ago(created),
				Labels: map[string]string{fleetv1alpha1.LabelDrain: "prod-a"}},
			Spec: spec, Status: st,
		}
	}
	auto := fleetv1alpha1.FleetVirtualMachineMoveSpec{Method: fleetv1alpha1.MoveMethodAuto}
	copies := []drain.Copy{
		{Namespace: "apps", FleetVM: "cache", Node: "n2"},
		{Namespace: "vms", FleetVM: "api", Node: "n1"},
		{Namespace: "vms", FleetVM: "db", Node: "n1"},
		{Namespace: "vms", FleetVM: "web", Node: "n1"},
	}
	moves := []fleetv1alpha1.FleetVirtualMachineMove{
		mv("vms", "web", time.Minute, auto, fleetv1alpha1.FleetVirtualMachineMoveStatus{Phase: fleetv1alpha1.MovePreparing,
			Method: fleetv1alpha1.MoveMethodRestart, To: "prod-c", Message: "creating the VM\tstopped on prod-c"}),
		withNode(mv("vms", "old", time.Hour, auto, fleetv1alpha1.FleetVirtualMachineMoveStatus{Phase: fleetv1alpha1.MoveSucceeded,
			Method: fleetv1alpha1.MoveMethodRestart, To: "prod-b", Message: "ready on prod-b"}), "n3"),
		mv("vms", "db", 2*time.Minute, auto, fleetv1alpha1.FleetVirtualMachineMoveStatus{Phase: fleetv1alpha1.MoveFailed,
			Message: "the VM keeps data of its own"}),
		mv("apps", "cache", 0, fleetv1alpha1.FleetVirtualMachineMoveSpec{Method: fleetv1alpha1.MoveMethodRestart, To: "prod-d"},
			fleetv1alpha1.FleetVirtualMachineMoveStatus{}),
	}
	rows, counts := drainProgress(copies, moves)
	if diff := cmp.Diff(drainCounts{Moved: 1, Moving: 2, Waiting: 1, Failed: 1, Left: 4, Stuck: 1}, counts); diff != "" {
		t.Errorf("counts (-want,+got):\n%s", diff)
	}
	var out bytes.Buffer
	if err := writeDrainProgress(&out, "prod-a", rows, counts); err != nil {
		t.Fatal(err)
	}
	want := `NAMESPACE  FLEETVM  NODE  TO      METHOD   PHASE      MESSAGE
apps       cache    n2    prod-d  Restart  -          -
vms        api      n1    -       -        Waiting    no move yet: the hub starts a few at a time
vms        db       n1    -       Auto     Failed     the VM keeps data of its own
vms        old      n3    prod-b  Restart  Succeeded  ready on prod-b
vms        web      n1    prod-c  Restart  Preparing  creating the VM stopped on prod-c

Summary: moved 1, moving 2, waiting 1, failed 1
`
	if diff := cmp.Diff(want, lines(out.String())); diff != "" {
		t.Errorf("output (-want,+got):\n%s", diff)
	}

	failed := moves[2]
	succeeded := mv("vms", "db", 0, auto, fleetv1alpha1.FleetVirtualMachineMoveStatus{Phase: fleetv1alpha1.MoveSucceeded})
	db := copies[2:3]
	for name, tc := range map[string]struct {
		copies               []drain.Copy
		moves                []fleetv1alpha1.FleetVirtualMachineMove
		wantEnded, wantDrain bool
		wantOutcome          string
	}{
		"all moved": {moves: []fleetv1alpha1.FleetVirtualMachineMove{succeeded}, wantEnded: true, wantDrain: true,
			wantOutcome: "prod-a is drained: no FleetVM copy left on it, no move running. kubectl fleetvm undrain prod-a lets copies be placed on it again."},
		"nothing was ever on it":  {wantEnded: true, wantDrain: true},
		"a move runs":             {moves: moves[:1]},
		"a copy with no move yet": {copies: db},
		"a copy left whose move failed: the hub does not try again": {copies: db, moves: []fleetv1alpha1.FleetVirtualMachineMove{failed}, wantEnded: true,
			wantOutcome: "the drain of prod-a ended with 1 copy still on it whose moves failed (see MESSAGE): the hub does not try them again; " +
				"kubectl fleetvm undrain prod-a, then drain it again, tries them again"},
		"a copy left whose move succeeded: its status is behind": {copies: db, moves: []fleetv1alpha1.FleetVirtualMachineMove{succeeded}},
		"a move failed, a later one succeeded":                   {moves: []fleetv1alpha1.FleetVirtualMachineMove{failed, succeeded}, wantEnded: true, wantDrain: true},
	} {
		t.Run(name, func(t *testing.T) {
			_, counts := drainProgress(tc.copies, tc.moves)
			if counts.ended() != tc.wantEnded || counts.drained() != tc.wantDrain {
				t.Errorf("ended %v, drained %v; want %v, %v (counts %+v)", counts.ended(), counts.drained(), tc.wantEnded, tc.wantDrain, counts)
			}
			if tc.wantOutcome != "" {
				if got := drainOutcome("prod-a", counts); got != tc.wantOutcome {
					t.Errorf("outcome = %q, want %q", got, tc.wantOutcome)
				}
			}
		})
	}
}

func withNode(m fleetv1alpha1.FleetVirtualMachineMove, node string) fleetv1alpha1.FleetVirtualMachineMove {
	m.Annotations = map[string]string{drain.AnnotationNode: node}
	return m
}

// TestLasting: drain --wait stops at an error reading again cannot cure,
// and reads again after one that may pass.
func TestLasting(t *testing.T) {
	gr := schema.GroupResource{Group: "fleetvm.io", Resource: "fleetvirtualmachinemoves"}
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"forbidden, as the plugin words it": {explainError(apierrors.NewForbidden(gr, "", errors.New("no list")), kindMove, "", ""), true},
		"the API is not installed":          {&meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "fleetvm.io", Kind: kindMove}}, true},
		"the server is busy":                {apierrors.NewServerTimeout(gr, "list", 1), false},
		"the connection dropped":            {errors.New("connection reset by peer"), false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := lasting(tc.err); got != tc.want {
				t.Errorf("lasting(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
