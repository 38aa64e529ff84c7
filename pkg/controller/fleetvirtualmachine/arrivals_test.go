package fleetvirtualmachine

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/placement"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

// TestReconcilesSideBySideTakeTheLastRoomOnce: two FleetVirtualMachines
// of one shape pick from a candidate decision that holds one cluster,
// whose score says one more fits. The second one's reconcile runs whole
// while the first one's is between its pick and its status write, as two
// workers do. The first one takes the room as it picks it, so the second
// one waits; checking the room at the pick and counting the copy only at
// the status write placed both there (the VM-safety suite's burst: a
// 16th copy Unschedulable on a cluster with room for 15).
func TestReconcilesSideBySideTakeTheLastRoomOnce(t *testing.T) {
	ctx := t.Context()
	const ns, cluster = "burst", "prod-a"
	now := time.Now()
	r := &Reconciler{Recorder: record.NewFakeRecorder(100), Clock: clocktesting.NewFakeClock(now), Config: DefaultConfig(),
		load: placement.NewClusterLoad(), arriving: placement.NewArriving()}
	newFVM := func(name string) *fleetv1alpha1.FleetVirtualMachine {
		fvm := utiltesting.MakeFleetVM(ns, name).Env("prod").Clusters(1).VM(1, "1536Mi").Obj()
		fvm.Generation = 1
		fvm.Finalizers = []string{fleetv1alpha1.FleetVirtualMachineFinalizer}
		return fvm
	}
	first, second := newFVM("vm-00"), newFVM("vm-01")
	shape := mustShape(t, first)
	set := placement.ClusterSets(first.Spec)[0]
	candidates := r.candidatePlacement(first, []string{set})
	candidates.Generation = 1
	candidates.Status.Conditions = []metav1.Condition{{Type: clusterv1beta1.PlacementConditionSatisfied, Status: metav1.ConditionTrue,
		Reason: "AllDecisionsScheduled", ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(now)}}
	decision := &clusterv1beta1.PlacementDecision{
		ObjectMeta: metav1.ObjectMeta{Namespace: candidates.Namespace, Name: candidates.Name + "-decision-1",
			Labels: map[string]string{clusterv1beta1.PlacementLabel: candidates.Name}},
		Status: clusterv1beta1.PlacementDecisionStatus{Decisions: []clusterv1beta1.ClusterDecision{{ClusterName: cluster}}},
	}
	validUntil := metav1.NewTime(now.Add(time.Hour))
	score := &clusterv1alpha1.AddOnPlacementScore{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: fleetv1alpha1.CapacityScoreName},
		Status: clusterv1alpha1.AddOnPlacementScoreStatus{ValidUntil: &validUntil,
			Scores: []clusterv1alpha1.AddOnPlacementScoreItem{{Name: shape.Name(), Value: 1}}}, // room for one
	}
	mc := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: cluster,
		Labels: map[string]string{r.Config.EnvironmentLabel: "prod", clusterv1beta2.ClusterSetLabel: set}}}
	mc.Status.Conditions = []metav1.Condition{{Type: clusterv1.ManagedClusterConditionAvailable, Status: metav1.ConditionTrue,
		Reason: "Available", LastTransitionTime: metav1.NewTime(now)}}
	b := fake.NewClientBuilder().WithScheme(testScheme()).
		WithObjects(first, second, candidates, decision, score, mc,
			&clusterv1beta2.ManagedClusterSet{ObjectMeta: metav1.ObjectMeta{Name: set}},
			&clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: set}, Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: set}}).
		WithStatusSubresource(first, second, candidates, decision, score, mc)
	if err := SetupIndexes(ctx, utiltesting.Indexer{Builder: b}); err != nil {
		t.Fatal(err)
	}
	sideBySide := false
	reconcile := func(fvm *fleetv1alpha1.FleetVirtualMachine) {
		t.Helper()
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(fvm)}); err != nil {
			t.Logf("reconcile %s: %v", fvm.Name, err) // what it placed is what counts
		}
	}
	statusWrite := func(ctx context.Context, c client.Client, sub string, obj client.Object, write func() error) error {
		if fvm, ok := obj.(*fleetv1alpha1.FleetVirtualMachine); ok && fvm.Name == first.Name && !sideBySide {
			sideBySide = true
			reconcile(second) // the other worker, whole, before this write
		}
		return write()
	}
	r.Client = b.WithInterceptorFuncs(interceptor.Funcs{
		// GitOpsCluster is written unstructured and not in the fake
		// client's scheme: it exists.
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if obj.GetObjectKind().GroupVersionKind().Kind == gitOpsClusterGVK.Kind {
				return nil
			}
			return c.Get(ctx, key, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			return statusWrite(ctx, c, sub, obj, func() error { return c.SubResource(sub).Update(ctx, obj, opts...) })
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			return statusWrite(ctx, c, sub, obj, func() error { return c.SubResource(sub).Patch(ctx, obj, patch, opts...) })
		},
	}).Build()

	reconcile(first)
	if !sideBySide {
		t.Fatal("the first reconcile wrote no status")
	}
	var on []string
	for _, fvm := range []*fleetv1alpha1.FleetVirtualMachine{first, second} {
		got := &fleetv1alpha1.FleetVirtualMachine{}
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(fvm), got); err != nil {
			t.Fatal(err)
		}
		for _, c := range got.Status.Clusters {
			on = append(on, got.Name+" on "+c.Cluster)
		}
		if fvm == second && len(got.Status.Clusters) == 0 {
			if c := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionPlaced); c != nil {
				t.Logf("%s waits: %s %s", got.Name, c.Reason, c.Message)
			}
		}
	}
	if len(on) != 1 || on[0] != first.Name+" on "+cluster {
		t.Errorf("placed: %v; want only %s on %s, which has room for one", on, first.Name, cluster)
	}
}
