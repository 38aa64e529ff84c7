package delivery

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
)

// TemplateDigestAnnotation is set on the hub's cached copy of an
// ApplicationSet only (TrimApplicationSet), never on the object in the API
// server: the digest of the Application template the cache dropped. The
// hub writes ApplicationSets with merge patches computed against the copy
// it read (write.Ensure, write.Mutate), which carry only what changed, and
// FullApplicationSet takes the annotation off before a comparison.
const TemplateDigestAnnotation = "fleetvm.io/cached-template-digest"

// TrimApplicationSet is the hub's cache transform for Argo CD
// ApplicationSets: it keeps the metadata, the list generator (Targets),
// the sync policies and the ErrorOccurred condition of the status
// (SetAside), and replaces the Application template, which carries the VM
// definition and is more than half an ApplicationSet's size in memory,
// with its digest (TemplateDigestAnnotation). The status's resources list
// and its other conditions grow with the Applications and are never read.
// A hub of 10,000 FleetVirtualMachines holds 10,000 ApplicationSets.
func TrimApplicationSet(obj any) (any, error) {
	appSet, ok := obj.(*argov1alpha1.ApplicationSet)
	if !ok {
		return obj, nil
	}
	appSet.ManagedFields = nil
	var kept []argov1alpha1.ApplicationSetCondition
	for _, c := range appSet.Status.Conditions {
		if c.Type == argov1alpha1.ApplicationSetConditionErrorOccurred {
			kept = append(kept, argov1alpha1.ApplicationSetCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
		}
	}
	appSet.Status = argov1alpha1.ApplicationSetStatus{Conditions: kept}
	digest, err := TemplateDigest(&appSet.Spec.Template)
	if err != nil {
		// Not expected of a decoded object; keep the template then.
		return appSet, nil //nolint:nilerr // the whole object is the safe fallback
	}
	appSet.Spec.Template = argov1alpha1.ApplicationSetTemplate{}
	annotations := maps.Clone(appSet.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[TemplateDigestAnnotation] = digest
	appSet.Annotations = annotations
	return appSet, nil
}

// TemplateDigest is the digest of an Application template as the hub
// would render it or as the API server returned it: equal digests, equal
// templates.
func TemplateDigest(t *argov1alpha1.ApplicationSetTemplate) (string, error) {
	data, err := json.Marshal(t)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:16]), nil
}

// FullApplicationSet gives the ApplicationSet as read (got, maybe a
// trimmed cached copy) with its Application template, for a comparison
// with want. A copy that was never trimmed is returned as it is. A
// trimmed copy whose digest is want's holds want's template: a copy of
// it with want's template and without the cache's annotation is
// returned. Otherwise ok is false: the template differs from want's (a
// change FleetVM makes, or someone's edit) and the caller reads the
// whole object from the API server to compare.
func FullApplicationSet(got *argov1alpha1.ApplicationSet, want *argov1alpha1.ApplicationSetTemplate) (full *argov1alpha1.ApplicationSet, ok bool) {
	digest, trimmed := got.Annotations[TemplateDigestAnnotation]
	if !trimmed {
		return got, true
	}
	if d, err := TemplateDigest(want); err != nil || d != digest {
		return nil, false
	}
	full = got.DeepCopy()
	full.Spec.Template = *want.DeepCopy()
	delete(full.Annotations, TemplateDigestAnnotation)
	return full, true
}
