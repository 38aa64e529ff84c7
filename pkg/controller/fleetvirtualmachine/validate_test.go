package fleetvirtualmachine

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// TestValidated: a generation that passed is remembered for that object
// only: a new generation, or an object of the same name created again, is
// validated again.
func TestValidated(t *testing.T) {
	fvm := func(uid types.UID, generation int64) *fleetv1alpha1.FleetVirtualMachine {
		return &fleetv1alpha1.FleetVirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", UID: uid, Generation: generation}}
	}
	var v validated
	if v.has(fvm("u1", 1)) {
		t.Fatal("nothing added, yet has")
	}
	v.add(fvm("u1", 1))
	for _, c := range []struct {
		name string
		fvm  *fleetv1alpha1.FleetVirtualMachine
		want bool
	}{
		{"the generation added", fvm("u1", 1), true},
		{"a new generation", fvm("u1", 2), false},
		{"created again under the name", fvm("u2", 1), false},
	} {
		if got := v.has(c.fvm); got != c.want {
			t.Errorf("%s: has = %v, want %v", c.name, got, c.want)
		}
	}
	v.forget(types.NamespacedName{Namespace: "team-a", Name: "web"})
	if v.has(fvm("u1", 1)) {
		t.Error("forgotten, yet has")
	}
}
