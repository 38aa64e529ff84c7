package utiltesting

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// Indexer registers the field indexes a setup function adds (a
// controller's SetupIndexes) on a fake client builder. The fake client's
// indexes serve Lists with and without a namespace alike.
type Indexer struct{ Builder *fake.ClientBuilder }

// IndexField implements client.FieldIndexer.
func (i Indexer) IndexField(_ context.Context, obj client.Object, field string, fn client.IndexerFunc) error {
	i.Builder.WithIndex(obj, field, fn)
	return nil
}
