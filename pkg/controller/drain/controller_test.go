package drain

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/argoapp"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

const (
	cluster = "prod-a"
	uid     = "6f1c2a8e-0d1b-4d8e-9c1a-2b3c4d5e6f70"
	ns      = "team"
)

func draining() *clusterv1.ManagedCluster {
	return &clusterv1.ManagedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: cluster, UID: uid},
		Spec: clusterv1.ManagedClusterSpec{Taints: []clusterv1.Taint{{
			Key: fleetv1alpha1.DrainTaintKey, Effect: clusterv1.TaintEffectNoSelectIfNew,
		}}},
	}
}

func copyOn(name string) *fleetv1alpha1.FleetVirtualMachine {
	return &fleetv1alpha1.FleetVirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Status:     fleetv1alpha1.FleetVirtualMachineStatus{Clusters: []fleetv1alpha1.ClusterStatus{{Cluster: cluster}}},
	}
}

// drainMove is a move labelled for the drain of cluster; with the
// cluster's UID when own.
func drainMove(name, fvm string, phase fleetv1alpha1.MovePhase, own bool) *fleetv1alpha1.FleetVirtualMachineMove {
	m := &fleetv1alpha1.FleetVirtualMachineMove{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{fleetv1alpha1.LabelDrain: cluster}},
		Spec:       fleetv1alpha1.FleetVirtualMachineMoveSpec{FleetVirtualMachine: fvm, From: cluster},
		Status:     fleetv1alpha1.FleetVirtualMachineMoveStatus{Phase: phase},
	}
	if own {
		m.Annotations = map[string]string{AnnotationCluster: uid}
	}
	return m
}

func reconcileDrain(t *testing.T, limits Limits, objs ...client.Object) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(fleetv1alpha1.AddToScheme(s))
	utilruntime.Must(clusterv1.Install(s))
	utilruntime.Must(clusterv1beta1.Install(s))
	utilruntime.Must(workv1.Install(s))
	utilruntime.Must(argoapp.AddToScheme(s)) // as hub.Scheme: the hub's view of Applications
	b := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithStatusSubresource(&fleetv1alpha1.FleetVirtualMachine{}, &fleetv1alpha1.FleetVirtualMachineMove{})
	if err := fleetvirtualmachine.SetupIndexes(t.Context(), utiltesting.Indexer{Builder: b}); err != nil {
		t.Fatal(err)
	}
	c := b.Build()
	r := &Reconciler{Client: c, Limits: limits}
	if _, err := r.Reconcile(t.Context(), ctrl.Request{NamespacedName: types.NamespacedName{Name: cluster}}); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return c
}

func moveNames(t *testing.T, c client.Client) []string {
	t.Helper()
	list := &fleetv1alpha1.FleetVirtualMachineMoveList{}
	if err := c.List(t.Context(), list); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range list.Items {
		out = append(out, m.Name)
	}
	slices.Sort(out)
	return out
}

// TestDrainCountsOnlyItsOwnMoves: a move carrying the drain label but not
// the cluster's UID (what a team could write where admission is off)
// takes no slot and keeps no copy on the cluster; the drain's own moves
// do both.
func TestDrainCountsOnlyItsOwnMoves(t *testing.T) {
	cases := map[string]struct {
		limits Limits
		objs   []client.Object
		want   []string
	}{
		"forged moves take no slot": {
			limits: Limits{PerCluster: 2, PerNode: 2},
			objs: []client.Object{draining(), copyOn("a"), copyOn("b"),
				drainMove("squat-1", "x", fleetv1alpha1.MovePending, false),
				drainMove("squat-2", "y", fleetv1alpha1.MovePending, false)},
			want: []string{MoveName(cluster, "a"), MoveName(cluster, "b"), "squat-1", "squat-2"},
		},
		"a forged move keeps no copy on the cluster": {
			limits: Limits{PerCluster: 5, PerNode: 5},
			objs:   []client.Object{draining(), copyOn("a"), drainMove("exempt-a", "a", fleetv1alpha1.MoveFailed, false)},
			want:   []string{MoveName(cluster, "a"), "exempt-a"},
		},
		"a move of an earlier life of the cluster counts for nothing": {
			limits: Limits{PerCluster: 5, PerNode: 5},
			objs: []client.Object{draining(), copyOn("a"), func() client.Object {
				m := drainMove("old-a", "a", fleetv1alpha1.MoveFailed, true)
				m.Annotations[AnnotationCluster] = "another-uid"
				return m
			}()},
			want: []string{MoveName(cluster, "a"), "old-a"},
		},
		"own moves take slots": {
			limits: Limits{PerCluster: 1, PerNode: 5},
			objs:   []client.Object{draining(), copyOn("a"), copyOn("b"), drainMove(MoveName(cluster, "a"), "a", fleetv1alpha1.MovePending, true)},
			want:   []string{MoveName(cluster, "a")},
		},
		"an own failed move keeps its copy on the cluster": {
			limits: Limits{PerCluster: 5, PerNode: 5},
			objs:   []client.Object{draining(), copyOn("a"), drainMove(MoveName(cluster, "a"), "a", fleetv1alpha1.MoveFailed, true)},
			want:   []string{MoveName(cluster, "a")},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := reconcileDrain(t, tc.limits, tc.objs...)
			if diff := cmp.Diff(tc.want, moveNames(t, c)); diff != "" {
				t.Errorf("moves (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestDrainMarksItsMoves: a move a drain makes carries the label and the
// cluster's UID, so the drain (and the TTL) know it again.
func TestDrainMarksItsMoves(t *testing.T) {
	c := reconcileDrain(t, DefaultLimits, draining(), copyOn("a"))
	m := &fleetv1alpha1.FleetVirtualMachineMove{}
	if err := c.Get(t.Context(), types.NamespacedName{Namespace: ns, Name: MoveName(cluster, "a")}, m); err != nil {
		t.Fatal(err)
	}
	if !Made(m, draining()) {
		t.Errorf("the drain's move has labels %v, annotations %v: want the drain label and the cluster's UID", m.Labels, m.Annotations)
	}
}

// TestDrainEndDeletesOnlyItsOwnMoves: undrained, the cluster's drain
// deletes its own moves not started, and leaves alone a move it did not
// make, whatever its label says.
func TestDrainEndDeletesOnlyItsOwnMoves(t *testing.T) {
	mc := draining()
	mc.Spec.Taints = nil
	c := reconcileDrain(t, DefaultLimits, mc,
		drainMove("own-pending", "a", fleetv1alpha1.MovePending, true),
		drainMove("own-running", "b", fleetv1alpha1.MovePreparing, true),
		drainMove("forged-pending", "c", fleetv1alpha1.MovePending, false))
	if diff := cmp.Diff([]string{"forged-pending", "own-running"}, moveNames(t, c)); diff != "" {
		t.Errorf("moves after the drain ended (-want,+got):\n%s", diff)
	}
}
