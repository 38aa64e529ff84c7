package fleetvirtualmachine

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestReadDecisions: a candidate Placement's decided clusters come
// sorted, from every decision of its name and none of another's; read
// again with the decisions unchanged they are the same slice, and a
// decision changed, added or deleted is read anew.
func TestReadDecisions(t *testing.T) {
	s := runtime.NewScheme()
	utilruntime.Must(clusterv1beta1.Install(s))
	const ns = "argocd"
	decision := func(name, placement string, clusters ...string) *clusterv1beta1.PlacementDecision {
		d := &clusterv1beta1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name),
			Labels: map[string]string{clusterv1beta1.PlacementLabel: placement}}}
		for _, c := range clusters {
			d.Status.Decisions = append(d.Status.Decisions, clusterv1beta1.ClusterDecision{ClusterName: c})
		}
		return d
	}
	c := fake.NewClientBuilder().WithScheme(s).
		WithIndex(&clusterv1beta1.PlacementDecision{}, IndexPlacement, func(o client.Object) []string {
			return []string{o.GetLabels()[clusterv1beta1.PlacementLabel]}
		}).
		WithObjects(decision("p-1", "p", "c", "a"), decision("p-2", "p", "b", "a"), decision("q-1", "q", "z")).
		WithStatusSubresource(&clusterv1beta1.PlacementDecision{}).Build()
	r := &Reconciler{Client: c}
	p := &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}}
	read := func(what string, want ...string) []string {
		t.Helper()
		got, err := r.readDecisions(t.Context(), p)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: clusters (-want,+got):\n%s", what, diff)
		}
		return got
	}
	first := read("first", "a", "b", "c")
	if again := read("again", "a", "b", "c"); &again[0] != &first[0] {
		t.Error("decisions unchanged: read anew, want the same slice")
	}

	var d clusterv1beta1.PlacementDecision
	if err := c.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "p-2"}, &d); err != nil {
		t.Fatal(err)
	}
	d.Status.Decisions = append(d.Status.Decisions, clusterv1beta1.ClusterDecision{ClusterName: "d"})
	if err := c.Status().Update(t.Context(), &d); err != nil {
		t.Fatal(err)
	}
	read("a decision changed", "a", "b", "c", "d")
	if err := c.Create(t.Context(), decision("p-3", "p", "e")); err != nil {
		t.Fatal(err)
	}
	read("a decision added", "a", "b", "c", "d", "e")
	if err := c.Delete(t.Context(), decision("p-1", "p")); err != nil {
		t.Fatal(err)
	}
	read("a decision deleted", "a", "b", "d", "e")
}
