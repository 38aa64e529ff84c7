package movettl

import (
	"testing"
	"testing/quick"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/drain"
)

var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	ns      = "team"
	cluster = "prod-a"
	uid     = "6f1c2a8e-0d1b-4d8e-9c1a-2b3c4d5e6f70"
)

func ended(name string, phase fleetv1alpha1.MovePhase, completed time.Time, ttl *int32) *fleetv1alpha1.FleetVirtualMachineMove {
	return &fleetv1alpha1.FleetVirtualMachineMove{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(name + "-uid")},
		Spec:       fleetv1alpha1.FleetVirtualMachineMoveSpec{FleetVirtualMachine: "vm", From: cluster, TTLSecondsAfterFinished: ttl},
		Status:     fleetv1alpha1.FleetVirtualMachineMoveStatus{Phase: phase, CompletionTime: ptr.To(metav1.NewTime(completed))},
	}
}

func ofDrain(m *fleetv1alpha1.FleetVirtualMachineMove) *fleetv1alpha1.FleetVirtualMachineMove {
	m.Labels = map[string]string{fleetv1alpha1.LabelDrain: cluster}
	m.Annotations = map[string]string{drain.AnnotationCluster: uid}
	return m
}

func managedCluster(draining bool) *clusterv1.ManagedCluster {
	mc := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: cluster, UID: uid}}
	if draining {
		mc.Spec.Taints = []clusterv1.Taint{{Key: fleetv1alpha1.DrainTaintKey, Effect: clusterv1.TaintEffectNoSelectIfNew}}
	}
	return mc
}

func newReconciler(clk *clocktesting.FakeClock, objs ...client.Object) (*Reconciler, client.Client) {
	s := runtime.NewScheme()
	utilruntime.Must(fleetv1alpha1.AddToScheme(s))
	utilruntime.Must(clusterv1.Install(s))
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).WithStatusSubresource(&fleetv1alpha1.FleetVirtualMachineMove{}).Build()
	return &Reconciler{Client: c, Clock: clk}, c
}

// step reconciles the move and tells whether it still exists, and after
// how long the reconciler asked to come back.
func step(t *testing.T, r *Reconciler, c client.Client, name string) (bool, time.Duration) {
	t.Helper()
	key := types.NamespacedName{Namespace: ns, Name: name}
	res, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: key})
	if err != nil {
		t.Fatalf("reconcile %s: %v", key, err)
	}
	err = c.Get(t.Context(), key, &fleetv1alpha1.FleetVirtualMachineMove{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil, res.RequeueAfter
}

func TestEndedMoveDeletedAfterItsTTL(t *testing.T) {
	cases := map[string]struct {
		move *fleetv1alpha1.FleetVirtualMachineMove
		ttl  time.Duration
	}{
		"succeeded, default TTL": {move: ended("ok", fleetv1alpha1.MoveSucceeded, start, nil), ttl: fleetv1alpha1.DefaultMoveTTLSecondsAfterFinished * time.Second},
		"failed, an hour":        {move: ended("failed", fleetv1alpha1.MoveFailed, start, ptr.To[int32](3600)), ttl: time.Hour},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(start)
			r, c := newReconciler(clk, tc.move)
			kept, after := step(t, r, c, tc.move.Name)
			if !kept || after != tc.ttl {
				t.Fatalf("at completion: kept %v, requeue after %s; want kept, back after %s", kept, after, tc.ttl)
			}
			clk.Step(tc.ttl - time.Second)
			if kept, after = step(t, r, c, tc.move.Name); !kept || after != time.Second {
				t.Fatalf("a second before the TTL: kept %v, requeue after %s; want kept, back after 1s", kept, after)
			}
			clk.Step(time.Second)
			if kept, _ = step(t, r, c, tc.move.Name); kept {
				t.Fatal("the TTL passed and the move is still there")
			}
		})
	}
}

func TestZeroTTLDeletesAtOnce(t *testing.T) {
	m := ended("zero", fleetv1alpha1.MoveSucceeded, start, ptr.To[int32](0))
	r, c := newReconciler(clocktesting.NewFakeClock(start), m)
	if kept, _ := step(t, r, c, m.Name); kept {
		t.Fatal("a move with ttlSecondsAfterFinished 0 was kept after it ended")
	}
}

// TestMovesNotEndedNeverDeleted: a move under way or pending is never
// deleted, however old, and the reconciler sets no alarm for it.
func TestMovesNotEndedNeverDeleted(t *testing.T) {
	for _, phase := range []fleetv1alpha1.MovePhase{"", fleetv1alpha1.MovePending, fleetv1alpha1.MovePreparing, fleetv1alpha1.MoveMigrating, fleetv1alpha1.MoveRollingBack} {
		t.Run(string(phase), func(t *testing.T) {
			m := ended("kept", phase, start, ptr.To[int32](0))
			clk := clocktesting.NewFakeClock(start)
			r, c := newReconciler(clk, m)
			clk.Step(365 * 24 * time.Hour)
			if kept, after := step(t, r, c, m.Name); !kept || after != 0 {
				t.Fatalf("kept %v, requeue after %s; want kept, no requeue", kept, after)
			}
		})
	}
}

// TestRunningDrainHoldsItsMoves: a drain's ended move outlives its TTL
// while its cluster drains, and goes by its TTL once the drain ended; a
// move with the drain label the drain did not make is not held.
func TestRunningDrainHoldsItsMoves(t *testing.T) {
	day := 24 * time.Hour
	cases := map[string]struct {
		move    *fleetv1alpha1.FleetVirtualMachineMove
		cluster *clusterv1.ManagedCluster
		kept    bool
	}{
		"the drain's move, cluster draining": {
			move: ofDrain(ended("d", fleetv1alpha1.MoveFailed, start, nil)), cluster: managedCluster(true), kept: true,
		},
		"the drain's move, drain ended": {
			move: ofDrain(ended("d", fleetv1alpha1.MoveFailed, start, nil)), cluster: managedCluster(false),
		},
		"the drain's move, cluster gone": {
			move: ofDrain(ended("d", fleetv1alpha1.MoveSucceeded, start, nil)),
		},
		"the label alone, cluster draining": {
			move: func() *fleetv1alpha1.FleetVirtualMachineMove {
				m := ended("forged", fleetv1alpha1.MoveSucceeded, start, nil)
				m.Labels = map[string]string{fleetv1alpha1.LabelDrain: cluster}
				return m
			}(),
			cluster: managedCluster(true),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs := []client.Object{tc.move}
			if tc.cluster != nil {
				objs = append(objs, tc.cluster)
			}
			clk := clocktesting.NewFakeClock(start.Add(2 * day))
			r, c := newReconciler(clk, objs...)
			kept, after := step(t, r, c, tc.move.Name)
			if kept != tc.kept {
				t.Fatalf("kept %v, want %v", kept, tc.kept)
			}
			if kept && after != 0 {
				t.Errorf("held by its drain, requeued after %s: the drain's end brings it back", after)
			}
		})
	}
}

// TestDecideDeletesOnlyEndedMovesPastTheirTTL is the property the
// deletion rests on, over random times and TTLs.
func TestDecideDeletesOnlyEndedMovesPastTheirTTL(t *testing.T) {
	phases := []fleetv1alpha1.MovePhase{"", fleetv1alpha1.MovePending, fleetv1alpha1.MovePreparing, fleetv1alpha1.MoveSucceeded, fleetv1alpha1.MoveFailed}
	property := func(phase uint8, completedSec, nowSec uint32, ttl int32, held bool) bool {
		p := phases[int(phase)%len(phases)]
		completed := start.Add(time.Duration(completedSec) * time.Second)
		now := start.Add(time.Duration(nowSec) * time.Second)
		m := ended("m", p, completed, &ttl)
		d := Decide(m, now, held)
		ttlDur := time.Duration(max(ttl, 0)) * time.Second
		wantDelete := p.Terminal() && !held && !now.Before(completed.Add(ttlDur))
		if d.Delete != wantDelete {
			return false
		}
		if !d.Delete && p.Terminal() && !held {
			return d.After == completed.Add(ttlDur).Sub(now)
		}
		return d.After == 0
	}
	if err := quick.Check(property, &quick.Config{MaxCount: 2000}); err != nil {
		t.Error(err)
	}
}

func TestExpiry(t *testing.T) {
	got := map[string]time.Time{
		"default":            Expiry(ended("a", fleetv1alpha1.MoveSucceeded, start, nil)),
		"set":                Expiry(ended("b", fleetv1alpha1.MoveSucceeded, start, ptr.To[int32](60))),
		"no completion time": Expiry(&fleetv1alpha1.FleetVirtualMachineMove{Status: fleetv1alpha1.FleetVirtualMachineMoveStatus{Phase: fleetv1alpha1.MoveFailed}}),
	}
	want := map[string]time.Time{
		"default":            start.Add(24 * time.Hour),
		"set":                start.Add(time.Minute),
		"no completion time": {},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("expiry (-want,+got):\n%s", diff)
	}
}
