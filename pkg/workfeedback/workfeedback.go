// Package workfeedback reads what an OCM work agent reports back of a
// ManifestWork: the status feedback of one of its manifests (the values
// the work's JSONPaths feedback rules ask for) and whether the agent could
// apply the work at all. The hub reads the clusters' objects this way,
// without reaching the clusters: a move's export and migrations, a disk
// image's DataVolume. One reader, so they all read feedback alike
// (OCM addon-framework's ProbeField helpers, for our works).
package workfeedback

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	workv1 "open-cluster-management.io/api/work/v1"
)

// Feedback is what the work agent reported of one manifest of a work.
type Feedback struct {
	// Values are the manifest's string feedback values by rule name.
	// Values of other types are left out: FleetVM asks only for strings.
	Values map[string]string
	// NotApplied: the work's Applied condition is False, the work agent
	// could not apply the work; NotAppliedMessage is the condition's
	// message, why.
	NotApplied        bool
	NotAppliedMessage string
}

// Read reads the feedback of the manifest of resource (plural, e.g.
// "virtualmachineexports") in work. FleetVM's works carry one object of
// each resource they ask feedback of, so the resource names the manifest.
// A nil work (not made yet) has reported nothing.
func Read(work *workv1.ManifestWork, resource string) Feedback {
	fb := Feedback{Values: map[string]string{}}
	if work == nil {
		return fb
	}
	if c := meta.FindStatusCondition(work.Status.Conditions, workv1.WorkApplied); c != nil && c.Status == metav1.ConditionFalse {
		fb.NotApplied, fb.NotAppliedMessage = true, c.Message
	}
	for _, mf := range work.Status.ResourceStatus.Manifests {
		if mf.ResourceMeta.Resource != resource {
			continue
		}
		for _, v := range mf.StatusFeedbacks.Values {
			if v.Value.String != nil {
				fb.Values[v.Name] = *v.Value.String
			}
		}
	}
	return fb
}
