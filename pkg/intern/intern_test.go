package intern

import (
	"strings"
	"testing"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fresh returns a copy of s in bytes of its own, as decoding gives each
// object.
func fresh(s string) string { return strings.Clone(s) }

func same(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

func TestStringSharesOneCopy(t *testing.T) {
	tab := New(0)
	a, b := fresh("Ready=True"), fresh("Ready=True")
	if same(a, b) {
		t.Fatal("the test's strings share bytes before interning")
	}
	if got := tab.String(a); !same(got, a) {
		t.Errorf("first String returned another copy")
	}
	if got := tab.String(b); !same(got, a) || got != b {
		t.Errorf("second String = %q, want the first copy of %q", got, b)
	}
	if tab.String("") != "" || tab.Len() != 1 {
		t.Errorf("the empty string was stored: %d strings", tab.Len())
	}
}

func TestTableStartsAfreshWhenFull(t *testing.T) {
	tab := New(2)
	tab.String(fresh("a"))
	tab.String(fresh("b"))
	if tab.Len() != 2 {
		t.Fatalf("Len = %d, want 2", tab.Len())
	}
	tab.String(fresh("c"))
	if tab.Len() != 1 {
		t.Errorf("Len after a third string = %d, want 1 (started afresh)", tab.Len())
	}
	c := fresh("c")
	if got := tab.String(c); got != "c" || same(got, c) {
		t.Errorf("String after the reset did not share the stored copy")
	}
}

func TestMetaSharesRepeatedFields(t *testing.T) {
	tab := New(0)
	mk := func() *metav1.ObjectMeta {
		return &metav1.ObjectMeta{
			Name: fresh("vm-1"), Namespace: fresh("argocd"), UID: "u",
			Labels:          map[string]string{fresh("fleetvm.io/name"): fresh("vm-1")},
			Annotations:     map[string]string{fresh("a"): fresh("b")},
			Finalizers:      []string{fresh("fleetvm.io/cleanup")},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: fresh("argoproj.io/v1alpha1"), Kind: fresh("ApplicationSet"), Name: fresh("set")}},
		}
	}
	a, b := mk(), mk()
	tab.Meta(a)
	tab.Meta(b)
	if !same(a.Namespace, b.Namespace) || !same(a.Finalizers[0], b.Finalizers[0]) ||
		!same(a.OwnerReferences[0].Kind, b.OwnerReferences[0].Kind) || !same(a.Labels["fleetvm.io/name"], b.Labels["fleetvm.io/name"]) {
		t.Error("repeated metadata strings not shared")
	}
	for ka := range a.Labels {
		for kb := range b.Labels {
			if !same(ka, kb) {
				t.Error("label keys not shared")
			}
		}
	}
	for ka := range a.Annotations {
		for kb := range b.Annotations {
			if !same(ka, kb) {
				t.Error("annotation keys not shared")
			}
		}
	}
	if same(a.Annotations["a"], b.Annotations["a"]) {
		t.Error("annotation values were interned: those the hub caches are one per object")
	}
	if same(a.Name, b.Name) || same(a.OwnerReferences[0].Name, b.OwnerReferences[0].Name) {
		t.Error("names were interned: they are unique per object")
	}
	if a.Labels["fleetvm.io/name"] != "vm-1" || a.Annotations["a"] != "b" {
		t.Errorf("values changed: %v %v", a.Labels, a.Annotations)
	}
}

func TestConditionsAndValue(t *testing.T) {
	tab := New(0)
	type phase string
	p1, p2 := phase(fresh("Running")), phase(fresh("Running"))
	first := Value(tab, p1)
	if got := Value(tab, p2); got != first || !same(string(got), string(p1)) {
		t.Error("Value did not share")
	}
	c1 := []metav1.Condition{{Type: fresh("Ready"), Reason: fresh("AllReady"), Message: fresh("ready on all 3 clusters")}}
	c2 := []metav1.Condition{{Type: fresh("Ready"), Reason: fresh("AllReady"), Message: fresh("ready on all 3 clusters")}}
	tab.Conditions(c1)
	tab.Conditions(c2)
	if !same(c1[0].Message, c2[0].Message) || !same(c1[0].Reason, c2[0].Reason) || !same(c1[0].Type, c2[0].Type) {
		t.Error("conditions not shared")
	}
}
