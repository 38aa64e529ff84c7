// Package write is the one way FleetVM writes to the API server. Every
// controller, hub and agent, goes through it:
//
//   - Ensure: an object FleetVM generates (Placement, ApplicationSet,
//     AppProject, ManifestWork, ConfigMap, report, score). Created when
//     missing; otherwise FleetVM's labels, annotations, finalizers and owner
//     references are added and everything else it generates (spec, data) is
//     replaced, with one JSON merge patch.
//   - CreateOnly: an object FleetVM creates but never updates, because
//     someone else may own it once it exists (ManagedClusterSetBinding,
//     GitOpsCluster).
//   - Mutate: a targeted change to an object someone else also writes
//     (finalizers, owner references, one annotation).
//   - Status: a status FleetVM computes whole, written with Update.
//
// A Memo in front of Ensure skips the comparison for an object still at
// the resourceVersion where it last held the same ask: a hub that
// reconciles thousands of objects with nothing to change compares each
// once.
//
// Each of them writes nothing when the object already holds what is asked:
// a controller at rest issues no request. A write that could overwrite
// someone's change (a status, a finalizer or owner-reference list, which
// JSON merge patches replace whole) carries the resourceVersion it was
// computed from, so from a stale read it is refused with 409 Conflict;
// Stale recognises that refusal, and Requeue turns it, in every controller
// alike, into "decide again from the newer object" rather than an error.
//
// Why JSON merge patches and not server-side apply: an apply is an upsert,
// so it cannot refuse to take over an object of the same name that someone
// else created (FleetVM's rule is that such an object is never silently
// overwritten; a Create fails with AlreadyExists instead), and a no-op apply
// is still a request, so the comparison below would be needed anyway to keep
// a controller at rest silent.
package write

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// HashAnnotation holds a hash of what FleetVM last wrote into an object
// through Ensure. It lets Ensure see that FleetVM stopped generating a
// field (the hash changes) even though the object still holds everything
// FleetVM now asks for.
const HashAnnotation = "fleetvm.io/generated-hash"

// Outcome says what Ensure did.
type Outcome string

const (
	// Unchanged: the object already held what was asked; no request.
	Unchanged Outcome = "Unchanged"
	// Created: there was no object; want was created and now holds the
	// API server's copy.
	Created Outcome = "Created"
	// Updated: got was patched and now holds the API server's copy.
	Updated Outcome = "Updated"
)

// Ensure makes the object named by want hold want. got is the object as
// read (nil, or a nil pointer, when there is none); it must already have
// passed the caller's owner check. Labels, annotations, finalizers and
// owner references of want are added to got's, which are otherwise kept;
// every other top-level field except status (spec, data, ...) is replaced
// by want's. Nothing is written when got holds every field of want
// (defaults the API server added don't count) and was last written from
// the same want.
func Ensure(ctx context.Context, c client.Client, want, got client.Object) (Outcome, error) {
	wantU, err := runtime.DefaultUnstructuredConverter.ToUnstructured(want)
	if err != nil {
		return Unchanged, fmt.Errorf("convert %T: %w", want, err)
	}
	in := intentOf(wantU)
	hash := hashOf(in)
	if isNil(got) {
		want.SetAnnotations(with(want.GetAnnotations(), HashAnnotation, hash))
		if err := c.Create(ctx, want); err != nil {
			return Unchanged, err
		}
		return Created, nil
	}
	gotU, err := runtime.DefaultUnstructuredConverter.ToUnstructured(got)
	if err != nil {
		return Unchanged, fmt.Errorf("convert %T: %w", got, err)
	}
	if got.GetAnnotations()[HashAnnotation] == hash && holds(gotU, in) {
		return Unchanged, nil
	}
	desired := runtime.DeepCopyJSON(gotU)
	for k := range desired {
		if !reserved(k) {
			delete(desired, k)
		}
	}
	for k, v := range wantU {
		if !reserved(k) {
			desired[k] = v
		}
	}
	d := &unstructured.Unstructured{Object: desired}
	d.SetLabels(mergeMaps(got.GetLabels(), want.GetLabels()))
	d.SetAnnotations(with(mergeMaps(got.GetAnnotations(), want.GetAnnotations()), HashAnnotation, hash))
	finalizers := got.GetFinalizers()
	for _, f := range want.GetFinalizers() {
		if !slices.Contains(finalizers, f) {
			finalizers = append(finalizers, f)
		}
	}
	d.SetFinalizers(finalizers)
	refs := got.GetOwnerReferences()
	for _, r := range want.GetOwnerReferences() {
		if !slices.ContainsFunc(refs, func(o metav1.OwnerReference) bool { return o.UID == r.UID }) {
			refs = append(refs, r)
		}
	}
	d.SetOwnerReferences(refs)
	if _, err := patch(ctx, c, got, &unstructured.Unstructured{Object: gotU}, d, false); err != nil {
		return Unchanged, err
	}
	return Updated, nil
}

// patch writes into obj, as a JSON merge patch, what changed from before
// to after (obj's own content is neither). With lock, or when the patch
// changes finalizers or owner references (a merge patch replaces a list
// whole), it carries before's resourceVersion: a change someone made since
// is never lost, the write is refused with 409 Conflict instead. What
// Ensure generates is FleetVM's own, and map keys are patched one by one,
// so those patches carry no resourceVersion and do not fail merely
// because someone else wrote the object's status in between.
func patch(ctx context.Context, c client.Client, obj client.Object, before, after client.Object, lock bool) (bool, error) {
	data, err := client.MergeFrom(before).Data(after)
	if err != nil {
		return false, err
	}
	var p struct {
		Metadata map[string]json.RawMessage `json:"metadata"`
	}
	if err := json.Unmarshal(data, &p); err != nil {
		return false, err
	}
	if string(data) == "{}" {
		return false, nil
	}
	_, finalizers := p.Metadata["finalizers"]
	_, owners := p.Metadata["ownerReferences"]
	if lock || finalizers || owners {
		if data, err = client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}).Data(after); err != nil {
			return false, err
		}
	}
	if err := c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, data)); err != nil {
		return false, err
	}
	return true, nil
}

// CreateOnly creates obj unless an object of that name exists, in which
// case that object is left alone, whoever made it. It reports whether obj
// was created.
func CreateOnly(ctx context.Context, c client.Client, obj client.Object) (bool, error) {
	err := c.Create(ctx, obj)
	if apierrors.IsAlreadyExists(err) {
		return false, nil
	}
	return err == nil, err
}

// Mutate applies change to obj, an object as read, and writes the
// difference as a merge patch that carries obj's resourceVersion: someone
// else writes this object too, and a change they made since obj was read
// is never overwritten. Nothing is written when change changed nothing. It reports whether obj was
// written; after a write obj holds the API server's copy.
func Mutate(ctx context.Context, c client.Client, obj client.Object, change func()) (bool, error) {
	before, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return false, fmt.Errorf("%T is not a client.Object", obj)
	}
	change()
	return patch(ctx, c, obj, before, obj, true)
}

// AddFinalizer adds finalizer to obj with Mutate; an object that has it
// is not even copied (every reconcile asks).
func AddFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizer string) (bool, error) {
	if controllerutil.ContainsFinalizer(obj, finalizer) {
		return false, nil
	}
	return Mutate(ctx, c, obj, func() { controllerutil.AddFinalizer(obj, finalizer) })
}

// RemoveFinalizer removes finalizer from obj with Mutate; likewise
// nothing is copied when obj has none.
func RemoveFinalizer(ctx context.Context, c client.Client, obj client.Object, finalizer string) (bool, error) {
	if !controllerutil.ContainsFinalizer(obj, finalizer) {
		return false, nil
	}
	return Mutate(ctx, c, obj, func() { controllerutil.RemoveFinalizer(obj, finalizer) })
}

// RemoveFinalizerTested removes finalizer from obj with a JSON patch that
// first tests that the object is the one read (its UID) and that its
// finalizers are still those read, instead of naming the resourceVersion
// read: for an object the caller has just deleted, whose deletion moved its
// resourceVersion on to one the caller does not know. A finalizer another
// controller added or removed since is never lost: the test fails and the
// write is refused as a Conflict, as a locked write would be.
func RemoveFinalizerTested(ctx context.Context, c client.Client, obj client.Object, finalizer string) (bool, error) {
	if !controllerutil.ContainsFinalizer(obj, finalizer) {
		return false, nil
	}
	had := obj.GetFinalizers()
	keep := slices.DeleteFunc(slices.Clone(had), func(f string) bool { return f == finalizer })
	data, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": obj.GetUID()},
		{"op": "test", "path": "/metadata/finalizers", "value": had},
		{"op": "replace", "path": "/metadata/finalizers", "value": keep},
	})
	if err != nil {
		return false, err
	}
	if err := c.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, data)); err != nil {
		if apierrors.IsInvalid(err) {
			// A failed test (422): the object changed since it was read.
			return false, apierrors.NewConflict(schema.GroupResource{}, obj.GetName(), err)
		}
		return false, err
	}
	return true, nil
}

// Status writes obj's status when it differs from before's (obj as it was
// read). The write is an Update of the status subresource: the whole
// status, as computed, with the resourceVersion it was computed from. It
// reports whether obj was written.
func Status(ctx context.Context, c client.Client, before, obj client.Object) (bool, error) {
	if sa, sb, ok := typedStatuses(before, obj); ok && reflect.DeepEqual(sa, sb) {
		// Equal as Go values, so equal as JSON: the conversions below
		// are what a reconcile that changes nothing spent most of its
		// status check on (two per FleetVirtualMachine as a hub restarts).
		return false, nil
	}
	a, err := statusOf(before)
	if err != nil {
		return false, err
	}
	b, err := statusOf(obj)
	if err != nil {
		return false, err
	}
	if reflect.DeepEqual(a, b) {
		return false, nil
	}
	if err := c.Status().Update(ctx, obj); err != nil {
		return false, err
	}
	return true, nil
}

// typedStatuses are the Status fields of a and b when both are pointers to
// structs of one type with a Status field.
func typedStatuses(a, b client.Object) (sa, sb any, ok bool) {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if va.Type() != vb.Type() || va.Kind() != reflect.Pointer || va.IsNil() || vb.IsNil() || va.Elem().Kind() != reflect.Struct {
		return nil, nil, false
	}
	fa, fb := va.Elem().FieldByName("Status"), vb.Elem().FieldByName("Status")
	if !fa.IsValid() || !fa.CanAddr() || !fa.CanInterface() {
		return nil, nil, false
	}
	return fa.Addr().Interface(), fb.Addr().Interface(), true
}

// statusOf is obj's status as JSON would carry it: only the status is
// converted, not the whole object (a FleetVirtualMachine's spec holds its
// VM template), when obj is a pointer to a struct with a Status field.
func statusOf(obj client.Object) (any, error) {
	v := reflect.ValueOf(obj)
	if v.Kind() == reflect.Pointer && v.Elem().Kind() == reflect.Struct {
		if f := v.Elem().FieldByName("Status"); f.IsValid() && f.Kind() == reflect.Struct && f.CanAddr() {
			return runtime.DefaultUnstructuredConverter.ToUnstructured(f.Addr().Interface())
		}
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return u["status"], nil
}

// Stale reports whether err, or every error joined in it, is the API
// server refusing a write computed from an out-of-date read: 409 Conflict
// (the resourceVersion moved on) or AlreadyExists (the cache had not seen
// the object yet).
func Stale(err error) bool {
	if err == nil {
		return false
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			if e != nil && !Stale(e) {
				return false
			}
		}
		return true
	}
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		return true
	}
	if u := errors.Unwrap(err); u != nil {
		return Stale(u)
	}
	return false
}

// StaleRetry is when a reconcile that ended on a stale write runs again
// at the latest; most often the watch brings the newer object sooner.
const StaleRetry = time.Second

// Requeue wraps a reconciler so that a stale write ends its reconcile
// without an error: the newer object is on its way through the watch and
// the next reconcile decides again from it. Every FleetVM controller is
// registered through it, so conflicts are handled the same way everywhere.
func Requeue(r reconcile.Reconciler) reconcile.Reconciler {
	return reconcile.Func(func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
		res, err := r.Reconcile(ctx, req)
		if Stale(err) {
			if res.RequeueAfter == 0 || res.RequeueAfter > StaleRetry {
				res.RequeueAfter = StaleRetry
			}
			return res, nil
		}
		return res, err
	})
}

// intentOf is what Ensure compares and hashes: want's labels,
// annotations, finalizers, owner references and generated fields.
func intentOf(u map[string]any) map[string]any {
	in := map[string]any{}
	for k, v := range u {
		if !reserved(k) {
			in[k] = v
		}
	}
	md, _ := u["metadata"].(map[string]any)
	for _, k := range []string{"labels", "annotations", "finalizers", "ownerReferences"} {
		if v, ok := md[k]; ok && v != nil {
			in["metadata."+k] = v
		}
	}
	if a, ok := in["metadata.annotations"].(map[string]any); ok {
		a = maps.Clone(a)
		delete(a, HashAnnotation)
		in["metadata.annotations"] = a
	}
	return in
}

// holds reports whether the object got (unstructured) holds intent in.
func holds(got, in map[string]any) bool {
	md, _ := got["metadata"].(map[string]any)
	for k, v := range in {
		switch k {
		case "metadata.labels", "metadata.annotations":
			if !contains(md[k[len("metadata."):]], v) {
				return false
			}
		case "metadata.finalizers":
			have, _ := md["finalizers"].([]any)
			for _, f := range v.([]any) {
				if !slices.Contains(have, f) {
					return false
				}
			}
		case "metadata.ownerReferences":
			have, _ := md["ownerReferences"].([]any)
			for _, r := range v.([]any) {
				if !slices.ContainsFunc(have, func(o any) bool { return contains(o, r) }) {
					return false
				}
			}
		default:
			if !contains(got[k], v) {
				return false
			}
		}
	}
	return true
}

// contains reports whether have holds every field of want: maps may have
// more keys (defaults), lists must have as many items, each holding
// want's, and a null in want asks for nothing.
func contains(have, want any) bool {
	switch w := want.(type) {
	case nil:
		return true
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return len(w) == 0 && have == nil
		}
		for k, v := range w {
			if !contains(h[k], v) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok {
			return len(w) == 0 && have == nil
		}
		if len(h) != len(w) {
			return false
		}
		for i := range w {
			if !contains(h[i], w[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(have, want)
	}
}

func hashOf(in map[string]any) string {
	data, err := json.Marshal(in)
	if err != nil {
		// Values came from the unstructured converter: always JSON.
		panic(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

func reserved(k string) bool {
	return k == "apiVersion" || k == "kind" || k == "metadata" || k == "status"
}

func mergeMaps(have, want map[string]string) map[string]string {
	out := maps.Clone(have)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, want)
	return out
}

func with(m map[string]string, k, v string) map[string]string {
	out := maps.Clone(m)
	if out == nil {
		out = map[string]string{}
	}
	out[k] = v
	return out
}

func isNil(obj client.Object) bool {
	if obj == nil {
		return true
	}
	v := reflect.ValueOf(obj)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
