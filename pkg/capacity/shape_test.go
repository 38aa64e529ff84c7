package capacity

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
)

func shape(cpu, mem string) Shape {
	return Shape{CPU: resource.MustParse(cpu), Memory: resource.MustParse(mem)}
}

// TestShapeName: the name is the contract between the hub's Placement
// (it asks for the score by name) and the agent (it publishes it): the
// same shape written differently has one name, memory rounds up to MiB.
func TestShapeName(t *testing.T) {
	for name, tc := range map[string]struct {
		shape Shape
		want  string
	}{
		"whole cores":             {shape("4", "16Gi"), "fit-4000m-16384mi"},
		"millicores, same shape":  {shape("4000m", "16384Mi"), "fit-4000m-16384mi"},
		"fraction of a core":      {shape("500m", "1Gi"), "fit-500m-1024mi"},
		"memory rounds up to MiB": {shape("1", "1000000000"), "fit-1000m-954mi"},
		"one byte over a MiB":     {shape("1", "1048577"), "fit-1000m-2mi"},
		"with networks": {Shape{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi"),
			Networks: []string{"default/vlan2003"}}, "fit-1000m-1024mi-netc68ac40b492f7b5bde7f80719792ded495d9cdbf051070284ead020445a8fb55"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := tc.shape.Name(); got != tc.want {
				t.Errorf("Name() = %q, want %q", got, tc.want)
			}
			if !IsFitScore(tc.shape.Name()) {
				t.Errorf("IsFitScore(%q) = false", tc.shape.Name())
			}
		})
	}
	for _, s := range []string{ScoreCPUFree, ScoreMemoryFree} {
		if IsFitScore(s) {
			t.Errorf("IsFitScore(%q) = true", s)
		}
	}
}

// TestNormalize: 0 free is -100, the reference or more is 100, linear and
// clamped in between; a zero reference never divides.
func TestNormalize(t *testing.T) {
	ref := resource.MustParse("100")
	for name, tc := range map[string]struct {
		free, ref resource.Quantity
		want      int32
	}{
		"nothing free":      {resource.MustParse("0"), ref, -100},
		"negative free":     {resource.MustParse("-5"), ref, -100},
		"half":              {resource.MustParse("50"), ref, 0},
		"a quarter":         {resource.MustParse("25"), ref, -50},
		"all":               {ref, ref, 100},
		"more than the ref": {resource.MustParse("1000"), ref, 100},
		"zero reference":    {resource.MustParse("1"), resource.MustParse("0"), -100},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Normalize(tc.free, tc.ref); got != tc.want {
				t.Errorf("Normalize(%s, %s) = %d, want %d", tc.free.String(), tc.ref.String(), got, tc.want)
			}
		})
	}
}

// TestEncodeShapes: equal sets encode equally whatever their order or
// duplicates (the hub writes the ConfigMap only when the text changes),
// and what the hub encodes the agent decodes to the same names.
func TestEncodeShapes(t *testing.T) {
	a, err := EncodeShapes([]Shape{shape("4", "16Gi"), shape("1", "1Gi"), shape("4000m", "16384Mi")})
	if err != nil {
		t.Fatal(err)
	}
	b, err := EncodeShapes([]Shape{shape("1", "1Gi"), shape("4", "16Gi")})
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Errorf("equal sets encode differently:\n%s\n%s", a, b)
	}
	got, err := DecodeShapes(a)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range got {
		names = append(names, s.Name())
	}
	if diff := cmp.Diff([]string{"fit-1000m-1024mi", "fit-4000m-16384mi"}, names); diff != "" {
		t.Errorf("decoded shapes (-want,+got):\n%s", diff)
	}
	empty, err := EncodeShapes(nil)
	if err != nil || empty != "[]" {
		t.Errorf("EncodeShapes(nil) = %q, %v; want []", empty, err)
	}
}

func TestDecodeShapes(t *testing.T) {
	for _, in := range []string{"", "  \n", "[]"} {
		if got, err := DecodeShapes(in); err != nil || len(got) != 0 {
			t.Errorf("DecodeShapes(%q) = %v, %v; want none", in, got, err)
		}
	}
	for _, in := range []string{"{", `[{"cpu":"four"}]`, `{"cpu":"1"}`} {
		if _, err := DecodeShapes(in); err == nil || !strings.Contains(err.Error(), "decode VM shapes") {
			t.Errorf("DecodeShapes(%q) = %v, want a decode error", in, err)
		}
	}
}

// TestNetworks: a network without a namespace is the VM's namespace's;
// order and duplicates do not change the shape, so the hub and the agent
// name it alike.
func TestNetworks(t *testing.T) {
	got := Networks("team-a", "vlan2003", "default/vlan2003", "", "team-a/vlan2003", "default/vlan2004")
	if diff := cmp.Diff([]string{"default/vlan2003", "default/vlan2004", "team-a/vlan2003"}, got); diff != "" {
		t.Errorf("Networks (-want,+got):\n%s", diff)
	}
	a := Shape{CPU: resource.MustParse("1"), Networks: Networks("x", "b", "a")}
	b := Shape{CPU: resource.MustParse("1"), Networks: Networks("x", "a", "b", "a")}
	if a.Name() != b.Name() {
		t.Errorf("same networks, different names: %s, %s", a.Name(), b.Name())
	}
	c := Shape{CPU: resource.MustParse("1"), Networks: Networks("x", "a")}
	if a.Name() == c.Name() || c.Name() == (Shape{CPU: resource.MustParse("1")}).Name() {
		t.Errorf("different networks share a name: %s", c.Name())
	}
}

// TestShapeNameUnambiguous: the networks' hash is full-length and over an
// unambiguous encoding: a network name holding a comma does not take the
// name of a list of two.
func TestShapeNameUnambiguous(t *testing.T) {
	two := Shape{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi"), Networks: []string{"a/x", "b/y"}}
	one := Shape{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi"), Networks: []string{"a/x,b/y"}}
	if two.Name() == one.Name() {
		t.Errorf("%v and %v share the name %s", two.Networks, one.Networks, one.Name())
	}
	hash := strings.TrimPrefix(two.Name(), "fit-1000m-1024mi-net")
	if len(hash) != 64 {
		t.Errorf("network hash %q has %d hex digits, want 64", hash, len(hash))
	}
	if got := NetworkScoreName("default/vlan2003"); len(got) != len("net-")+64 {
		t.Errorf("NetworkScoreName = %q, want net- and 64 hex digits", got)
	}
}

// TestEncodeShapesCanonical: shapes that differ below what the name
// states (memory within one MiB, CPU within a millicore) are one shape,
// encoded as the name states it (rounded up), whichever comes last.
func TestEncodeShapesCanonical(t *testing.T) {
	for _, order := range [][]Shape{
		{shape("1", "1G"), shape("1000m", "954Mi"), shape("0.9995", "999999999")},
		{shape("0.9995", "999999999"), shape("1000m", "954Mi"), shape("1", "1G")},
	} {
		got, err := EncodeShapes(order)
		if err != nil {
			t.Fatal(err)
		}
		if want := `[{"cpu":"1","memory":"954Mi"}]`; got != want {
			t.Errorf("EncodeShapes = %s, want %s", got, want)
		}
	}
}

// TestEncodeShapesConflict: two different shapes with one name are an
// error, not one silently replacing the other. SHA-256 leaves no such
// pair to find, so a naming that ignores the networks stands in for one.
func TestEncodeShapesConflict(t *testing.T) {
	a := Shape{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi"), Networks: []string{"team-a/vlan"}}
	b := Shape{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi"), Networks: []string{"team-b/vlan"}}
	weak := func(s Shape) string { return Shape{CPU: s.CPU, Memory: s.Memory}.Name() }
	if got, err := encodeShapes([]Shape{a, b}, weak); err == nil || !strings.Contains(err.Error(), "two different shapes") {
		t.Errorf("encodeShapes of a name conflict = %s, %v; want an error", got, err)
	}
	if _, err := encodeShapes([]Shape{a, a}, weak); err != nil {
		t.Errorf("the same shape twice: %v", err)
	}
	if _, err := EncodeShapes([]Shape{a, b}); err != nil {
		t.Errorf("EncodeShapes of two shapes: %v", err)
	}
}

// maxShape is the largest shape a FleetVirtualMachine can make: the
// largest CPU and memory a Quantity holds and MaxShapeNetworks networks of
// the longest name requiredNetworks allows (a 63-character namespace and a
// 253-character name), distinct by i.
func maxShape(i int) Shape {
	var nets []string
	for n := range MaxShapeNetworks {
		nets = append(nets, fmt.Sprintf("%s/%s-%03d-%02d", strings.Repeat("n", 63), strings.Repeat("x", 253-7), i, n))
	}
	return Shape{
		CPU:      *resource.NewMilliQuantity(math.MaxInt64, resource.DecimalSI),
		Memory:   *resource.NewQuantity(math.MaxInt64-(1<<20), resource.BinarySI),
		Networks: Networks("", nets...),
	}
}

// TestShapesSizeBound measures what one namespace can add to the shapes
// ConfigMap: DefaultShapesPerNamespace shapes as large as they come. The
// README states these figures.
func TestShapesSizeBound(t *testing.T) {
	var worst, typical []Shape
	for i := range DefaultShapesPerNamespace {
		worst = append(worst, maxShape(i))
		typical = append(typical, Shape{CPU: *resource.NewQuantity(int64(i%16+1), resource.DecimalSI),
			Memory: *resource.NewQuantity(int64(i+1)<<30, resource.BinarySI), Networks: []string{"default/vlan2003", "default/vlan2004"}})
	}
	w, err := EncodeShapes(worst)
	if err != nil {
		t.Fatal(err)
	}
	typ, err := EncodeShapes(typical)
	if err != nil {
		t.Fatal(err)
	}
	const maxPerNamespace = 260 << 10 // the README's figure
	if len(w) > maxPerNamespace {
		t.Errorf("%d shapes of one namespace encode to %d bytes, more than the %d stated", DefaultShapesPerNamespace, len(w), maxPerNamespace)
	}
	t.Logf("one namespace adds at most %d bytes (%d shapes of %d networks with the longest names); %d bytes with two short networks each",
		len(w), DefaultShapesPerNamespace, MaxShapeNetworks, len(typ))
	for _, s := range worst {
		if len(s.Name()) > 120 {
			t.Errorf("shape name %s is %d characters", s.Name(), len(s.Name()))
		}
	}
}
