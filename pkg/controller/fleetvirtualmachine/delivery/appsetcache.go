package delivery

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetvm/fleetvm/pkg/argoapp"
)

// TrimApplicationSet is the hub's cache transform for Argo CD
// ApplicationSets: it keeps the metadata and the ErrorOccurred condition
// of the status (SetAside), and holds the spec as its digest and the
// names its list generator delivers to, the labels and annotations as
// pairs (argoapp.ApplicationSet.Hold). The spec carries the VM definition
// in its Application template and Argo CD's structs for the generator,
// the sync policy and the differences ignored: more than half an
// ApplicationSet's size in memory, of which the hub reads only the
// targets. The status's resources list and its other conditions grow
// with the Applications and are never read. A hub of 10,000
// FleetVirtualMachines holds 10,000 ApplicationSets. The hub writes
// ApplicationSets with merge patches computed against the copy it read
// (write.Ensure, write.Mutate), which carry only what changed, and
// compares what it renders with a copy made whole (FullApplicationSet).
// A copy trimmed already is left as it is.
func TrimApplicationSet(obj any) (any, error) {
	appSet, ok := obj.(*argoapp.ApplicationSet)
	if !ok {
		return obj, nil
	}
	if _, _, held := appSet.Held(); held {
		// Trimmed already: as listed item by item (hub.itemwiseLists),
		// then again as the informer stores it.
		return appSet, nil
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
	appSet.Hold(digest, strings.Join(Targets(appSet), ","))
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

// cachedTargets are the targets a held cached copy keeps
// (argoapp.ApplicationSet.Hold); ok is false for a copy that was never
// held.
func cachedTargets(appSet *argoapp.ApplicationSet) (targets []string, ok bool) {
	_, v, ok := appSet.Held()
	if !ok || v == "" {
		return nil, ok
	}
	return strings.Split(v, ","), true
}

// HoldsRendered reports whether got, the hub's held cached copy of an
// ApplicationSet, already holds want, as FleetVM renders it: its spec's
// digest is want's, and it has every label, annotation, finalizer and
// owner reference of want's (as rendered, without the hash annotation
// write.Ensure adds). write.Ensure would write nothing then (it replaces
// the spec and only adds metadata), but for that annotation where another
// version of FleetVM wrote it: the next change it writes brings it up to
// date. Ensure compares the two converted to unstructured objects, with
// the spec made whole (FullApplicationSet): 8 % of what a hub restarting
// with 5,000 FleetVirtualMachines spent until steady. A copy that was
// never held, or that holds less, is for Ensure to compare.
func HoldsRendered(got, want *argoapp.ApplicationSet) bool {
	digest, _, held := got.Held()
	if !held {
		return false
	}
	if d, err := SpecDigest(&want.Spec); err != nil || d != digest {
		return false
	}
	if !holdsAll(got.GetLabels(), want.Labels) {
		return false
	}
	if !holdsAll(got.GetAnnotations(), want.Annotations) {
		return false
	}
	for _, f := range want.Finalizers {
		if !slices.Contains(got.Finalizers, f) {
			return false
		}
	}
	for _, ref := range want.OwnerReferences {
		if !slices.ContainsFunc(got.OwnerReferences, func(r metav1.OwnerReference) bool { return reflect.DeepEqual(r, ref) }) {
			return false
		}
	}
	return true
}

// holdsAll reports whether have has every key of want, with want's value.
func holdsAll(have, want map[string]string) bool {
	for k, v := range want {
		if h, ok := have[k]; !ok || h != v {
			return false
		}
	}
	return true
}

// FullApplicationSet gives the ApplicationSet as read (got, maybe a held
// cached copy) with its spec, for a comparison with want. A copy that was
// never held is returned as it is. A held copy whose digest is want's
// holds want's spec: a copy of it made whole with want's spec is returned
// (argoapp.ApplicationSet.Unhold). Otherwise ok is false: the spec
// differs from want's (a change FleetVM makes, or someone's edit) and the
// caller reads the whole object from the API server to compare.
func FullApplicationSet(got *argoapp.ApplicationSet, want *argoapp.ApplicationSetSpec) (full *argoapp.ApplicationSet, ok bool) {
	digest, _, held := got.Held()
	if !held {
		return got, true
	}
	if d, err := SpecDigest(want); err != nil || d != digest {
		return nil, false
	}
	return got.Unhold(want), true
}
