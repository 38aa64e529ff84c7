package fieldindex

import (
	"slices"
	"testing"
)

// TestKeys: each value is stored once, under the key controller-runtime's
// Lists of the scope look up.
func TestKeys(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ns    string
		scope Scope
		want  []string
	}{
		{"across namespaces", "bench", AllNamespaces, []string{"__all_namespaces/a", "__all_namespaces/b"}},
		{"in its namespace", "argocd", OwnNamespace, []string{"argocd/a", "argocd/b"}},
		{"cluster-scoped", "", OwnNamespace, []string{"__all_namespaces/a", "__all_namespaces/b"}},
	} {
		if got := keys(tc.ns, tc.scope, []string{"a", "b"}); !slices.Equal(got, tc.want) {
			t.Errorf("%s: keys = %v, want %v", tc.name, got, tc.want)
		}
	}
}
