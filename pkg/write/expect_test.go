package write

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestExpectations: after a write, an older cached copy is not acted on
// until the written one arrives or the wait times out.
func TestExpectations(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	e := &Expectations{Now: func() time.Time { return now }}
	at := func(rv string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x", ResourceVersion: rv}}
	}
	if !e.Satisfied(at("1")) {
		t.Fatal("nothing written: not satisfied")
	}
	e.Wrote(at("5"))
	if e.Satisfied(at("4")) {
		t.Error("the copy before the write was acted on")
	}
	if !e.Satisfied(at("5")) {
		t.Error("the written copy was not acted on")
	}
	if !e.Satisfied(at("4")) {
		t.Error("once the written copy was seen, the expectation should be gone")
	}
	e.Wrote(at("7"))
	now = now.Add(ExpectationTimeout - time.Millisecond)
	if e.Satisfied(at("6")) {
		t.Error("stale copy acted on before the timeout")
	}
	now = now.Add(time.Millisecond)
	if !e.Satisfied(at("6")) {
		t.Error("still waiting past the timeout")
	}
	e.Wrote(at("9"))
	e.Forget(types.NamespacedName{Namespace: "ns", Name: "x"})
	if !e.Satisfied(at("8")) {
		t.Error("forgotten, yet still waiting")
	}
}
