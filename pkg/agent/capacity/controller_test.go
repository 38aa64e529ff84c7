package capacity

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/capacity"
)

// TestReconcileWritesOnlyWhenNeeded drives the reconciler with a fake
// clock: the first pass publishes, passes at rest do not write until
// validUntil is less than half the validity away, and a change in capacity
// or in the shapes is written at once.
func TestReconcileWritesOnlyWhenNeeded(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := clusterv1alpha1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	n := node("a", "16", "64Gi")
	spoke := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&n).Build()
	shapes, err := capacity.EncodeShapes([]capacity.Shape{shape("4", "8Gi")})
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "east", Name: fleetv1alpha1.ShapesConfigMapName},
		Data:       map[string]string{fleetv1alpha1.ShapesConfigMapKey: shapes},
	}
	writes := 0
	hub := fake.NewClientBuilder().WithScheme(scheme).WithObjects(cm).
		WithStatusSubresource(&clusterv1alpha1.AddOnPlacementScore{}).
		WithInterceptorFuncs(interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				writes++
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		}).Build()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	r := &Reconciler{Spoke: spoke, Hub: hub, Namespace: "east", Clock: clk}

	reconcileAndGet := func() *clusterv1alpha1.AddOnPlacementScore {
		t.Helper()
		res, err := r.Reconcile(ctx, reconcile.Request{})
		if err != nil {
			t.Fatal(err)
		}
		if res.RequeueAfter != DefaultResync {
			t.Errorf("RequeueAfter = %v, want %v", res.RequeueAfter, DefaultResync)
		}
		var s clusterv1alpha1.AddOnPlacementScore
		if err := hub.Get(ctx, client.ObjectKey{Namespace: "east", Name: fleetv1alpha1.CapacityScoreName}, &s); err != nil {
			t.Fatal(err)
		}
		return &s
	}

	s := reconcileAndGet()
	if diff := cmp.Diff(items("cpuFree", -75, "fit-4000m-8192mi", 4, "memoryFree", -75), s.Status.Scores); diff != "" {
		t.Errorf("scores (-want,+got):\n%s", diff)
	}
	if got, want := s.Status.ValidUntil.Time, start.Add(DefaultValidity); !got.Equal(want) {
		t.Errorf("validUntil = %v, want %v", got, want)
	}
	if c := s.Status.Conditions; len(c) != 1 || c[0].Type != ConditionScoresValid || c[0].Status != metav1.ConditionTrue {
		t.Errorf("conditions = %+v, want ScoresValid=True", c)
	}
	if writes != 1 {
		t.Fatalf("writes after first pass = %d, want 1", writes)
	}

	// At rest: passes within half the validity write nothing.
	for _, step := range []time.Duration{DefaultResync - time.Second, DefaultValidity/2 - DefaultResync} {
		clk.Step(step)
		reconcileAndGet()
	}
	if writes != 1 {
		t.Errorf("writes at rest = %d, want 1", writes)
	}
	// validUntil is now less than half the validity away: renewed.
	clk.Step(2 * time.Second)
	s = reconcileAndGet()
	if writes != 2 || !s.Status.ValidUntil.Time.Equal(clk.Now().Add(DefaultValidity)) {
		t.Errorf("after half the validity: writes = %d, validUntil = %v, want 2 and %v", writes, s.Status.ValidUntil, clk.Now().Add(DefaultValidity))
	}

	// A pod takes capacity: written at once.
	p := pod("a", "8", "8Gi", corev1.PodRunning)
	p.Name, p.Namespace = "vm", "default"
	if err := spoke.Create(ctx, &p); err != nil {
		t.Fatal(err)
	}
	s = reconcileAndGet()
	if diff := cmp.Diff(items("cpuFree", -88, "fit-4000m-8192mi", 2, "memoryFree", -79), s.Status.Scores); diff != "" || writes != 3 {
		t.Errorf("after a pod: writes = %d, scores (-want,+got):\n%s", writes, diff)
	}

	// Broken shapes: free capacity still published, condition False.
	cm.Data[fleetv1alpha1.ShapesConfigMapKey] = "{not json"
	if err := hub.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	s = reconcileAndGet()
	if diff := cmp.Diff(items("cpuFree", -88, "memoryFree", -79), s.Status.Scores); diff != "" {
		t.Errorf("broken shapes: scores (-want,+got):\n%s", diff)
	}
	if c := s.Status.Conditions; len(c) != 1 || c[0].Status != metav1.ConditionFalse || c[0].Reason != ReasonShapesInvalid {
		t.Errorf("broken shapes: conditions = %+v, want ScoresValid=False ShapesInvalid", c)
	}
}
