// Package fieldindex registers field indexes that controller-runtime's cache
// stores once, not twice.
//
// For a namespaced kind, client.FieldIndexer.IndexField keeps every value
// under two keys: "<namespace>/<value>", which a List with InNamespace looks
// up, and "__all_namespaces/<value>", which a List without a namespace looks
// up. Each key holds a set of object keys, so an index whose values are
// unique per object (one FleetVirtualMachine's Applications, the VMReports
// of one VM) costs two small sets per object, whichever way the hub lists
// it. At 10,000 FleetVMs the indexes were 46 MiB of the hub's heap. Add
// stores only the key of the lookups the hub makes.
package fieldindex

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Scope is which Lists an index serves.
type Scope int

const (
	// Both: Lists with and without InNamespace (IndexField as is).
	Both Scope = iota
	// AllNamespaces: only Lists without InNamespace. A List with
	// InNamespace by such an index finds nothing.
	AllNamespaces
	// OwnNamespace: only Lists with InNamespace (the object's namespace). A
	// List without one by such an index finds nothing.
	OwnNamespace
)

// allNamespaces is controller-runtime's key prefix for Lists without a
// namespace (sigs.k8s.io/controller-runtime/pkg/cache/internal
// KeyToNamespacedKey), and indexName its name for a field's index
// (FieldIndexName): Lists look the index up by them.
const (
	allNamespaces = "__all_namespaces"
	indexPrefix   = "field:"
)

// Add indexes obj's kind by field for the Lists of scope. An indexer that
// is not a cache's (cache.Informers: a fake client's) gets IndexField,
// which serves both.
func Add(ctx context.Context, indexer client.FieldIndexer, obj client.Object, field string, scope Scope, extract client.IndexerFunc) error {
	c, ok := indexer.(cache.Informers)
	if scope == Both || !ok {
		return indexer.IndexField(ctx, obj, field, extract)
	}
	informer, err := c.GetInformer(ctx, obj)
	if err != nil {
		return err
	}
	return informer.AddIndexers(toolscache.Indexers{indexPrefix + field: func(raw any) ([]string, error) {
		o, ok := raw.(client.Object)
		if !ok {
			return nil, fmt.Errorf("index %s: %T is not an object", field, raw)
		}
		return keys(o.GetNamespace(), scope, extract(o)), nil
	}})
}

// keys are the index keys of values for an object in namespace ns, as
// controller-runtime's Lists of scope (AllNamespaces or OwnNamespace) look
// them up.
func keys(ns string, scope Scope, values []string) []string {
	prefix := allNamespaces + "/"
	if scope == OwnNamespace && ns != "" {
		prefix = ns + "/"
	}
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = prefix + v
	}
	return out
}
