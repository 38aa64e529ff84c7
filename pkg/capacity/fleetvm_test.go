package capacity

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// TestValidScoreValues: a score whose validUntil has come counts as no
// score, at the exact instant too; one second before, and a score without
// validUntil, count as published.
func TestValidScoreValues(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	score := func(validUntil *time.Time) *clusterv1alpha1.AddOnPlacementScore {
		s := &clusterv1alpha1.AddOnPlacementScore{Status: clusterv1alpha1.AddOnPlacementScoreStatus{
			Scores: []clusterv1alpha1.AddOnPlacementScoreItem{{Name: "fit-1000m-1024mi", Value: 3}, {Name: ScoreCPUFree, Value: 7}},
		}}
		if validUntil != nil {
			s.Status.ValidUntil = &metav1.Time{Time: *validUntil}
		}
		return s
	}
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	values := map[string]int32{"fit-1000m-1024mi": 3, ScoreCPUFree: 7}
	for name, tc := range map[string]struct {
		score       *clusterv1alpha1.AddOnPlacementScore
		want        map[string]int32
		wantExpired bool
	}{
		"no score":                     {score: nil, want: nil},
		"no validUntil: never expires": {score: score(nil), want: values},
		"valid for one more second":    {score: score(at(time.Second)), want: values},
		"validUntil is now: expired":   {score: score(at(0)), wantExpired: true},
		"expired an hour ago":          {score: score(at(-time.Hour)), wantExpired: true},
		"valid for another hour":       {score: score(at(time.Hour)), want: values},
		"expired one nanosecond ago":   {score: score(at(-time.Nanosecond)), wantExpired: true},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ValidScoreValues(tc.score, now)); diff != "" {
				t.Errorf("ValidScoreValues (-want,+got):\n%s", diff)
			}
			if got := Expired(tc.score, now); got != tc.wantExpired {
				t.Errorf("Expired = %v, want %v", got, tc.wantExpired)
			}
			// ScoreValues, what OCM's scores() sees, ignores validUntil.
			if tc.score != nil {
				if diff := cmp.Diff(values, ScoreValues(tc.score)); diff != "" {
					t.Errorf("ScoreValues (-want,+got):\n%s", diff)
				}
			}
		})
	}
}

// fleetVM is a FleetVirtualMachine ns/name created at minute created,
// with an inline VM of that many CPUs and 1Gi.
func fleetVM(ns, name string, created, cpus int) fleetv1alpha1.FleetVirtualMachine {
	raw := fmt.Sprintf(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","spec":{"template":{"spec":{"domain":{"cpu":{"cores":%d},"memory":{"guest":"1Gi"},"devices":{}}}}}}`, cpus)
	return fleetv1alpha1.FleetVirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			CreationTimestamp: metav1.NewTime(time.Date(2026, 1, 1, 0, created, 0, 0, time.UTC))},
		Spec: fleetv1alpha1.FleetVirtualMachineSpec{Template: &runtime.RawExtension{Raw: []byte(raw)}},
	}
}

// TestShapesPerNamespace: a namespace adds at most limit distinct shapes;
// its oldest FleetVirtualMachines keep theirs, a later one of a shape the
// namespace already has is not held back, and another namespace's count
// is its own. The answer for one namespace does not depend on the others.
func TestShapesPerNamespace(t *testing.T) {
	fvms := []fleetv1alpha1.FleetVirtualMachine{
		fleetVM("team-a", "newest", 9, 4), // a third shape, the newest: over
		fleetVM("team-a", "first", 1, 1),
		fleetVM("team-a", "second", 2, 2),
		fleetVM("team-a", "same-as-first", 8, 1), // a shape team-a has
		fleetVM("team-a", "also-9", 9, 3),        // created with "newest", sorts before it by name: over too
		fleetVM("team-b", "b1", 1, 4),
		fleetVM("team-b", "b2", 1, 5),
		{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "git"}, // no shape: not counted
			Spec: fleetv1alpha1.FleetVirtualMachineSpec{Source: &fleetv1alpha1.GitSource{RepoURL: "https://git.example/x.git", Path: "x"}}},
	}
	got := Shapes(fvms, 2)
	var over []string
	for k, reason := range got.Over {
		over = append(over, k.String())
		if !strings.Contains(reason, "namespace team-a already asks for 2 distinct VM shapes") {
			t.Errorf("%s: reason %q does not say the namespace's limit", k, reason)
		}
	}
	slices.Sort(over)
	if diff := cmp.Diff([]string{"team-a/also-9", "team-a/newest"}, over); diff != "" {
		t.Errorf("held back (-want,+got):\n%s", diff)
	}
	var names []string
	for _, s := range got.Shapes {
		names = append(names, s.Name())
	}
	slices.Sort(names)
	names = slices.Compact(names)
	if diff := cmp.Diff([]string{"fit-1000m-1024mi", "fit-2000m-1024mi", "fit-4000m-1024mi", "fit-5000m-1024mi"}, names); diff != "" {
		t.Errorf("shapes (-want,+got):\n%s", diff)
	}
	alone := Shapes(fvms[:5], 2)
	if len(alone.Over) != 2 || alone.Over[types.NamespacedName{Namespace: "team-a", Name: "newest"}] == "" {
		t.Errorf("team-a alone: held back %v", alone.Over)
	}
	if def := Shapes(fvms, 0); len(def.Over) != 0 {
		t.Errorf("with the default limit (%d) held back %v", DefaultShapesPerNamespace, def.Over)
	}
}

// TestShapeCache: the cache answers as ShapeOf does, and asks again for a
// new generation, a new object under the same name, a deletion, and after
// Forget; a namespace's answer through it is Shapes' answer.
func TestShapeCache(t *testing.T) {
	var c ShapeCache
	fvm := fleetVM("team-a", "web", 1, 2)
	fvm.UID, fvm.Generation = "u1", 1
	check := func(what string, f fleetv1alpha1.FleetVirtualMachine) {
		t.Helper()
		want, wantOK := ShapeOf(&f)
		got, ok := c.Of(&f)
		if ok != wantOK || got.Name() != want.Name() {
			t.Errorf("%s: cache says %s (%t), ShapeOf %s (%t)", what, got.Name(), ok, want.Name(), wantOK)
		}
	}
	check("first", fvm)
	check("again", fvm)

	// A new generation with another CPU count: a new shape, not the cached one.
	next := fleetVM("team-a", "web", 1, 6)
	next.UID, next.Generation = "u1", 2
	check("new generation", next)
	// The same name, recreated: another object.
	other := fleetVM("team-a", "web", 1, 3)
	other.UID, other.Generation = "u2", 1
	check("recreated", other)
	// Being deleted: no shape.
	deleting := other
	now := metav1.Now()
	deleting.DeletionTimestamp = &now
	check("deleting", deleting)
	if _, ok := c.Of(&deleting); ok {
		t.Error("a FleetVirtualMachine being deleted has a shape")
	}
	c.Forget(types.NamespacedName{Namespace: "team-a", Name: "web"})
	if len(c.entries) != 0 {
		t.Errorf("Forget left %d entries", len(c.entries))
	}

	fvms := []fleetv1alpha1.FleetVirtualMachine{fleetVM("team-a", "a", 1, 1), fleetVM("team-a", "b", 2, 2), fleetVM("team-a", "c", 3, 3)}
	if diff := cmp.Diff(Shapes(fvms, 2), ShapesOf(fvms, 2, c.Of)); diff != "" {
		t.Errorf("through the cache (-Shapes,+ShapesOf):\n%s", diff)
	}
}

// TestShapeCacheDistinct: the cache counts the distinct shapes of each
// namespace as its entries come, change and go.
func TestShapeCacheDistinct(t *testing.T) {
	var c ShapeCache
	seen := func(ns, name string, uid types.UID, gen int64, cpu int) fleetv1alpha1.FleetVirtualMachine {
		f := fleetVM(ns, name, 1, cpu)
		f.UID, f.Generation = uid, gen
		c.Of(&f)
		return f
	}
	expect := func(what string, want map[string]int) {
		t.Helper()
		for ns, n := range want {
			if got := c.Distinct(ns); got != n {
				t.Errorf("%s: %s has %d distinct shapes, want %d", what, ns, got, n)
			}
		}
	}
	seen("team-a", "a", "ua", 1, 2)
	seen("team-a", "b", "ub", 1, 2)
	seen("team-b", "x", "ux", 1, 2)
	expect("two of one shape", map[string]int{"team-a": 1, "team-b": 1})
	b := seen("team-a", "b", "ub", 2, 4)
	expect("b changed shape", map[string]int{"team-a": 2, "team-b": 1})
	seen("team-a", "a", "ua", 1, 2) // again: nothing counted twice
	expect("a seen again", map[string]int{"team-a": 2})
	now := metav1.Now()
	b.DeletionTimestamp = &now
	c.Of(&b)
	expect("b being deleted", map[string]int{"team-a": 1})
	c.Forget(types.NamespacedName{Namespace: "team-a", Name: "a"})
	c.Forget(types.NamespacedName{Namespace: "team-a", Name: "b"})
	expect("all gone", map[string]int{"team-a": 0, "team-b": 1})
	if len(c.names) != 1 {
		t.Errorf("counts of %d namespaces kept, want 1", len(c.names))
	}
	seen("team-a", "c", "uc", 1, 8)
	c.Retain(map[types.NamespacedName]bool{{Namespace: "team-a", Name: "c"}: true})
	expect("only c retained", map[string]int{"team-a": 1, "team-b": 0})
	if len(c.entries) != 1 {
		t.Errorf("Retain kept %d entries, want 1", len(c.entries))
	}
}

// TestShapeCacheFleet: the shapes of the namespaces within their limit,
// read from the cache's counts, are Shapes' answer for them; a namespace
// over its limit is named instead; Lookup answers as Of does and
// remembers nothing.
func TestShapeCacheFleet(t *testing.T) {
	var c ShapeCache
	within := []fleetv1alpha1.FleetVirtualMachine{
		fleetVM("team-b", "b1", 1, 4), fleetVM("team-b", "b2", 1, 5), fleetVM("team-b", "b3", 2, 4),
		fleetVM("team-c", "c1", 1, 4),
	}
	over := []fleetv1alpha1.FleetVirtualMachine{fleetVM("team-a", "a1", 1, 1), fleetVM("team-a", "a2", 2, 2), fleetVM("team-a", "a3", 3, 3)}
	for i := range within {
		c.Observe(&within[i])
	}
	for i := range over {
		c.Observe(&over[i])
	}
	names := func(shapes []Shape) []string {
		var out []string
		for _, s := range shapes {
			out = append(out, s.Name())
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	shapes, overNS := c.Fleet(2)
	if diff := cmp.Diff(names(Shapes(within, 2).Shapes), names(shapes)); diff != "" {
		t.Errorf("shapes within the limit (-Shapes,+Fleet):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"team-a"}, overNS); diff != "" {
		t.Errorf("namespaces over the limit (-want,+got):\n%s", diff)
	}
	if shapes, overNS := c.Fleet(0); len(overNS) != 0 || len(names(shapes)) != 5 {
		t.Errorf("with the default limit: %d distinct shapes, over %v; want 5 and none", len(names(shapes)), overNS)
	}

	c.Forget(types.NamespacedName{Namespace: "team-a", Name: "a3"})
	if _, overNS := c.Fleet(2); len(overNS) != 0 {
		t.Errorf("team-a down to 2 shapes still over: %v", overNS)
	}
	got, ok := c.Lookup(&over[2])
	if want, _ := ShapeOf(&over[2]); !ok || got.Name() != want.Name() {
		t.Errorf("Lookup of a forgotten FleetVirtualMachine says %s (%t), ShapeOf %s", got.Name(), ok, want.Name())
	}
	if _, overNS := c.Fleet(2); len(overNS) != 0 || c.Distinct("team-a") != 2 {
		t.Errorf("Lookup put a forgotten FleetVirtualMachine back: team-a has %d shapes", c.Distinct("team-a"))
	}
}

// TestShapeCacheSharesShapes: FleetVirtualMachines of a namespace with
// one shape hold it once; another namespace's of that shape hold their
// own; a FleetVirtualMachine that changes shape lets go of the shared
// one, which the others keep.
func TestShapeCacheSharesShapes(t *testing.T) {
	var c ShapeCache
	fvms := []fleetv1alpha1.FleetVirtualMachine{
		fleetVM("team-a", "a1", 1, 2), fleetVM("team-a", "a2", 2, 2), fleetVM("team-a", "a3", 3, 2),
		fleetVM("team-b", "b1", 1, 2),
	}
	for i := range fvms {
		fvms[i].UID = types.UID(fvms[i].Name)
		c.Observe(&fvms[i])
	}
	held := func(ns, name string) *namedShape {
		return c.entries[types.NamespacedName{Namespace: ns, Name: name}].shape
	}
	shared := held("team-a", "a1")
	if shared == nil || held("team-a", "a2") != shared || held("team-a", "a3") != shared {
		t.Fatalf("team-a's three FleetVMs of one shape hold %p, %p, %p: want one", shared, held("team-a", "a2"), held("team-a", "a3"))
	}
	if held("team-b", "b1") == shared {
		t.Errorf("team-b's FleetVM holds team-a's shape: the counts are per namespace")
	}
	fvms[0].Generation = 2
	fvms[0].Spec = fleetVM("team-a", "a1", 1, 4).Spec
	c.Observe(&fvms[0])
	if held("team-a", "a1") == shared || held("team-a", "a1").shape.Name() != "fit-4000m-1024mi" {
		t.Errorf("a1 with 4 CPUs holds %+v", held("team-a", "a1"))
	}
	if held("team-a", "a2") != shared || c.names["team-a"][shared.name].n != 2 {
		t.Errorf("after a1 changed shape: a2 holds %p (want %p), %d hold %s", held("team-a", "a2"), shared, c.names["team-a"][shared.name].n, shared.name)
	}
	if got, ok := c.Of(&fvms[1]); !ok || got.Name() != shared.name {
		t.Errorf("a2's shape %s (%t), want %s", got.Name(), ok, shared.name)
	}
}
