package delivery

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"strings"

	"github.com/fleetvm/fleetvm/pkg/argoapp"
)

// The annotations set on the hub's cached copy of an ApplicationSet only
// (TrimApplicationSet), never on the object in the API server: the digest
// of the spec the cache dropped, and the clusters its list generator
// named (Targets), comma-separated (a cluster's name holds no comma). The
// hub writes ApplicationSets with merge patches computed against the copy
// it read (write.Ensure, write.Mutate), which carry only what changed, and
// FullApplicationSet takes the annotations off before a comparison.
const (
	SpecDigestAnnotation    = "fleetvm.io/cached-spec-digest"
	CachedTargetsAnnotation = "fleetvm.io/cached-targets"
)

// TrimApplicationSet is the hub's cache transform for Argo CD
// ApplicationSets: it keeps the metadata and the ErrorOccurred condition
// of the status (SetAside), and replaces the spec with its digest
// (SpecDigestAnnotation) and the names its list generator delivers to
// (CachedTargetsAnnotation). The spec carries the VM definition in its
// Application template and Argo CD's structs for the generator, the sync
// policy and the differences ignored: more than half an ApplicationSet's
// size in memory, of which the hub reads only the targets. The status's
// resources list and its other conditions grow with the Applications and
// are never read. A hub of 10,000 FleetVirtualMachines holds 10,000
// ApplicationSets.
func TrimApplicationSet(obj any) (any, error) {
	appSet, ok := obj.(*argoapp.ApplicationSet)
	if !ok {
		return obj, nil
	}
	appSet.ManagedFields = nil
	var kept []argoapp.ApplicationSetCondition
	for _, c := range appSet.Status.Conditions {
		if c.Type == argoapp.ApplicationSetConditionErrorOccurred {
			kept = append(kept, argoapp.ApplicationSetCondition{Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message})
		}
	}
	appSet.Status = argoapp.ApplicationSetStatus{Conditions: kept}
	digest, err := SpecDigest(&appSet.Spec)
	if err != nil {
		// Not expected of a decoded object; keep the spec then.
		return appSet, nil //nolint:nilerr // the whole object is the safe fallback
	}
	targets := strings.Join(Targets(appSet), ",")
	appSet.Spec = argoapp.ApplicationSetSpec{}
	annotations := make(map[string]string, len(appSet.Annotations)+2)
	maps.Copy(annotations, appSet.Annotations)
	annotations[SpecDigestAnnotation] = digest
	annotations[CachedTargetsAnnotation] = targets
	appSet.Annotations = annotations
	return appSet, nil
}

// SpecDigest is the digest of an ApplicationSet's spec as the hub would
// render it or as the API server returned it: equal digests, equal specs.
// The renderer writes the JSON it embeds (list elements, Helm values) with
// sorted keys, as the API server stores it.
func SpecDigest(spec *argoapp.ApplicationSetSpec) (string, error) {
	data, err := json.Marshal(spec)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:16]), nil
}

// cachedTargets are the targets a trimmed cached copy keeps
// (CachedTargetsAnnotation); ok is false for a copy that was never
// trimmed.
func cachedTargets(appSet *argoapp.ApplicationSet) (targets []string, ok bool) {
	v, ok := appSet.Annotations[CachedTargetsAnnotation]
	if !ok || v == "" {
		return nil, ok
	}
	return strings.Split(v, ","), true
}

// FullApplicationSet gives the ApplicationSet as read (got, maybe a
// trimmed cached copy) with its spec, for a comparison with want. A copy
// that was never trimmed is returned as it is. A trimmed copy whose
// digest is want's holds want's spec: a copy of it with want's spec and
// without the cache's annotations is returned. Otherwise ok is false: the
// spec differs from want's (a change FleetVM makes, or someone's edit)
// and the caller reads the whole object from the API server to compare.
func FullApplicationSet(got *argoapp.ApplicationSet, want *argoapp.ApplicationSetSpec) (full *argoapp.ApplicationSet, ok bool) {
	digest, trimmed := got.Annotations[SpecDigestAnnotation]
	if !trimmed {
		return got, true
	}
	if d, err := SpecDigest(want); err != nil || d != digest {
		return nil, false
	}
	full = got.DeepCopy()
	full.Spec = *want.DeepCopy()
	delete(full.Annotations, SpecDigestAnnotation)
	delete(full.Annotations, CachedTargetsAnnotation)
	return full, true
}
