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
// networks "-net" + 8 hex digits of their hash. Stable, short, and a valid
// CEL string.
func (s Shape) Name() string {
	mib := (s.Memory.Value() + (1<<20 - 1)) >> 20
	name := fmt.Sprintf("%s%dm-%dmi", fitPrefix, s.CPU.MilliValue(), mib)
	if len(s.Networks) > 0 {
		sum := sha256.Sum256([]byte(strings.Join(s.Networks, ",")))
		name += "-net" + hex.EncodeToString(sum[:4])
	}
	return name
}

// networkPrefix starts the score "how many nodes offer this network".
const networkPrefix = "net-"

// NetworkScoreName is the score of one network ("namespace/name"): "net-"
// + 8 hex digits of its hash. The agent publishes, for every network a
// shape needs, how many schedulable nodes offer it (0: no such
// NetworkAttachmentDefinition, or no node has its resource), so the hub
// can say which network keeps a VM off a cluster.
func NetworkScoreName(network string) string {
	sum := sha256.Sum256([]byte(network))
	return networkPrefix + hex.EncodeToString(sum[:4])
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
