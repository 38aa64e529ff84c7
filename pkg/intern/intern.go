// Package intern shares the bytes of the strings that many cached objects
// repeat. Decoding gives every object its own copy of each string: the same
// label keys, namespace, Argo CD sync status, cluster names and KubeVirt
// condition summaries, once per FleetVirtualMachine, per Application and per
// VM report. The hub's cache transforms pass those fields through a Table,
// so that ten thousand objects hold one copy of each. Only fields whose values
// repeat across objects go through it, never names, UIDs or versions.
package intern

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DefaultMax bounds a Table made by New(0): beyond it the table starts
// afresh, so values that stopped repeating (FleetVMs deleted) are not kept.
const DefaultMax = 1 << 17

// Table maps each string to the copy objects share. Safe for concurrent use
// (each informer transforms in its own goroutine).
type Table struct {
	mu  sync.Mutex
	m   map[string]string
	max int
}

// New returns a Table of at most limit strings (DefaultMax when limit <= 0).
func New(limit int) *Table {
	if limit <= 0 {
		limit = DefaultMax
	}
	return &Table{m: map[string]string{}, max: limit}
}

// String returns the shared copy of s.
func (t *Table) String(s string) string {
	if s == "" {
		return s
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if shared, ok := t.m[s]; ok {
		return shared
	}
	if len(t.m) >= t.max {
		// Strings already shared stay shared; only later copies are new.
		t.m = map[string]string{}
	}
	t.m[s] = s
	return s
}

// Len is the number of strings the table holds.
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}

// Strings interns each string of ss in place.
func (t *Table) Strings(ss []string) {
	for i := range ss {
		ss[i] = t.String(ss[i])
	}
}

// Map interns the keys and values of m in place.
func (t *Table) Map(m map[string]string) {
	for k, v := range m {
		// Assigning to a present key stores the key given: the shared copy.
		m[t.String(k)] = t.String(v)
	}
}

// Keys interns the keys of m in place, not its values.
func (t *Table) Keys(m map[string]string) {
	for k, v := range m {
		m[t.String(k)] = v
	}
}

// Meta interns what objects of a kind repeat in their metadata: the
// namespace, label keys and values, annotation keys, finalizers and the
// owners' API versions and kinds. Not names, UIDs, resource versions, nor
// annotation values: those the hub caches are hashes, digests and names,
// one per object, which would only fill the table.
func (t *Table) Meta(m *metav1.ObjectMeta) {
	m.Namespace = t.String(m.Namespace)
	t.Map(m.Labels)
	t.Keys(m.Annotations)
	t.Strings(m.Finalizers)
	for i := range m.OwnerReferences {
		ref := &m.OwnerReferences[i]
		ref.APIVersion = t.String(ref.APIVersion)
		ref.Kind = t.String(ref.Kind)
	}
}

// Conditions interns the type, reason and message of each condition.
func (t *Table) Conditions(cs []metav1.Condition) {
	for i := range cs {
		c := &cs[i]
		c.Type = t.String(c.Type)
		c.Reason = t.String(c.Reason)
		c.Message = t.String(c.Message)
	}
}

// Value is String for the string types the APIs define (phases, status
// codes).
func Value[S ~string](t *Table, s S) S {
	return S(t.String(string(s)))
}
