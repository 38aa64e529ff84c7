package fleetvirtualmachine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// TestShapeLimit: with a limit of two shapes per namespace, the two oldest
// FleetVirtualMachines of team-a keep theirs, a later one of a third shape
// is held back (Ready and Placed False, ShapeLimitExceeded, the reason
// naming the namespace and the limit), one of a shape the namespace has is
// not, and another namespace counts its own. The answer stays right when a
// FleetVirtualMachine changes shape (a new generation), through the cache.
func TestShapeLimit(t *testing.T) {
	scheme := testScheme()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fvm := func(ns, name string, minute, cores int) *fleetv1alpha1.FleetVirtualMachine {
		return &fleetv1alpha1.FleetVirtualMachine{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Generation: 1, UID: types.UID(ns + "-" + name),
				CreationTimestamp: metav1.NewTime(base.Add(time.Duration(minute) * time.Minute))},
			Spec: fleetv1alpha1.FleetVirtualMachineSpec{
				Template: &runtime.RawExtension{Raw: fmt.Appendf(nil, `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine",`+
					`"spec":{"template":{"spec":{"domain":{"cpu":{"cores":%d},"memory":{"guest":"1Gi"},"devices":{}}}}}}`, cores)},
				Placement:   fleetv1alpha1.FleetPlacement{Environment: "prod"},
				RunStrategy: fleetv1alpha1.RunStrategyAlways,
			},
		}
	}
	objs := []*fleetv1alpha1.FleetVirtualMachine{
		fvm("team-a", "first", 1, 1), fvm("team-a", "second", 2, 2),
		fvm("team-a", "third", 3, 3), // a third shape: held back
		fvm("team-a", "like-first", 4, 1),
		fvm("team-b", "b1", 1, 4), fvm("team-b", "b2", 2, 5),
	}
	b := fake.NewClientBuilder().WithScheme(scheme)
	for _, o := range objs {
		b = b.WithObjects(o).WithStatusSubresource(o)
	}
	c := b.Build()
	r := &Reconciler{Client: c, Recorder: record.NewFakeRecorder(100), Clock: clocktesting.NewFakeClock(base.Add(time.Hour)), Config: DefaultConfig()}
	r.Config.ShapesPerNamespace = 2

	check := func(name string, want map[string]bool) {
		t.Helper()
		for key, wantOver := range want {
			ns, n, _ := strings.Cut(key, "/")
			got := &fleetv1alpha1.FleetVirtualMachine{}
			if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: n}, got); err != nil {
				t.Fatal(err)
			}
			over, err := r.reconcileShapeLimit(t.Context(), got)
			if err != nil {
				t.Fatalf("%s: %s: %v", name, key, err)
			}
			if over != wantOver {
				t.Errorf("%s: %s held back: %t, want %t", name, key, over, wantOver)
			}
			if !over {
				continue
			}
			if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: n}, got); err != nil {
				t.Fatal(err)
			}
			placed := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionPlaced)
			ready := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionReady)
			switch {
			case placed == nil || placed.Status != metav1.ConditionFalse || placed.Reason != fleetv1alpha1.ReasonShapeLimitExceeded:
				t.Errorf("%s: %s Placed = %+v, want False %s", name, key, placed, fleetv1alpha1.ReasonShapeLimitExceeded)
			case ready == nil || ready.Status != metav1.ConditionFalse:
				t.Errorf("%s: %s Ready = %+v, want False", name, key, ready)
			case !strings.Contains(placed.Message, "namespace team-a already asks for 2 distinct VM shapes"):
				t.Errorf("%s: %s: the message does not name the namespace and its limit: %q", name, key, placed.Message)
			}
		}
	}
	asCreated := map[string]bool{
		"team-a/first": false, "team-a/second": false, "team-a/third": true, "team-a/like-first": false,
		"team-b/b1": false, "team-b/b2": false,
	}
	check("as created", asCreated)

	// Once the informer's handler has recorded them all, the answers
	// come from the counted shapes, and are the same: team-b (two shapes)
	// reads nothing, team-a (three) still reads its namespace.
	for _, o := range objs {
		r.shapes.Observe(o)
	}
	r.shapesObserved = func() bool { return true }
	check("observed", asCreated)
	r.shapesObserved = nil

	// second takes first's shape: team-a has two shapes again, third's
	// among them, so third is no longer held back; its new generation is
	// not answered from the cache's old shape.
	second := &fleetv1alpha1.FleetVirtualMachine{}
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: "team-a", Name: "second"}, second); err != nil {
		t.Fatal(err)
	}
	second.Spec.Template.Raw = objs[0].Spec.Template.Raw
	second.Generation = 2
	if err := c.Update(t.Context(), second); err != nil {
		t.Fatal(err)
	}
	check("second reshaped like first", map[string]bool{"team-a/third": false, "team-a/second": false})
}
