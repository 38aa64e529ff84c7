package status

import (
	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/explain"
)

// ExclusionNames is how many clusters the status names per reason.
const ExclusionNames = 3

// ExclusionCounts turns counts into the status' form, leaving out the
// clusters the VM is placed on.
func ExclusionCounts(counts []explain.Count) []fleetv1alpha1.ExclusionCount {
	var out []fleetv1alpha1.ExclusionCount
	for _, c := range counts {
		if c.Reason == explain.Chosen || c.Reason == explain.Runs {
			continue
		}
		out = append(out, fleetv1alpha1.ExclusionCount{
			Reason: string(c.Reason), Count: int32(c.Count), Clusters: c.Clusters[:min(len(c.Clusters), ExclusionNames)],
			// A selector or a VM's network list can be long.
			Detail: Truncate(c.Detail, maxExclusionDetail),
		})
	}
	return out
}

// exclusionMessage renders the exclusions in one line: "1 MissingNetwork
// (prod-b: network default/vlan2003 is on no node ...); 2 Environment
// (dev-a, dev-b)"; "" when there are none.
func exclusionMessage(excluded []fleetv1alpha1.ExclusionCount) string {
	counts := make([]explain.Count, 0, len(excluded))
	for _, e := range excluded {
		counts = append(counts, explain.Count{Reason: explain.Reason(e.Reason), Count: int(e.Count), Clusters: e.Clusters, Detail: e.Detail})
	}
	if len(counts) == 0 {
		return ""
	}
	return explain.Message(counts)
}
