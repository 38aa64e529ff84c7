package argoapp

import (
	"maps"
	"slices"
)

// Hold makes a the hub's cached copy of it: the spec dropped for its
// digest and the clusters its list generator names (as the caller
// computed them, specDigest not empty), the labels and annotations kept as
// pairs, without their maps. The spec carries the VM definition and Argo
// CD's structs for the generator, the sync policy and the differences
// ignored, of which the hub reads only the clusters; the two maps were
// some 670 bytes of a cached copy's 1.5 KiB. Read a held copy's labels
// and annotations with Label, Annotation, GetLabels and GetAnnotations,
// what it keeps of its spec with Held, and make it whole with Unhold.
func (a *ApplicationSet) Hold(specDigest, targets string) {
	a.held = heldSet{labels: pairsOf(a.Labels), annotations: pairsOf(a.Annotations), specDigest: specDigest, targets: targets}
	a.Labels, a.Annotations = nil, nil
	a.Spec = ApplicationSetSpec{}
}

// Held is what a held copy (Hold) keeps of its spec: its digest and the
// clusters its list generator names. ok is false for a copy that was
// never held.
func (a *ApplicationSet) Held() (specDigest, targets string, ok bool) {
	return a.held.specDigest, a.held.targets, a.held.specDigest != ""
}

// Unhold makes a held copy whole: a deep copy with its label and
// annotation maps and with spec, which the caller found to be the one
// whose digest the copy holds. A copy that was never held is deep-copied
// with spec.
func (a *ApplicationSet) Unhold(spec *ApplicationSetSpec) *ApplicationSet {
	out := a.DeepCopy()
	out.Labels, out.Annotations = out.GetLabels(), out.GetAnnotations()
	out.Spec = *spec.DeepCopy()
	out.held = heldSet{}
	return out
}

// ShareHeld passes a held copy's label keys and values and annotation
// keys through share (the hub's string table). Annotation values are one
// per object (a digest, a Placement's name): an annotation whose value is
// the ApplicationSet's own name (FleetVM's Placement is named after it)
// shares the name's string instead.
func (a *ApplicationSet) ShareHeld(share func(string) string) {
	a.held.labels.share(share, true)
	a.held.annotations.share(share, false)
	for i := 1; i < len(a.held.annotations); i += 2 {
		if a.held.annotations[i] == a.Name {
			a.held.annotations[i] = a.Name
		}
	}
}

// Label is the value of the ApplicationSet's label key, whether its
// labels are a map or held (Hold): "" when it has none.
func (a *ApplicationSet) Label(key string) string {
	if a.Labels != nil {
		return a.Labels[key]
	}
	v, _ := a.held.labels.get(key)
	return v
}

// Annotation is the value of the ApplicationSet's annotation key, whether
// its annotations are a map or held (Hold): "" when it has none.
func (a *ApplicationSet) Annotation(key string) string {
	if a.Annotations != nil {
		return a.Annotations[key]
	}
	v, _ := a.held.annotations.get(key)
	return v
}

// GetLabels gives the ApplicationSet's labels: its label map, or, of a
// held copy, a new map of the labels it holds. A change to the returned
// map of a held copy changes nothing until SetLabels.
func (a *ApplicationSet) GetLabels() map[string]string {
	if a.Labels != nil || a.held.labels == nil {
		return a.Labels
	}
	return a.held.labels.toMap()
}

// GetAnnotations is GetLabels for annotations.
func (a *ApplicationSet) GetAnnotations() map[string]string {
	if a.Annotations != nil || a.held.annotations == nil {
		return a.Annotations
	}
	return a.held.annotations.toMap()
}

// heldSet is what the hub's cached copy of an ApplicationSet keeps in
// place of its spec and of its label and annotation maps
// (ApplicationSet.Hold): the digest of the spec, the clusters its list
// generator names, and the labels and annotations as pairs. It is never
// written: it has no JSON name, and a merge patch computed from a cached
// copy carries no label or annotation unless the caller sets one.
type heldSet struct {
	labels, annotations pairs
	specDigest, targets string
}

// pairs are a label or annotation map as its keys and values in one
// array, k0, v0, k1, v1, ..., sorted by key. A map of three entries takes
// some 340 bytes, its pairs 96. Nothing changes pairs once the cache
// transform made and shared them (Hold, ShareHeld), so copies share them
// (heldSet.DeepCopyInto).
type pairs []string

func pairsOf(m map[string]string) pairs {
	if len(m) == 0 {
		return nil
	}
	out := make(pairs, 0, 2*len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k, m[k])
	}
	return out
}

// get is the value of key ("" when absent): a handful of pairs, read in
// turn.
func (p pairs) get(key string) (string, bool) {
	for i := 0; i < len(p); i += 2 {
		if p[i] == key {
			return p[i+1], true
		}
	}
	return "", false
}

// toMap is the map the pairs hold, new (nil when there are none).
func (p pairs) toMap() map[string]string {
	if len(p) == 0 {
		return nil
	}
	out := make(map[string]string, len(p)/2)
	for i := 0; i < len(p); i += 2 {
		out[p[i]] = p[i+1]
	}
	return out
}

// share passes the keys, and with values the values, through share.
func (p pairs) share(share func(string) string, values bool) {
	for i := range p {
		if i%2 == 0 || values {
			p[i] = share(p[i])
		}
	}
}

// DeepCopyInto copies what a held copy keeps: copies share the pairs.
func (in *heldSet) DeepCopyInto(out *heldSet) { *out = *in }
