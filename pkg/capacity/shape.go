// Package capacity holds what the hub and the agent must agree on about VM
// shapes and the fleetvm-capacity AddOnPlacementScore.
package capacity

import (
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

// Shape is the CPU and memory one VM asks a node for.
type Shape struct {
	CPU    resource.Quantity `json:"cpu"`
	Memory resource.Quantity `json:"memory"`
}

// Name is the shape's score name: "fit-" + CPU in millicores + "m-" +
// memory in MiB (rounded up) + "mi", e.g. "fit-4000m-16384mi". Stable,
// short, and a valid CEL string.
func (s Shape) Name() string {
	mib := (s.Memory.Value() + (1<<20 - 1)) >> 20
	return fmt.Sprintf("%s%dm-%dmi", fitPrefix, s.CPU.MilliValue(), mib)
}

// IsFitScore tells whether a score name is a shape's fit count.
func IsFitScore(name string) bool { return strings.HasPrefix(name, fitPrefix) }

// EncodeShapes renders shapes for the fleetvm-shapes ConfigMap: sorted by
// name, without duplicates, so equal sets encode equally.
func EncodeShapes(shapes []Shape) (string, error) {
	byName := map[string]Shape{}
	for _, s := range shapes {
		byName[s.Name()] = s
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
