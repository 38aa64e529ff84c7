package safety

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/vmclaim"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

// TestProgressiveRollout: a FleetVM on three clusters with a Progressive
// rollout, one cluster at a time, each soaking a minute on the hub's
// clock, no failure allowed.
//
//   - A change of its memory reaches one cluster, whose VM KubeVirt must
//     restart to take it (RestartRequired): the hub stops it there and
//     starts it again on the new spec, and gives no other cluster the
//     revision until it has run ready for the soak, with any number of
//     reconciles in between. Watched on the spokes, the VM is down on at
//     most one cluster at any moment.
//   - Paused, the next change reaches no cluster until resumed.
//   - That change crashes the guest: the first cluster fails it, the
//     rollout stops, and the other two keep the previous revision, ready,
//     three soaks later.
//   - Undo (the previous template back) brings the first cluster back,
//     then the others take the new revision number, without a restart.
//   - Held stopped, a change rolls out too, each VM stopped on it.
//
// The revisions are ControllerRevisions beside the FleetVM. No copy is
// added or removed throughout.
func TestProgressiveRollout(t *testing.T) {
	const ns = "rollout"
	const soak = time.Minute
	build := func(memory string, crash bool) *fleetv1alpha1.FleetVirtualMachine {
		w := utiltesting.MakeFleetVM(ns, "web").Clusters(3).VM(1, memory).DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).
			Rollout(clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.Progressive, Progressive: &clusterv1alpha1.RolloutProgressive{
				MaxConcurrency: intstr.FromInt32(1),
				RolloutConfig:  clusterv1alpha1.RolloutConfig{MinSuccessTime: metav1.Duration{Duration: soak}},
			}})
		fvm := w.Obj()
		if crash {
			var vm map[string]any
			if err := json.Unmarshal(fvm.Spec.Template.Raw, &vm); err != nil {
				t.Fatal(err)
			}
			tmpl := vm["spec"].(map[string]any)["template"].(map[string]any)
			tmpl["metadata"] = map[string]any{"annotations": map[string]any{annotationCrash: "true"}}
			fvm = w.Template(&runtime.RawExtension{Raw: mustJSON(t, vm)}).Obj()
		}
		return fvm
	}
	fvm := build("1Gi", false)
	vm := vmclaim.Identity(fvm)
	check := vms.limit(vm, 3)
	create(t, fvm)
	key := client.ObjectKeyFromObject(fvm)
	on := firstRevisionSoaked(t, key, 3, soak)
	waitRevisions(t, vm, on, map[string]string{on[0]: "1", on[1]: "1", on[2]: "1"})
	mostDown := vms.watchDown(vm)

	change := func(f *fleetv1alpha1.FleetVirtualMachine) {
		t.Helper()
		cur := &fleetv1alpha1.FleetVirtualMachine{}
		if err := fleet.Hub.Client.Get(t.Context(), key, cur); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(cur.DeepCopy())
		cur.Spec.Template = f.Spec.Template
		if err := fleet.Hub.Client.Patch(t.Context(), cur, patch); err != nil {
			t.Fatal(err)
		}
	}
	// progress waits for each cluster in turn to take revision, ready and
	// soaking, with the others unchanged until its soak ended.
	progress := func(revision string, before string) {
		t.Helper()
		for i := range on {
			want := map[string]string{}
			for j, c := range on {
				want[c] = map[bool]string{true: revision, false: before}[j <= i]
			}
			if i > 0 {
				givenAfterSoak(t, key, on[i], revision, soak)
			}
			waitRevisions(t, vm, on, want)
			waitFVM(t, key, fmt.Sprintf("%s soaking revision %s", on[i], revision), func(f *fleetv1alpha1.FleetVirtualMachine) bool {
				r := rolloutOf(f, on[i])
				return r != nil && fmt.Sprint(r.Revision) == revision && r.State == "Soaking" && r.ReadySince != nil
			})
			settle(t, key)
			settle(t, key)
			if got := spokeRevisions(t, vm, on); !maps.Equal(got, want) {
				t.Fatalf("before %s's soak ended: revisions %v, want %v", on[i], got, want)
			}
			clock.Step(soak + time.Second)
			// The hub decides at the new time when it reconciles: its alarm may
			// be set only after the step (a fake clock fires no past timer).
			settle(t, key)
		}
		succeededAfterSoak(t, key, revision, soak)
	}

	change(build("2Gi", false))
	progress("2", "1")
	if n := mostDown(); n != 1 {
		t.Errorf("the VM was down on at most %d clusters at once during the rollout, want 1 (each restarted in its turn)", n)
	}
	for _, c := range on {
		if got := memoryOn(t, c, vm); got != "2Gi" {
			t.Errorf("%s: the VM's instance has %s, want the new 2Gi (restarted)", c, got)
		}
	}

	// Paused: the next change reaches no cluster until resumed.
	setAnnotation(t, key, fleetv1alpha1.AnnotationRolloutPaused, "true")
	change(build("3Gi", true))
	waitFVM(t, key, "revision 3 paused", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return f.Status.Rollout != nil && f.Status.Rollout.Revision == 3 && f.Status.Rollout.Phase == "Paused"
	})
	settle(t, key)
	clock.Step(soak + time.Second)
	settle(t, key)
	if got := spokeRevisions(t, vm, on); !maps.Equal(got, map[string]string{on[0]: "2", on[1]: "2", on[2]: "2"}) {
		t.Fatalf("paused: revisions %v, want revision 2 everywhere", got)
	}
	setAnnotation(t, key, fleetv1alpha1.AnnotationRolloutPaused, "")

	// Revision 3 crashes on the first cluster: the rollout fails there
	// and gives it to no other.
	waitFVM(t, key, "revision 3 failed", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		r := rolloutOf(f, on[0])
		return f.Status.Rollout.Phase == "Failed" && f.Status.Rollout.Failures == 1 && r != nil && r.State == "Failed"
	})
	clock.Step(3 * soak) // within the grace period: nothing else is due
	settle(t, key)
	if got := spokeRevisions(t, vm, on); !maps.Equal(got, map[string]string{on[0]: "3", on[1]: "2", on[2]: "2"}) {
		t.Fatalf("failed: revisions %v, want 3 on %s only", got, on[0])
	}
	for _, c := range on[1:] {
		if !readyOn(t, c, vm) {
			t.Errorf("%s: the VM is not ready on the previous revision after the rollout failed", c)
		}
	}

	// Undo: revision 2's template back, as revision 4.
	change(build("2Gi", false))
	progress("4", "2")
	if n := mostDown(); n != 1 {
		t.Errorf("the VM was down on at most %d clusters at once, want 1", n)
	}

	// Held stopped (runStrategy Halted, which reaches every cluster at
	// once), a change rolls out all the same: a stopped VM on its
	// revision is as healthy as it gets.
	cur := &fleetv1alpha1.FleetVirtualMachine{}
	if err := fleet.Hub.Client.Get(t.Context(), key, cur); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.RunStrategy = fleetv1alpha1.RunStrategyHalted
	if err := fleet.Hub.Client.Patch(t.Context(), cur, patch); err != nil {
		t.Fatal(err)
	}
	waitFVM(t, key, "stopped everywhere", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		for _, c := range f.Status.Clusters {
			if c.Phase != fleetv1alpha1.ClusterPhaseStopped {
				return false
			}
		}
		return len(f.Status.Clusters) == 3
	})
	change(build("1Gi", false))
	progress("5", "4")

	var revisions appsv1.ControllerRevisionList
	if err := fleet.Hub.Client.List(t.Context(), &revisions, client.InNamespace(ns), client.MatchingLabels{fleetv1alpha1.LabelFleetVMName: "web"}); err != nil {
		t.Fatal(err)
	}
	if err := fleet.Hub.Client.Get(t.Context(), key, cur); err != nil {
		t.Fatal(err)
	}
	var numbers []int64
	for _, r := range revisions.Items {
		// The test environment runs no garbage collector: an earlier
		// run's FleetVM of this name left its revisions.
		if metav1.IsControlledBy(&r, cur) {
			numbers = append(numbers, r.Revision)
		}
	}
	slices.Sort(numbers)
	if !slices.Equal(numbers, []int64{1, 2, 3, 4, 5}) {
		t.Errorf("ControllerRevisions numbered %v, want 1 to 5", numbers)
	}
	if c := vms.copies(vm); !slices.Equal(c, on) {
		t.Errorf("the VM runs on %v, want %v", c, on)
	}
	for _, v := range check() {
		t.Errorf("invariant: %s", v)
	}
}

// memoryOn is the guest memory of the VM's instance on the cluster ("-"
// without one).
func memoryOn(t *testing.T, cluster string, vm types.NamespacedName) string {
	t.Helper()
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := fleet.Spoke(cluster).Client.Get(t.Context(), vm, vmi); err != nil {
		if client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
		return "-"
	}
	if m := vmi.Spec.Domain.Memory; m != nil && m.Guest != nil {
		return m.Guest.String()
	}
	return ""
}

// readyOn tells whether the VM is ready on the cluster.
func readyOn(t *testing.T, cluster string, vm types.NamespacedName) bool {
	t.Helper()
	got := &kubevirtv1.VirtualMachine{}
	if err := fleet.Spoke(cluster).Client.Get(t.Context(), vm, got); err != nil {
		t.Fatal(err)
	}
	return got.Status.Ready
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// firstRevisionSoaked waits until the FleetVM runs on n clusters, each
// seen ready on revision 1 (the first revision soaks too, from when each
// copy was first seen ready on it), steps the clock past the soak, and
// waits until revision 1 succeeded; it returns the clusters.
func firstRevisionSoaked(t *testing.T, key client.ObjectKey, n int, soak time.Duration) []string {
	t.Helper()
	waitFVM(t, key, fmt.Sprintf("running on %d clusters, ready on revision 1", n), func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		if !running(n)(f) || f.Status.Rollout == nil || f.Status.Rollout.Revision != 1 {
			return false
		}
		for _, c := range f.Status.Clusters {
			if c.Rollout == nil || c.Rollout.ReadySince == nil {
				return false
			}
		}
		return true
	})
	clock.Step(soak + time.Second)
	// The hub decides at the new time when it reconciles: its alarm may
	// be set only after the step (a fake clock fires no past timer).
	settle(t, key)
	return names(succeededAfterSoak(t, key, "1", soak))
}

// givenAfterSoak waits until the hub gave cluster the revision, the
// soak of the cluster before it having passed on the hub's clock. When
// that cluster's VM was seen not ready again during its soak (a late
// report), its soak starts over: the clock is stepped past another one,
// at most twice, and only while cluster has not been given the revision,
// so no cluster's soak is ever cut short.
func givenAfterSoak(t *testing.T, key client.ObjectKey, cluster, revision string, soak time.Duration) {
	t.Helper()
	afterSoak(t, key, soak, cluster+" given revision "+revision, func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		r := rolloutOf(f, cluster)
		return r == nil || fmt.Sprint(r.Revision) == revision
	})
}

// succeededAfterSoak waits, as givenAfterSoak, until the rollout of
// revision succeeded, and returns the FleetVM.
func succeededAfterSoak(t *testing.T, key client.ObjectKey, revision string, soak time.Duration) *fleetv1alpha1.FleetVirtualMachine {
	t.Helper()
	return afterSoak(t, key, soak, "revision "+revision+" succeeded", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return f.Status.Rollout != nil && fmt.Sprint(f.Status.Rollout.Revision) == revision && f.Status.Rollout.Phase == "Succeeded"
	})
}

// afterSoak waits until cond holds, a soak having passed on the hub's
// clock; if it does not within 20 s, a soak started over (a VM seen not
// ready again, or its cluster's report not fresh, during it): the clock
// is stepped past another, at most twice.
func afterSoak(t *testing.T, key client.ObjectKey, soak time.Duration, what string, cond func(*fleetv1alpha1.FleetVirtualMachine) bool) *fleetv1alpha1.FleetVirtualMachine {
	t.Helper()
	f := &fleetv1alpha1.FleetVirtualMachine{}
	for attempt := 0; ; attempt++ {
		err := fleetenv.Eventually(t.Context(), 20*time.Second, func() (bool, error) {
			if err := fleet.Hub.Client.Get(t.Context(), key, f); err != nil {
				return false, err
			}
			return cond(f), nil
		})
		if err == nil {
			return f
		}
		if attempt == 2 {
			t.Fatalf("not %s after three soaks: %v; rollout %+v", what, err, f.Status.Rollout)
		}
		var parts []string
		for _, c := range f.Status.Clusters {
			parts = append(parts, fmt.Sprintf("%s %s ready=%t rollout=%+v", c.Cluster, c.Phase, c.Ready, c.Rollout))
		}
		t.Logf("not %s yet at %s: a soak started over; passing another (rollout %+v; clusters %v; the hub said: %s)",
			what, clock.Now().Format(time.RFC3339), f.Status.Rollout, parts, soakRestarts(t, key))
		clock.Step(soak + time.Second)
		settle(t, key)
	}
}

// soakRestarts are the hub's RolloutSoakRestarted events of the
// FleetVirtualMachine: why each soak started over.
func soakRestarts(t *testing.T, key client.ObjectKey) string {
	t.Helper()
	var events corev1.EventList
	if err := fleet.Hub.Client.List(t.Context(), &events, client.InNamespace(key.Namespace)); err != nil {
		return err.Error()
	}
	var out []string
	for _, e := range events.Items {
		if e.InvolvedObject.Name == key.Name && e.Reason == "RolloutSoakRestarted" {
			out = append(out, fmt.Sprintf("%q (%d times)", e.Message, e.Count))
		}
	}
	if len(out) == 0 {
		return "no RolloutSoakRestarted event"
	}
	return strings.Join(out, "; ")
}

// rolloutOf is a cluster's part of the rollout, as the status records it.
func rolloutOf(f *fleetv1alpha1.FleetVirtualMachine, cluster string) *fleetv1alpha1.ClusterRollout {
	for _, c := range f.Status.Clusters {
		if c.Cluster == cluster {
			return c.Rollout
		}
	}
	return nil
}

// spokeRevisions is the fleetvm.io/revision label of the VM on each of
// the clusters, as the spokes hold it ("" none, "-" no VM).
func spokeRevisions(t *testing.T, vm types.NamespacedName, clusters []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, c := range clusters {
		got := &kubevirtv1.VirtualMachine{}
		if err := fleet.Spoke(c).Client.Get(t.Context(), vm, got); err != nil {
			if client.IgnoreNotFound(err) != nil {
				t.Fatal(err)
			}
			out[c] = "-"
			continue
		}
		out[c] = got.Labels[fleetv1alpha1.LabelRevision]
	}
	return out
}

// waitRevisions waits until the spokes' VMs carry the revisions wanted.
func waitRevisions(t *testing.T, vm types.NamespacedName, clusters []string, want map[string]string) {
	t.Helper()
	var got map[string]string
	if err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		got = spokeRevisions(t, vm, clusters)
		return maps.Equal(got, want), nil
	}); err != nil {
		f := &fleetv1alpha1.FleetVirtualMachine{}
		_ = fleet.Hub.Client.Get(context.Background(), types.NamespacedName{Namespace: vm.Namespace, Name: "web"}, f)
		var parts []string
		for _, c := range f.Status.Clusters {
			parts = append(parts, fmt.Sprintf("%s %s ready=%v rollout=%+v", c.Cluster, c.Phase, c.Ready, c.Rollout))
		}
		t.Fatalf("spokes' revisions %v, want %v: %v\nrollout %+v\nclusters %v", got, want, err, f.Status.Rollout, parts)
	}
}

// setAnnotation sets (or, with value "", removes) an annotation of a
// FleetVirtualMachine.
func setAnnotation(t *testing.T, key client.ObjectKey, name, value string) {
	t.Helper()
	cur := &fleetv1alpha1.FleetVirtualMachine{}
	if err := fleet.Hub.Client.Get(t.Context(), key, cur); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cur.DeepCopy())
	if value == "" {
		delete(cur.Annotations, name)
	} else {
		metav1.SetMetaDataAnnotation(&cur.ObjectMeta, name, value)
	}
	if err := fleet.Hub.Client.Patch(t.Context(), cur, patch); err != nil {
		t.Fatal(err)
	}
}
