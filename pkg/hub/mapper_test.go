package hub

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// countingMapper counts the mappings it is asked for.
type countingMapper struct {
	meta.RESTMapper
	asked int
}

func (c *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	c.asked++
	return c.RESTMapper.RESTMapping(gk, versions...)
}

// TestKeptMappings: a mapping found once is answered without the mapper
// below, as it was found, per kind and versions; what the mapper does not
// find is asked again.
func TestKeptMappings(t *testing.T) {
	gv := schema.GroupVersion{Group: "fleetvm.io", Version: "v1alpha1"}
	base := meta.NewDefaultRESTMapper([]schema.GroupVersion{gv})
	base.Add(gv.WithKind("FleetVirtualMachine"), meta.RESTScopeNamespace)
	below := &countingMapper{RESTMapper: base}
	m := &keptMappings{RESTMapper: below}
	gk := schema.GroupKind{Group: "fleetvm.io", Kind: "FleetVirtualMachine"}

	want, err := base.RESTMapping(gk, "v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		got, err := m.RESTMapping(gk, "v1alpha1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Resource != want.Resource || got.GroupVersionKind != want.GroupVersionKind || got.Scope.Name() != want.Scope.Name() {
			t.Fatalf("mapping %+v, want %+v", got, want)
		}
		got.Resource.Resource = "changed by a caller"
	}
	if below.asked != 1 {
		t.Errorf("the mapper below was asked %d times for one kind and version, want 1", below.asked)
	}
	if _, err := m.RESTMapping(gk); err != nil {
		t.Fatal(err)
	}
	if below.asked != 2 {
		t.Errorf("the mapper below was asked %d times after another set of versions, want 2", below.asked)
	}

	missing := schema.GroupKind{Group: "fleetvm.io", Kind: "Rollout"}
	for range 2 {
		if _, err := m.RESTMapping(missing, "v1alpha1"); !meta.IsNoMatchError(err) {
			t.Fatalf("mapping of a kind not served: %v, want no match", err)
		}
	}
	if below.asked != 4 {
		t.Errorf("the mapper below was asked %d times, want a kind not found asked each time (4)", below.asked)
	}
}
