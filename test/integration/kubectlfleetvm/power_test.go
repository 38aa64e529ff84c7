package kubectlfleetvm

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/kubectlfleetvm"
)

// sameBut fails the test unless after is before with runStrategy rs: the
// rest of the spec, labels and annotations untouched.
func sameBut(t *testing.T, before, after *fleetv1alpha1.FleetVirtualMachine, rs fleetv1alpha1.RunStrategy) {
	t.Helper()
	want := before.Spec.DeepCopy()
	want.RunStrategy = rs
	if diff := cmp.Diff(*want, after.Spec); diff != "" {
		t.Errorf("spec (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(before.Labels, after.Labels); diff != "" {
		t.Errorf("labels (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(before.Annotations, after.Annotations); diff != "" {
		t.Errorf("annotations (-want,+got):\n%s", diff)
	}
}

// ownedByPlugin returns the fields the kubectl-fleetvm field manager owns.
func ownedByPlugin(fvm *fleetv1alpha1.FleetVirtualMachine) string {
	for _, m := range fvm.ManagedFields {
		if m.Manager == kubectlfleetvm.FieldManager && m.FieldsV1 != nil {
			return string(m.FieldsV1.Raw)
		}
	}
	return ""
}

func TestStartStop(t *testing.T) {
	ns := namespace(t, "start-stop")
	create(t, newFVM(ns, "web", fleetv1alpha1.RunStrategyAlways))
	before := get(t, ns, "web")

	r := kubectl(t, time.Time{}, "stop", "-n", ns, "web")
	if r.err != nil {
		t.Fatalf("stop: %v", r.err)
	}
	if want := "fleetvirtualmachine.fleetvm.io/web stopped: runStrategy Halted (was Always)\n"; r.out != want {
		t.Errorf("stop printed %q, want %q", r.out, want)
	}
	stopped := get(t, ns, "web")
	sameBut(t, before, stopped, fleetv1alpha1.RunStrategyHalted)
	if got, want := ownedByPlugin(stopped), `{"f:spec":{"f:runStrategy":{}}}`; got != want {
		t.Errorf("fields owned by %s = %s, want %s", kubectlfleetvm.FieldManager, got, want)
	}

	r = kubectl(t, time.Time{}, "stop", "-n", ns, "web")
	if want := "fleetvirtualmachine.fleetvm.io/web already has runStrategy Halted\n"; r.err != nil || r.out != want {
		t.Errorf("second stop: err %v, printed %q, want %q", r.err, r.out, want)
	}
	if g := get(t, ns, "web").Generation; g != stopped.Generation {
		t.Errorf("a second stop changed the object: generation %d, want %d", g, stopped.Generation)
	}

	r = kubectl(t, time.Time{}, "start", "-n", ns, "web")
	if want := "fleetvirtualmachine.fleetvm.io/web started: runStrategy Always (was Halted)\n"; r.err != nil || r.out != want {
		t.Errorf("start: err %v, printed %q, want %q", r.err, r.out, want)
	}
	sameBut(t, before, get(t, ns, "web"), fleetv1alpha1.RunStrategyAlways)

	r = kubectl(t, time.Time{}, "start", "-n", ns, "nope")
	if want := `FleetVirtualMachine "nope" not found in namespace "start-stop"`; r.err == nil || r.err.Error() != want {
		t.Errorf("start of a missing object: error %v, want %q", r.err, want)
	}
}

func TestStopWaitsForEveryCluster(t *testing.T) {
	ns := namespace(t, "stop-wait")
	create(t, newFVM(ns, "web", fleetv1alpha1.RunStrategyAlways))
	if err := setStatus(t.Context(), ns, "web", func(f *fleetv1alpha1.FleetVirtualMachine) {
		f.Status.Clusters = clusters(fleetv1alpha1.ClusterPhaseRunning, "prod-a", "prod-b")
	}); err != nil {
		t.Fatal(err)
	}

	r := start(t.Context(), time.Time{}, "stop", "--wait", "--timeout", "1m", "-n", ns, "web")
	waitRunStrategy(t, ns, "web", fleetv1alpha1.RunStrategyHalted)
	r.printed(t, "the hub controller to observe generation 2 (status is at 1)")
	if err := setStatus(t.Context(), ns, "web", func(f *fleetv1alpha1.FleetVirtualMachine) {
		f.Status.Clusters = append(clusters(fleetv1alpha1.ClusterPhaseStopped, "prod-a"), clusters(fleetv1alpha1.ClusterPhaseStopping, "prod-b")...)
	}); err != nil {
		t.Fatal(err)
	}
	r.printed(t, "waiting for stop-wait/web to stop: prod-b (Stopping)")
	select {
	case <-r.done:
		t.Fatalf("stop --wait returned while prod-b was still stopping: %v\n%s", r.err, r.out)
	default:
	}
	if err := setStatus(t.Context(), ns, "web", func(f *fleetv1alpha1.FleetVirtualMachine) {
		f.Status.Clusters = clusters(fleetv1alpha1.ClusterPhaseStopped, "prod-a", "prod-b")
	}); err != nil {
		t.Fatal(err)
	}
	r.wait(t)
	if r.err != nil {
		t.Fatalf("stop --wait: %v\n%s", r.err, r.errOut)
	}
	want := "fleetvirtualmachine.fleetvm.io/web stopped: runStrategy Halted (was Always)\n" +
		"fleetvirtualmachine.fleetvm.io/web: every cluster reports the VM Stopped\n"
	if diff := cmp.Diff(want, r.out.String()); diff != "" {
		t.Errorf("output (-want,+got):\n%s", diff)
	}
}

// TestRestart plays the hub: it reports the VM stopping, then stopped, on
// both clusters, and checks the plugin starts it again only then, with the
// runStrategy it had.
func TestRestart(t *testing.T) {
	ns := namespace(t, "restart")
	create(t, newFVM(ns, "web", fleetv1alpha1.RunStrategyRerunOnFailure))
	if err := setStatus(t.Context(), ns, "web", func(f *fleetv1alpha1.FleetVirtualMachine) {
		f.Status.Clusters = append(clusters(fleetv1alpha1.ClusterPhaseRunning, "prod-a", "prod-b"),
			fleetv1alpha1.ClusterStatus{Cluster: "old", Phase: fleetv1alpha1.ClusterPhaseLeaving, Ready: true})
	}); err != nil {
		t.Fatal(err)
	}
	before := get(t, ns, "web")

	r := start(t.Context(), time.Time{}, "restart", "--timeout", "1m", "-n", ns, "web")
	waitRunStrategy(t, ns, "web", fleetv1alpha1.RunStrategyHalted)
	if err := setStatus(t.Context(), ns, "web", func(f *fleetv1alpha1.FleetVirtualMachine) {
		f.Status.Clusters = append(clusters(fleetv1alpha1.ClusterPhaseStopped, "prod-a"), clusters(fleetv1alpha1.ClusterPhaseStopping, "prod-b")...)
		f.Status.Clusters = append(f.Status.Clusters, fleetv1alpha1.ClusterStatus{Cluster: "old", Phase: fleetv1alpha1.ClusterPhaseLeaving, Ready: true})
	}); err != nil {
		t.Fatal(err)
	}
	r.printed(t, "waiting for restart/web to stop: prod-b (Stopping)")
	if rs := get(t, ns, "web").Spec.RunStrategy; rs != fleetv1alpha1.RunStrategyHalted {
		t.Fatalf("restart started the VM again (runStrategy %s) while prod-b was still stopping", rs)
	}
	// The leaving cluster "old" keeps running: it is not waited for.
	if err := setStatus(t.Context(), ns, "web", func(f *fleetv1alpha1.FleetVirtualMachine) {
		f.Status.Clusters = append(clusters(fleetv1alpha1.ClusterPhaseStopped, "prod-a", "prod-b"),
			fleetv1alpha1.ClusterStatus{Cluster: "old", Phase: fleetv1alpha1.ClusterPhaseLeaving, Ready: true})
	}); err != nil {
		t.Fatal(err)
	}
	r.wait(t)
	if r.err != nil {
		t.Fatalf("restart: %v\n%s", r.err, r.errOut)
	}
	want := "fleetvirtualmachine.fleetvm.io/web stopping on 2 clusters (runStrategy Halted, was RerunOnFailure)\n" +
		"fleetvirtualmachine.fleetvm.io/web restarted: stopped on every cluster, runStrategy back to RerunOnFailure\n"
	if diff := cmp.Diff(want, r.out.String()); diff != "" {
		t.Errorf("output (-want,+got):\n%s", diff)
	}
	after := get(t, ns, "web")
	sameBut(t, before, after, fleetv1alpha1.RunStrategyRerunOnFailure)
	if after.Generation != before.Generation+2 {
		t.Errorf("generation %d, want %d: one stop and one start", after.Generation, before.Generation+2)
	}
}

func TestRestartNeverLeavesTheVMStopped(t *testing.T) {
	ns := namespace(t, "restart-fails")
	running := func(name string) {
		t.Helper()
		create(t, newFVM(ns, name, fleetv1alpha1.RunStrategyAlways))
		if err := setStatus(t.Context(), ns, name, func(f *fleetv1alpha1.FleetVirtualMachine) {
			f.Status.Clusters = clusters(fleetv1alpha1.ClusterPhaseRunning, "prod-a")
		}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("timeout", func(t *testing.T) {
		running("slow")
		// Nobody reports the VM stopped: the bounded wait runs out.
		r := kubectl(t, time.Time{}, "restart", "--timeout", "1s", "-n", ns, "slow")
		want := "restart of restart-fails/slow failed: gave up after 1s waiting for restart-fails/slow to stop on every cluster; " +
			"still waiting for the hub controller to observe generation 2 (status is at 1); runStrategy is back to Always"
		if r.err == nil || r.err.Error() != want {
			t.Errorf("error = %v\nwant    %s", r.err, want)
		}
		if fvm := get(t, ns, "slow"); fvm.Spec.RunStrategy != fleetv1alpha1.RunStrategyAlways || fvm.Generation != 3 {
			t.Errorf("runStrategy %s generation %d, want Always generation 3", fvm.Spec.RunStrategy, fvm.Generation)
		}
	})

	t.Run("interrupted", func(t *testing.T) {
		running("interrupted")
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		r := start(ctx, time.Time{}, "restart", "-n", ns, "interrupted")
		waitRunStrategy(t, ns, "interrupted", fleetv1alpha1.RunStrategyHalted)
		cancel()
		r.wait(t)
		if r.err == nil || !strings.Contains(r.err.Error(), "interrupted while waiting") || !strings.HasSuffix(r.err.Error(), "runStrategy is back to Always") {
			t.Errorf("error = %v, want an interruption with runStrategy back to Always", r.err)
		}
		if rs := get(t, ns, "interrupted").Spec.RunStrategy; rs != fleetv1alpha1.RunStrategyAlways {
			t.Errorf("runStrategy %s after an interrupted restart, want Always", rs)
		}
	})

	t.Run("someone else changes runStrategy meanwhile", func(t *testing.T) {
		running("contested")
		r := start(t.Context(), time.Time{}, "restart", "--timeout", "1m", "-n", ns, "contested")
		waitRunStrategy(t, ns, "contested", fleetv1alpha1.RunStrategyHalted)
		fvm := get(t, ns, "contested")
		patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"runStrategy":"Manual"}}`))
		if err := fleet.Hub.Client.Patch(t.Context(), fvm, patch, client.FieldOwner("someone-else")); err != nil {
			t.Fatal(err)
		}
		r.wait(t)
		want := "restart of restart-fails/contested abandoned: runStrategy was changed to Manual by someone else (expected Halted): leaving it as is"
		if r.err == nil || r.err.Error() != want {
			t.Errorf("error = %v\nwant    %s", r.err, want)
		}
		if rs := get(t, ns, "contested").Spec.RunStrategy; rs != fleetv1alpha1.RunStrategyManual {
			t.Errorf("runStrategy %s, want the other user's Manual", rs)
		}
	})
}

func TestRestartRefuses(t *testing.T) {
	ns := namespace(t, "restart-refuses")
	for name, tc := range map[string]struct {
		rs       fleetv1alpha1.RunStrategy
		clusters []fleetv1alpha1.ClusterStatus
		want     string
	}{
		"halted": {
			rs: fleetv1alpha1.RunStrategyHalted, clusters: clusters(fleetv1alpha1.ClusterPhaseStopped, "prod-a"),
			want: "restart-refuses/halted is stopped on purpose (runStrategy Halted): use 'kubectl fleetvm start halted'",
		},
		"manual": {
			rs: fleetv1alpha1.RunStrategyManual, clusters: clusters(fleetv1alpha1.ClusterPhaseRunning, "prod-a"),
			want: "restart-refuses/manual has runStrategy Manual: KubeVirt leaves such a VM stopped after a stop",
		},
		"unplaced": {
			rs:   fleetv1alpha1.RunStrategyAlways,
			want: "restart-refuses/unplaced is not on any cluster yet (status.clusters is empty): nothing to restart",
		},
	} {
		t.Run(name, func(t *testing.T) {
			create(t, newFVM(ns, name, tc.rs))
			if err := setStatus(t.Context(), ns, name, func(f *fleetv1alpha1.FleetVirtualMachine) {
				f.Status.Clusters = tc.clusters
				f.Status.Conditions = []metav1.Condition{condition(fleetv1alpha1.ConditionReady, metav1.ConditionFalse,
					fleetv1alpha1.ReasonNoneReady, "for the test", metav1.Now())}
			}); err != nil {
				t.Fatal(err)
			}
			before := get(t, ns, name)
			r := kubectl(t, time.Time{}, "restart", "-n", ns, name)
			if r.err == nil || !strings.HasPrefix(r.err.Error(), tc.want) {
				t.Errorf("error = %v\nwant    %s...", r.err, tc.want)
			}
			if after := get(t, ns, name); after.ResourceVersion != before.ResourceVersion {
				t.Errorf("a refused restart changed the object: %+v", after.Spec)
			}
		})
	}
}
