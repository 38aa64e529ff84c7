package safety

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
// clock. A change of its template reaches one cluster, whose VM runs it
// ready, and no other until the soak has passed: the spokes show it,
// with any number of reconciles in between. Each minute brings the next
// cluster, then the rollout succeeds. Pausing holds the next change on
// the first cluster; resuming lets it go on. The revisions are
// ControllerRevisions beside the FleetVM. No copy is added or removed
// throughout.
func TestProgressiveRollout(t *testing.T) {
	const ns = "rollout"
	const soak = time.Minute
	build := func(memory string) *fleetv1alpha1.FleetVirtualMachine {
		return utiltesting.MakeFleetVM(ns, "web").Clusters(3).VM(1, memory).DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).
			Rollout(clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.Progressive, Progressive: &clusterv1alpha1.RolloutProgressive{
				MaxConcurrency: intstr.FromInt32(1),
				RolloutConfig:  clusterv1alpha1.RolloutConfig{MinSuccessTime: metav1.Duration{Duration: soak}},
			}}).Obj()
	}
	fvm := build("1Gi")
	vm := vmclaim.Identity(fvm)
	check := vms.limit(vm, 3)
	create(t, fvm)
	key := client.ObjectKeyFromObject(fvm)
	// The first revision soaks too, from when each copy was first seen
	// ready on it.
	waitFVM(t, key, "running on 3 clusters, ready on revision 1", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		if !running(3)(f) || f.Status.Rollout == nil || f.Status.Rollout.Revision != 1 {
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
	got := waitFVM(t, key, "revision 1 succeeded", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return f.Status.Rollout != nil && f.Status.Rollout.Phase == "Succeeded"
	})
	on := names(got)
	waitRevisions(t, vm, on, map[string]string{on[0]: "1", on[1]: "1", on[2]: "1"})

	change := func(memory string) {
		t.Helper()
		cur := &fleetv1alpha1.FleetVirtualMachine{}
		if err := fleet.Hub.Client.Get(t.Context(), key, cur); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(cur.DeepCopy())
		cur.Spec.Template = build(memory).Spec.Template
		if err := fleet.Hub.Client.Patch(t.Context(), cur, patch); err != nil {
			t.Fatal(err)
		}
	}
	change("2Gi")
	// One cluster at a time, in name order, each after the soak of the
	// one before.
	for i := range on {
		want := map[string]string{}
		for j, c := range on {
			want[c] = map[bool]string{true: "2", false: "1"}[j <= i]
		}
		waitRevisions(t, vm, on, want)
		waitFVM(t, key, fmt.Sprintf("%s soaking revision 2", on[i]), func(f *fleetv1alpha1.FleetVirtualMachine) bool {
			r := rolloutOf(f, on[i])
			return r != nil && r.Revision == 2 && r.State == "Soaking" && r.ReadySince != nil
		})
		// Reconciles before the soak ends give no other cluster the
		// revision.
		settle(t, key)
		settle(t, key)
		if got := spokeRevisions(t, vm, on); !maps.Equal(got, want) {
			t.Fatalf("before %s's soak ended: revisions %v, want %v", on[i], got, want)
		}
		clock.Step(soak + time.Second)
	}
	got = waitFVM(t, key, "revision 2 succeeded", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return f.Status.Rollout != nil && f.Status.Rollout.Revision == 2 && f.Status.Rollout.Phase == "Succeeded"
	})
	if got.Status.Rollout.PreviousRevision != 1 || got.Status.Rollout.Updated != 3 {
		t.Errorf("rollout status %+v, want previous revision 1 and 3 clusters updated", *got.Status.Rollout)
	}

	// Paused: the next change reaches the first cluster only once
	// resumed.
	setAnnotation(t, key, "fleetvm.io/rollout-paused", "true")
	change("3Gi")
	waitFVM(t, key, "revision 3 paused", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return f.Status.Rollout != nil && f.Status.Rollout.Revision == 3 && f.Status.Rollout.Phase == "Paused"
	})
	settle(t, key)
	clock.Step(soak + time.Second)
	settle(t, key)
	if got := spokeRevisions(t, vm, on); !maps.Equal(got, map[string]string{on[0]: "2", on[1]: "2", on[2]: "2"}) {
		t.Fatalf("paused: revisions %v, want revision 2 everywhere", got)
	}
	setAnnotation(t, key, "fleetvm.io/rollout-paused", "")
	waitRevisions(t, vm, on, map[string]string{on[0]: "3", on[1]: "2", on[2]: "2"})

	var revisions appsv1.ControllerRevisionList
	if err := fleet.Hub.Client.List(t.Context(), &revisions, client.InNamespace(ns), client.MatchingLabels{fleetv1alpha1.LabelFleetVMName: "web"}); err != nil {
		t.Fatal(err)
	}
	var numbers []int64
	for _, r := range revisions.Items {
		numbers = append(numbers, r.Revision)
	}
	slices.Sort(numbers)
	if !slices.Equal(numbers, []int64{1, 2, 3}) {
		t.Errorf("ControllerRevisions numbered %v, want 1, 2, 3", numbers)
	}
	if c := vms.copies(vm); !slices.Equal(c, on) {
		t.Errorf("the VM runs on %v, want %v", c, on)
	}
	for _, v := range check() {
		t.Errorf("invariant: %s", v)
	}
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
		t.Fatalf("spokes' revisions %v, want %v: %v", got, want, err)
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
