package delivery

import (
	"math/rand/v2"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/fleetvm/fleetvm/pkg/diskimage"
)

// TestNamesNeverCollide: no two FleetVirtualMachines share the name of
// their Placement and ApplicationSet, nor two FleetDiskImages the names of
// their objects on the clusters, even when the old "<namespace>-<name>"
// joined them (team-a/x and team/a-x), and every name is a valid label
// value (OCM labels PlacementDecisions with it) or DNS name.
func TestNamesNeverCollide(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	word := func(maxLen int) string {
		const letters = "abcdefghijklmnopqrstuvwxyz0123456789-"
		n := 1 + rng.IntN(maxLen)
		b := make([]byte, n)
		for i := range b {
			b[i] = letters[rng.IntN(len(letters))]
		}
		b[0], b[n-1] = 'a'+byte(rng.IntN(26)), 'a'+byte(rng.IntN(26))
		return string(b)
	}
	keys := []types.NamespacedName{{Namespace: "team-a", Name: "x"}, {Namespace: "team", Name: "a-x"}}
	for range 20000 {
		// Pairs the old naming joined: ns1-n1 == ns2-n2.
		p, q, r := word(20), word(20), word(40)
		keys = append(keys, types.NamespacedName{Namespace: p + "-" + q, Name: r}, types.NamespacedName{Namespace: p, Name: q + "-" + r})
		// And long ones that must be shortened.
		keys = append(keys, types.NamespacedName{Namespace: word(63), Name: word(63)})
	}
	for name, fn := range map[string]func(types.NamespacedName) string{
		"ChildName":            ChildName,
		"diskimage.ObjectName": diskimage.ObjectName,
		"diskimage.WorkName":   diskimage.WorkName,
	} {
		owners := map[string]types.NamespacedName{}
		for _, k := range keys {
			got := fn(k)
			if other, ok := owners[got]; ok && other != k {
				t.Fatalf("%s: %s and %s share %q", name, other, k, got)
			}
			owners[got] = k
			if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
				t.Fatalf("%s(%s) = %q: %s", name, k, got, strings.Join(errs, "; "))
			}
			if name != "diskimage.WorkName" {
				if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
					t.Fatalf("%s(%s) = %q is no label value: %s", name, k, got, strings.Join(errs, "; "))
				}
			}
		}
	}
}

func TestChildName(t *testing.T) {
	long := ChildName(keyOf("a-very-long-namespace-name-for-a-team", "and-an-even-longer-virtual-machine-name"))
	if len(long) > 63 {
		t.Errorf("ChildName = %q (%d chars), want at most 63", long, len(long))
	}
	other := ChildName(keyOf("a-very-long-namespace-name-for-a-team", "and-an-even-longer-virtual-machine-name2"))
	if long == other {
		t.Errorf("two FleetVMs share the child name %q", long)
	}
	if got := ChildName(keyOf("vms", "web")); got != "fvm-vms.web" {
		t.Errorf("ChildName(vms/web) = %q, want fvm-vms.web", got)
	}
}

func keyOf(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}
