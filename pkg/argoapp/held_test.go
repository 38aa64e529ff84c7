package argoapp_test

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/fleetvm/fleetvm/pkg/argoapp"
)

// TestHeldApplicationSet: a held copy (the hub's cache) keeps every label
// and annotation, readable as before, without their maps and without its
// spec; its JSON, from which a merge patch is computed, carries neither
// labels nor annotations, so a patch from it changes neither unless the
// caller sets some; made whole, it is the ApplicationSet as read with the
// spec given, and the held copy stays held.
func TestHeldApplicationSet(t *testing.T) {
	labels := map[string]string{"fleetvm.io/name": "web", "fleetvm.io/namespace": "team-a", "team": "a"}
	annotations := map[string]string{"fleetvm.io/placement": "fvm-team-a.web", "fleetvm.io/generated-hash": "abc", "someone/else": "x"}
	read := &argoapp.ApplicationSet{
		ObjectMeta: metav1.ObjectMeta{Name: "fvm-team-a.web", Namespace: "argocd", Labels: maps.Clone(labels), Annotations: maps.Clone(annotations), Finalizers: []string{"f"}},
		Spec:       argoapp.ApplicationSetSpec{GoTemplate: true, GoTemplateOptions: []string{"missingkey=error"}},
	}
	held := read.DeepCopy()
	held.Hold("digest", "a,b")
	var shared []string
	held.ShareHeld(func(s string) string { shared = append(shared, s); return s })

	if held.Labels != nil || held.Annotations != nil || held.Spec.GoTemplate {
		t.Errorf("held copy keeps maps or spec: %v, %v, %+v", held.Labels, held.Annotations, held.Spec)
	}
	if digest, targets, ok := held.Held(); !ok || digest != "digest" || targets != "a,b" {
		t.Errorf("Held() = %q, %q, %v; want digest, a,b, true", digest, targets, ok)
	}
	if _, _, ok := read.Held(); ok {
		t.Errorf("a copy never held says it is")
	}
	if !maps.Equal(held.GetLabels(), labels) || !maps.Equal(held.GetAnnotations(), annotations) {
		t.Errorf("held labels %v, annotations %v; want %v, %v", held.GetLabels(), held.GetAnnotations(), labels, annotations)
	}
	for k, v := range labels {
		if got := held.Label(k); got != v {
			t.Errorf("Label(%s) = %q, want %q", k, got, v)
		}
	}
	for k, v := range annotations {
		if got := held.Annotation(k); got != v {
			t.Errorf("Annotation(%s) = %q, want %q", k, got, v)
		}
	}
	if held.Label("absent") != "" || held.Annotation("absent") != "" {
		t.Errorf("an absent key has a value")
	}
	// Label keys and values and annotation keys are shared, not
	// annotation values (one per object).
	if len(shared) != 2*len(labels)+len(annotations) || strings.Contains(strings.Join(shared, " "), "abc") {
		t.Errorf("shared %q: want every label key and value and the annotation keys only", shared)
	}

	data, err := json.Marshal(held)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(data); strings.Contains(s, `"labels"`) || strings.Contains(s, `"annotations"`) || strings.Contains(s, "digest") {
		t.Errorf("a held copy's JSON carries labels, annotations or what it holds: %s", s)
	}

	// A copy of a held copy is held too (the cache's reads deep-copy).
	if c := held.DeepCopy(); !maps.Equal(c.GetLabels(), labels) || c.Annotation("someone/else") != "x" {
		t.Errorf("a deep copy of a held copy lost what it held: %v", c.GetLabels())
	}

	whole := held.Unhold(&read.Spec)
	if !maps.Equal(whole.Labels, labels) || !maps.Equal(whole.Annotations, annotations) || !whole.Spec.GoTemplate || whole.Finalizers[0] != "f" {
		t.Errorf("made whole: %+v", whole)
	}
	if _, _, ok := whole.Held(); ok {
		t.Errorf("a copy made whole says it is held")
	}
	if _, _, ok := held.Held(); !ok || held.Labels != nil {
		t.Errorf("making a copy whole changed the held copy")
	}
	whole.Labels["team"] = "b"
	if held.Label("team") != "a" {
		t.Errorf("a change to the whole copy's labels reached the held copy")
	}

	// A map set on a held copy (a write's result decoded into it) wins.
	held.SetLabels(map[string]string{"team": "c"})
	if held.Label("team") != "c" || held.GetLabels()["team"] != "c" {
		t.Errorf("label map set on a held copy not read: %v", held.GetLabels())
	}
}

// TestHeldIsNoField: the unstructured converter (write.Ensure compares and
// hashes what FleetVM renders with it) finds no field for what a copy
// holds. With one, the hash of every rendered ApplicationSet changed, and
// a hub of this tree wrote every ApplicationSet an older hub had written.
func TestHeldIsNoField(t *testing.T) {
	held := &argoapp.ApplicationSet{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"k": "v"}}}
	held.Hold("digest", "a,b")
	for _, obj := range []runtime.Object{&argoapp.ApplicationSet{}, held, &argoapp.Application{}} {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			t.Fatal(err)
		}
		for k := range u {
			if k != "metadata" && k != "spec" && k != "status" {
				t.Errorf("%T converts with a field %q: %v", obj, k, u[k])
			}
		}
	}
}
