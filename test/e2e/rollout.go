package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// RolloutSpec changes the memory of a VM on two clusters under a
// Progressive rollout, one cluster at a time with a short soak, through
// real Argo CD: each cluster's VM is restarted on the new spec in its
// turn (KubeVirt's RestartRequired), never both down at once as the
// spokes show, and the rollout succeeds with both on revision 2.
func RolloutSpec(t *testing.T, in LifecycleInput) {
	in.Clusters = 2
	const soak = 3 * time.Second
	fvm := newTestFVM(in, "rolled", fleetv1alpha1.DeletionPolicyDelete)
	fvm.Spec.Rollout = &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.Progressive, Progressive: &clusterv1alpha1.RolloutProgressive{
		MaxConcurrency: intstr.FromInt32(1),
		RolloutConfig:  clusterv1alpha1.RolloutConfig{MinSuccessTime: metav1.Duration{Duration: soak}},
	}}
	decided := applyAndWaitRunning(t, in, fvm)
	waitFVM(t, in, fvm, "revision 1 succeeded", func(f *fleetv1alpha1.FleetVirtualMachine) error {
		if r := f.Status.Rollout; r == nil || r.Revision != 1 || r.Phase != "Succeeded" {
			return fmt.Errorf("rollout %+v", r)
		}
		return nil
	})

	// Watch the spokes while the change rolls out: when each copy is
	// first seen on revision 2 and ready, and how many are down at once.
	w := watchSpokes(t, in, fvm, decided, "2")
	setMemory(t, in, fvm, "2Gi")
	got := waitRollout(t, in, fvm, 2, "Succeeded")
	took, mostDown, arrived := w.stop()
	if got.Status.Rollout.PreviousRevision != 1 {
		t.Errorf("previous revision %d, want 1", got.Status.Rollout.PreviousRevision)
	}
	for _, c := range decided {
		waitMemory(t, in, fvm, c, "2Gi")
	}
	if mostDown > 1 {
		t.Errorf("the VM was down on %d clusters at once, want at most 1", mostDown)
	}
	if mostDown == 0 {
		t.Errorf("the VM was never seen down: no restart took the new memory")
	}
	t.Logf("Progressive rollout (maxConcurrency 1, minSuccessTime %s) of a memory change over %v with Argo CD: %s in all; "+
		"each cluster ready again on revision 2, restarted, after %v; at most %d down at once", soak, decided, took.Round(100*time.Millisecond), arrived, mostDown)
	deleteFVM(t, in, fvm)
}

// RolloutStrategiesSpec runs the other strategies and the operator's
// verbs on one VM on two clusters through real Argo CD, each timed:
//
//   - All: both clusters are given a memory change at once (both may be
//     down together);
//   - ProgressivePerGroup with one cluster per decision group
//     (spec.placement.decisionStrategy): one group at a time, never both
//     down;
//   - a change that cannot run (more memory than any node has: KubeVirt's
//     ErrorUnschedulable) fails on the first cluster, and the rollout
//     stops with the second untouched, ready on the previous revision;
//   - undo (the previous template back, a new revision) brings the first
//     back, ready;
//   - abort during a soak gives the first cluster the previous revision
//     back, restarted on its spec, and only then says RolledBack.
func RolloutStrategiesSpec(t *testing.T, in LifecycleInput) {
	in.Clusters = 2
	const soak = 3 * time.Second
	fvm := newTestFVM(in, "strategies", fleetv1alpha1.DeletionPolicyDelete)
	fvm.Spec.Rollout = &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.All}
	decided := applyAndWaitRunning(t, in, fvm)
	slices.Sort(decided)
	waitRollout(t, in, fvm, 1, "Succeeded")
	times := map[string]time.Duration{}

	// All: both at once.
	w := watchSpokes(t, in, fvm, decided, "2")
	setMemory(t, in, fvm, "2Gi")
	waitRollout(t, in, fvm, 2, "Succeeded")
	took, mostDown, _ := w.stop()
	times["All"] = took
	for _, c := range decided {
		waitMemory(t, in, fvm, c, "2Gi")
	}
	t.Logf("All: revision 2 on %v in %s, at most %d down at once", decided, took.Round(100*time.Millisecond), mostDown)

	// ProgressivePerGroup, one cluster per group: one group at a time.
	patchFVM(t, in, fvm, func(f *fleetv1alpha1.FleetVirtualMachine) {
		f.Spec.Placement.DecisionStrategy = &clusterv1beta1.DecisionStrategy{GroupStrategy: clusterv1beta1.GroupStrategy{
			ClustersPerDecisionGroup: intstr.FromInt32(1)}}
		f.Spec.Rollout = &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.ProgressivePerGroup, ProgressivePerGroup: &clusterv1alpha1.RolloutProgressivePerGroup{
			RolloutConfig: clusterv1alpha1.RolloutConfig{MinSuccessTime: metav1.Duration{Duration: soak}}}}
	})
	w = watchSpokes(t, in, fvm, decided, "3")
	setMemory(t, in, fvm, "3Gi")
	waitRollout(t, in, fvm, 3, "Succeeded")
	took, mostDown, arrived := w.stop()
	times["ProgressivePerGroup"] = took
	if mostDown != 1 {
		t.Errorf("ProgressivePerGroup with one cluster per group: at most %d down at once, want 1", mostDown)
	}
	if a, b := arrived[decided[0]], arrived[decided[1]]; a == 0 || b < a+soak {
		t.Errorf("group 1 (%s) ready on revision 3 after %s, group 0 (%s) after %s: want group 1 after group 0's soak of %s",
			decided[1], b, decided[0], a, soak)
	}
	t.Logf("ProgressivePerGroup (one cluster per group, minSuccessTime %s): revision 3 in %s; ready again after %v", soak, took.Round(100*time.Millisecond), arrived)

	// A change that cannot run fails on the first cluster; the second
	// keeps revision 3.
	patchFVM(t, in, fvm, func(f *fleetv1alpha1.FleetVirtualMachine) {
		f.Spec.Placement.DecisionStrategy = nil
		f.Spec.Rollout = &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.Progressive, Progressive: &clusterv1alpha1.RolloutProgressive{
			MaxConcurrency: intstr.FromInt32(1),
			RolloutConfig:  clusterv1alpha1.RolloutConfig{MinSuccessTime: metav1.Duration{Duration: soak}, ProgressDeadline: "10m"}}}
	})
	start := time.Now()
	setMemory(t, in, fvm, "4096Gi")
	waitRollout(t, in, fvm, 4, "Failed")
	times["failed"] = time.Since(start)
	// The phase stays Failed once the rollout failed; the first cluster's
	// record follows its VM's report, which may lag a generation for a
	// moment (Applying), so it is waited for, not read at once.
	got := waitFVM(t, in, fvm, "Failed on the first cluster, the second on revision 3", func(f *fleetv1alpha1.FleetVirtualMachine) error {
		if r := f.Status.Rollout; r == nil || r.Revision != 4 || r.Phase != "Failed" {
			return fmt.Errorf("rollout %+v, want revision 4 Failed", r)
		}
		if r := rolloutOf(f, decided[0]); r == nil || r.Revision != 4 || r.State != "Failed" {
			return fmt.Errorf("%s: rollout %+v, want revision 4 Failed", decided[0], r)
		}
		if r := rolloutOf(f, decided[1]); r == nil || r.Revision != 3 || r.State != "ToApply" {
			return fmt.Errorf("%s: rollout %+v, want revision 3 ToApply", decided[1], r)
		}
		return nil
	})
	waitSpokeVM(t, in, fvm, decided[1], "ready on revision 3", func(vm *kubevirtv1.VirtualMachine) bool {
		return vm.Status.Ready && vm.Labels[fleetv1alpha1.LabelRevision] == "3"
	})
	t.Logf("a change no node can run: Failed on %s after %s (%s), %s kept revision 3, ready",
		decided[0], times["failed"].Round(100*time.Millisecond), clusterOf(got, decided[0]).PrintableStatus, decided[1])

	// Undo: revision 3's template back, as revision 5.
	start = time.Now()
	setMemory(t, in, fvm, "3Gi")
	waitRollout(t, in, fvm, 5, "Succeeded")
	times["undo"] = time.Since(start)
	for _, c := range decided {
		waitMemory(t, in, fvm, c, "3Gi")
	}
	t.Logf("undo: revision 5 (revision 3's template) Succeeded in %s", times["undo"].Round(100*time.Millisecond))

	// Abort during the first cluster's soak.
	patchFVM(t, in, fvm, func(f *fleetv1alpha1.FleetVirtualMachine) {
		f.Spec.Rollout.Progressive.MinSuccessTime = metav1.Duration{Duration: time.Hour}
	})
	setMemory(t, in, fvm, "2Gi")
	waitFVM(t, in, fvm, decided[0]+" soaking revision 6", func(f *fleetv1alpha1.FleetVirtualMachine) error {
		if r := rolloutOf(f, decided[0]); r == nil || r.Revision != 6 || r.State != "Soaking" {
			return fmt.Errorf("rollout of %s %+v", decided[0], r)
		}
		return nil
	})
	waitMemory(t, in, fvm, decided[0], "2Gi")
	start = time.Now()
	patchFVM(t, in, fvm, func(f *fleetv1alpha1.FleetVirtualMachine) {
		metav1.SetMetaDataAnnotation(&f.ObjectMeta, fleetv1alpha1.AnnotationRolloutAbort, "6")
	})
	waitRollout(t, in, fvm, 6, "RolledBack")
	times["abort"] = time.Since(start)
	for _, c := range decided {
		// RolledBack says each runs revision 5 ready: the first was
		// restarted on its spec.
		vm := spokeVM(t, in, fvm, c)
		if !vm.Status.Ready || vm.Labels[fleetv1alpha1.LabelRevision] != "5" {
			t.Errorf("%s after RolledBack: ready %t, revision %q; want ready on 5", c, vm.Status.Ready, vm.Labels[fleetv1alpha1.LabelRevision])
		}
		if m := memoryOf(t, in, fvm, c); m != "3Gi" {
			t.Errorf("%s after RolledBack: the instance has %s, want revision 5's 3Gi", c, m)
		}
	}
	t.Logf("abort during a soak: RolledBack in %s, %s restarted on revision 5", times["abort"].Round(100*time.Millisecond), decided[0])
	t.Logf("strategies on %v with Argo CD: %v", decided, times)
	deleteFVM(t, in, fvm)
}

// RolloutGitSpec rolls a git source (repoURL, tags v1 and v2 of a VM
// named rolled-git, 1Gi then 2Gi) from v1 to v2 under a Progressive
// rollout, one cluster at a time with a short soak, through real Argo CD:
// each cluster's Application is given its revision's targetRevision, so
// the first cluster runs v2 while the second still runs v1; never both
// down at once, as the spokes show. Then back to v1 (what undo writes),
// as revision 3.
func RolloutGitSpec(t *testing.T, in LifecycleInput, repoURL string) {
	in.Clusters = 2
	const soak = 3 * time.Second
	fvm := &fleetv1alpha1.FleetVirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "rolled-git", Namespace: in.Namespace},
		Spec: fleetv1alpha1.FleetVirtualMachineSpec{
			Source:         &fleetv1alpha1.GitSource{RepoURL: repoURL, Path: ".", TargetRevision: "v1"},
			Placement:      fleetv1alpha1.FleetPlacement{Environment: in.Environment, Clusters: ptr.To(in.Clusters)},
			RunStrategy:    fleetv1alpha1.RunStrategyAlways,
			DeletionPolicy: fleetv1alpha1.DeletionPolicyDelete,
			Rollout: &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.Progressive, Progressive: &clusterv1alpha1.RolloutProgressive{
				MaxConcurrency: intstr.FromInt32(1),
				RolloutConfig:  clusterv1alpha1.RolloutConfig{MinSuccessTime: metav1.Duration{Duration: soak}},
			}},
		},
	}
	apply(t, in, fvm)
	// Revision 1 succeeds once both copies run it: a rollout over no
	// cluster yet says Progressing, not Succeeded.
	got := waitFVM(t, in, fvm, "revision 1 Succeeded on 2 clusters", func(f *fleetv1alpha1.FleetVirtualMachine) error {
		if r := f.Status.Rollout; r == nil || r.Revision != 1 {
			return fmt.Errorf("rollout %+v", r)
		} else if r.Phase == "Succeeded" && len(f.Status.Clusters) == 0 {
			return stop(fmt.Errorf("revision 1 Succeeded on no cluster: %+v", r))
		} else if r.Phase != "Succeeded" || len(f.Status.Clusters) != 2 {
			return fmt.Errorf("rollout %+v on %d clusters", r, len(f.Status.Clusters))
		}
		return nil
	})
	var decided []string
	for _, c := range got.Status.Clusters {
		decided = append(decided, c.Cluster)
	}
	slices.Sort(decided)
	for _, c := range decided {
		waitSpokeVM(t, in, fvm, c, "ready on revision 1", func(vm *kubevirtv1.VirtualMachine) bool {
			return vm.Status.Ready && vm.Labels[fleetv1alpha1.LabelRevision] == "1"
		})
		waitMemory(t, in, fvm, c, "1Gi")
	}

	// v2, one cluster at a time: while the first soaks on v2, the second
	// is given v1 still (its Application's targetRevision). The first
	// soak lasts an hour until the check is done, so the second cannot
	// move on between the wait and the reads; then it is the short one.
	w := watchSpokes(t, in, fvm, decided, "2")
	start := time.Now()
	patchFVM(t, in, fvm, func(f *fleetv1alpha1.FleetVirtualMachine) {
		f.Spec.Source.TargetRevision = "v2"
		f.Spec.Rollout.Progressive.MinSuccessTime = metav1.Duration{Duration: time.Hour}
	})
	var first string
	waitFVM(t, in, fvm, "one cluster soaking revision 2, the other waiting on 1", func(f *fleetv1alpha1.FleetVirtualMachine) error {
		for i, c := range decided {
			other := decided[1-i]
			if r, o := rolloutOf(f, c), rolloutOf(f, other); r != nil && r.Revision == 2 && r.State == "Soaking" && o != nil && o.Revision == 1 {
				first = c
				return nil
			}
		}
		return fmt.Errorf("clusters %+v", f.Status.Clusters)
	})
	second := decided[0]
	if second == first {
		second = decided[1]
	}
	targets := applicationTargets(t, in, fvm)
	if targets[first] != "v2" || targets[second] != "v1" {
		t.Errorf("while %s soaks revision 2: Applications' targetRevision %v, want %s on v2 and %s on v1", first, targets, first, second)
	}
	if m := memoryOf(t, in, fvm, second); m != "1Gi" {
		t.Errorf("%s runs %s while %s soaks revision 2, want v1's 1Gi", second, m, first)
	}
	patchFVM(t, in, fvm, func(f *fleetv1alpha1.FleetVirtualMachine) {
		f.Spec.Rollout.Progressive.MinSuccessTime = metav1.Duration{Duration: soak}
	})
	waitRollout(t, in, fvm, 2, "Succeeded")
	took, mostDown, arrived := w.stop()
	for _, c := range decided {
		waitMemory(t, in, fvm, c, "2Gi")
	}
	if mostDown != 1 {
		t.Errorf("at most %d down at once, want 1 (one restart at a time)", mostDown)
	}
	if a, b := arrived[first], arrived[second]; a == 0 || b < a+soak {
		t.Errorf("%s ready on revision 2 after %s, %s after %s: want the second after the first's soak of %s", first, a, second, b, soak)
	}
	t.Logf("git source v1 -> v2, Progressive (maxConcurrency 1, minSuccessTime %s) over %v: %s in all; ready again on revision 2 after %v; at most %d down at once",
		soak, decided, took.Round(100*time.Millisecond), arrived, mostDown)

	// Back to v1, as undo writes it: a new revision, rolled out the same way.
	w = watchSpokes(t, in, fvm, decided, "3")
	patchFVM(t, in, fvm, func(f *fleetv1alpha1.FleetVirtualMachine) { f.Spec.Source.TargetRevision = "v1" })
	waitRollout(t, in, fvm, 3, "Succeeded")
	took, mostDown, _ = w.stop()
	for _, c := range decided {
		waitMemory(t, in, fvm, c, "1Gi")
	}
	if mostDown != 1 {
		t.Errorf("back to v1: at most %d down at once, want 1", mostDown)
	}
	t.Logf("git source back to v1 as revision 3: %s (%s since the first change)", took.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))
	deleteFVM(t, in, fvm)
}

// applicationTargets is the targetRevision of each cluster's Application.
func applicationTargets(t *testing.T, in LifecycleInput, fvm *fleetv1alpha1.FleetVirtualMachine) map[string]string {
	t.Helper()
	var apps argov1alpha1.ApplicationList
	if err := in.Hub.List(t.Context(), &apps, client.InNamespace(in.ArgoNamespace), client.MatchingLabels{
		fleetv1alpha1.LabelFleetVMName: fvm.Name, fleetv1alpha1.LabelFleetVMNamespace: fvm.Namespace,
	}); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, a := range apps.Items {
		if a.Spec.Source != nil {
			out[a.Spec.Destination.Name] = a.Spec.Source.TargetRevision
		}
	}
	return out
}

// spokeWatch follows a VM's copies on the spokes while a change rolls
// out: how many are down at once, and when each is first ready again
// on the revision after going down.
type spokeWatch struct {
	cancel   context.CancelFunc
	done     chan struct{}
	start    time.Time
	mu       sync.Mutex
	mostDown int
	wentDown map[string]bool
	arrived  map[string]time.Duration
}

func watchSpokes(t *testing.T, in LifecycleInput, fvm *fleetv1alpha1.FleetVirtualMachine, clusters []string, revision string) *spokeWatch {
	ctx, cancel := context.WithCancel(t.Context())
	w := &spokeWatch{cancel: cancel, done: make(chan struct{}), start: time.Now(), wentDown: map[string]bool{}, arrived: map[string]time.Duration{}}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			down := 0
			for _, c := range clusters {
				vm := &kubevirtv1.VirtualMachine{}
				if err := in.Spokes[c].Get(ctx, vmKey(fvm), vm); err != nil {
					continue
				}
				w.mu.Lock()
				if !vm.Status.Ready {
					down++
					w.wentDown[c] = true
				} else if _, ok := w.arrived[c]; !ok && w.wentDown[c] && vm.Labels[fleetv1alpha1.LabelRevision] == revision {
					w.arrived[c] = time.Since(w.start) // ready again after its restart
				}
				w.mu.Unlock()
			}
			w.mu.Lock()
			w.mostDown = max(w.mostDown, down)
			w.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return w
}

// stop ends the watch: how long since it started, the most copies down
// at once, and when each came back on the revision.
func (w *spokeWatch) stop() (time.Duration, int, map[string]time.Duration) {
	took := time.Since(w.start)
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return took, w.mostDown, maps.Clone(w.arrived)
}

// setMemory changes the guest memory of the VM's template.
func setMemory(t *testing.T, in LifecycleInput, fvm *fleetv1alpha1.FleetVirtualMachine, memory string) {
	t.Helper()
	patchFVM(t, in, fvm, func(f *fleetv1alpha1.FleetVirtualMachine) {
		var vm map[string]any
		if err := json.Unmarshal(f.Spec.Template.Raw, &vm); err != nil {
			t.Fatal(err)
		}
		domain := vm["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["domain"].(map[string]any)
		domain["memory"] = map[string]any{"guest": memory}
		raw, err := json.Marshal(vm)
		if err != nil {
			t.Fatal(err)
		}
		f.Spec.Template.Raw = raw
	})
}

// waitRollout waits until the rollout of the revision is in the phase.
func waitRollout(t *testing.T, in LifecycleInput, fvm *fleetv1alpha1.FleetVirtualMachine, revision int64, phase string) *fleetv1alpha1.FleetVirtualMachine {
	t.Helper()
	return waitFVM(t, in, fvm, fmt.Sprintf("revision %d %s", revision, phase), func(f *fleetv1alpha1.FleetVirtualMachine) error {
		if r := f.Status.Rollout; r == nil || r.Revision != revision || string(r.Phase) != phase {
			return fmt.Errorf("rollout %+v", r)
		}
		return nil
	})
}

// waitMemory waits until the VM's instance on the cluster has the guest
// memory (it was restarted on the spec that asks for it).
func waitMemory(t *testing.T, in LifecycleInput, fvm *fleetv1alpha1.FleetVirtualMachine, cluster, memory string) {
	t.Helper()
	waitSpoke(t, in, cluster, "the VM's instance with "+memory, func(ctx context.Context, sc client.Client) error {
		vmi := &kubevirtv1.VirtualMachineInstance{}
		if err := sc.Get(ctx, vmKey(fvm), vmi); err != nil {
			return err
		}
		if m := vmi.Spec.Domain.Memory; m == nil || m.Guest == nil || m.Guest.String() != memory {
			return fmt.Errorf("instance memory %v, want %s", m, memory)
		}
		return nil
	})
}

// memoryOf is the guest memory of the VM's instance on the cluster.
func memoryOf(t *testing.T, in LifecycleInput, fvm *fleetv1alpha1.FleetVirtualMachine, cluster string) string {
	t.Helper()
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := in.Spokes[cluster].Get(t.Context(), vmKey(fvm), vmi); err != nil {
		t.Fatalf("%s: %v", cluster, err)
	}
	if m := vmi.Spec.Domain.Memory; m != nil && m.Guest != nil {
		return m.Guest.String()
	}
	return ""
}

// spokeVM reads the VM on the cluster.
func spokeVM(t *testing.T, in LifecycleInput, fvm *fleetv1alpha1.FleetVirtualMachine, cluster string) *kubevirtv1.VirtualMachine {
	t.Helper()
	vm := &kubevirtv1.VirtualMachine{}
	if err := in.Spokes[cluster].Get(t.Context(), vmKey(fvm), vm); err != nil {
		t.Fatalf("%s: %v", cluster, err)
	}
	return vm
}

// waitSpokeVM waits until the VM on the cluster passes cond.
func waitSpokeVM(t *testing.T, in LifecycleInput, fvm *fleetv1alpha1.FleetVirtualMachine, cluster, what string, cond func(*kubevirtv1.VirtualMachine) bool) {
	t.Helper()
	waitSpoke(t, in, cluster, "the VM "+what, func(ctx context.Context, sc client.Client) error {
		vm := &kubevirtv1.VirtualMachine{}
		if err := sc.Get(ctx, vmKey(fvm), vm); err != nil {
			return err
		}
		if !cond(vm) {
			return fmt.Errorf("ready %t, revision %q, %s", vm.Status.Ready, vm.Labels[fleetv1alpha1.LabelRevision], vm.Status.PrintableStatus)
		}
		return nil
	})
}

// rolloutOf is a cluster's part of the rollout, as the status records it.
func rolloutOf(f *fleetv1alpha1.FleetVirtualMachine, cluster string) *fleetv1alpha1.ClusterRollout {
	return clusterOf(f, cluster).Rollout
}

// clusterOf is the cluster's entry in the status (empty when none).
func clusterOf(f *fleetv1alpha1.FleetVirtualMachine, cluster string) fleetv1alpha1.ClusterStatus {
	for _, c := range f.Status.Clusters {
		if c.Cluster == cluster {
			return c
		}
	}
	return fleetv1alpha1.ClusterStatus{}
}
