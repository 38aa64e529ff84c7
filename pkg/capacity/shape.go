// Package capacity holds what the hub and the agent must agree on about VM
// shapes and the fleetvm-capacity AddOnPlacementScore.
package capacity

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Score names in the fleetvm-capacity AddOnPlacementScore.
const (
	// ScoreCPUFree is the free CPU summed over schedulable nodes, mapped
	// linearly from 0 (-100) to ReferenceCPU or more (100).
	ScoreCPUFree = "cpuFree"
	// ScoreMemoryFree is the free memory likewise, up to ReferenceMemory.
	ScoreMemoryFree = "memoryFree"
	// fitPrefix starts the score "how many VMs of this shape fit".
	fitPrefix = "fit-"
	// MaxScore is OCM's cap on score values.
	MaxScore = 100
)

// Reference amounts for the normalized free-capacity scores.
var (
	ReferenceCPU    = resource.MustParse("128")
	ReferenceMemory = resource.MustParse("512Gi")
)

// Normalize maps free (0..reference) linearly onto -100..100, clamped.
func Normalize(free, reference resource.Quantity) int32 {
	if reference.Sign() <= 0 {
		return -MaxScore
	}
	f := float64(free.MilliValue()) / float64(reference.MilliValue())
	f = min(max(f, 0), 1)
	return int32(f*2*MaxScore) - MaxScore
}

// Shape is what one VM asks a node for: CPU, memory and the Multus
// networks it attaches to.
type Shape struct {
	CPU    resource.Quantity `json:"cpu"`
	Memory resource.Quantity `json:"memory"`
	// Networks are the NetworkAttachmentDefinitions, "namespace/name",
	// sorted and without duplicates (see Networks).
	Networks []string `json:"networks,omitempty"`
}

// Name is the shape's score name: "fit-" + CPU in millicores + "m-" +
// memory in MiB (rounded up) + "mi", e.g. "fit-4000m-16384mi", and with
// networks "-net" + the 64 hex digits of the SHA-256 of their JSON list
// (sorted, as Networks returns them), so that no team
// can find a network list whose shape takes another team's name (a
// score name has no length limit; this one stays under 120 characters).
// Stable and a valid CEL string. The hub and the agent compute it each
// from the shape: both run the same version (the addon deploys the hub's
// agent image); an agent of a version that used 8 hex digits publishes
// names no new Placement asks for, so VMs with networks wait for it to
// be upgraded (a VM that runs stays: fit never removes one).
func (s Shape) Name() string {
	name := fmt.Sprintf("%s%dm-%dmi", fitPrefix, s.CPU.MilliValue(), mebibytes(s.Memory))
	if len(s.Networks) > 0 {
		// JSON, not the names joined by a separator: a name holding the
		// separator would make two lists hash alike.
		b, err := json.Marshal(s.Networks)
		if err != nil {
			panic(fmt.Sprintf("marshal a list of strings: %v", err)) // cannot fail
		}
		sum := sha256.Sum256(b)
		name += "-net" + hex.EncodeToString(sum[:])
	}
	return name
}

// mebibytes is q in MiB, rounded up.
func mebibytes(q resource.Quantity) int64 { return (q.Value() + (1<<20 - 1)) >> 20 }

// Canonical is the shape as its name states it: CPU in whole millicores
// and memory in whole MiB, both rounded up as Name rounds them, and the
// networks sorted without duplicates. Two shapes with the same name have
// the same canonical form (unless SHA-256 collides); the agent fits the
// canonical shape, which asks for no less than any VM of that name.
func (s Shape) Canonical() Shape {
	nets := slices.Clone(s.Networks)
	slices.Sort(nets)
	return Shape{
		CPU:      *resource.NewMilliQuantity(s.CPU.MilliValue(), resource.DecimalSI),
		Memory:   *resource.NewQuantity(mebibytes(s.Memory)<<20, resource.BinarySI),
		Networks: slices.Compact(nets),
	}
}

// MaxShapeNetworks bounds the networks of one shape (a VM's Multus
// networks with its required networks): every agent reads every shape.
// spec.placement.requiredNetworks allows as many.
const MaxShapeNetworks = 16

// networkPrefix starts the score "how many nodes offer this network".
const networkPrefix = "net-"

// NetworkScoreName is the score of one network ("namespace/name"): "net-"
// + the 64 hex digits of its SHA-256. The agent publishes, for every
// network a shape needs, how many schedulable nodes offer it (0: no such
// NetworkAttachmentDefinition, or no node has its resource), so the hub
// can say which network keeps a VM off a cluster.
func NetworkScoreName(network string) string {
	sum := sha256.Sum256([]byte(network))
	return networkPrefix + hex.EncodeToString(sum[:])
}

// Networks qualifies the networks a VM in namespace attaches to ("name"
// means namespace/name) and returns them sorted, without duplicates.
func Networks(namespace string, names ...string) []string {
	var out []string
	for _, n := range names {
		if n == "" {
			continue
		}
		if !strings.Contains(n, "/") {
			n = namespace + "/" + n
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// IsFitScore tells whether a score name is a shape's fit count.
func IsFitScore(name string) bool { return strings.HasPrefix(name, fitPrefix) }

// EncodeShapes renders shapes for the fleetvm-shapes ConfigMap: each in
// its canonical form, sorted by name, without duplicates, so equal sets
// encode equally. Two different shapes with one name are an error, never
// a silent replacement of one by the other: the agent would answer for
// one shape under a name the other's Placements ask for.
func EncodeShapes(shapes []Shape) (string, error) {
	return encodeShapes(shapes, Shape.Name)
}

// encodeShapes is EncodeShapes with the naming given (tests use a weak one).
func encodeShapes(shapes []Shape, nameOf func(Shape) string) (string, error) {
	byName := map[string]Shape{}
	for _, s := range shapes {
		s = s.Canonical()
		name := nameOf(s)
		if have, ok := byName[name]; ok && !sameShape(have, s) {
			return "", fmt.Errorf("encode VM shapes: two different shapes are named %s (networks %v and %v)", name, have.Networks, s.Networks)
		}
		byName[name] = s
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	out := make([]Shape, 0, len(names))
	for _, n := range names {
		out = append(out, byName[n])
	}
	b, err := json.Marshal(out)
	return string(b), err
}

// sameShape compares canonical shapes.
func sameShape(a, b Shape) bool {
	return a.CPU.Cmp(b.CPU) == 0 && a.Memory.Cmp(b.Memory) == 0 && slices.Equal(a.Networks, b.Networks)
}

// DecodeShapes parses the fleetvm-shapes ConfigMap value.
func DecodeShapes(data string) ([]Shape, error) {
	if strings.TrimSpace(data) == "" {
		return nil, nil
	}
	var shapes []Shape
	if err := json.Unmarshal([]byte(data), &shapes); err != nil {
		return nil, fmt.Errorf("decode VM shapes: %w", err)
	}
	return shapes, nil
}
