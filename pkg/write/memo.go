package write

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Memo remembers the objects Ensure found, or left, holding what was
// asked: by UID, the resourceVersion and a digest of the ask. Ensure
// through a Memo skips the comparison when the object is still at that
// resourceVersion and the ask is the same, so a reconcile that changes
// nothing converts nothing (a hub restarted with thousands of objects in
// place compares each once). Any change of an object changes its
// resourceVersion, so a skip is never wrong: the Memo saves work, it
// decides nothing. The zero value is ready to use; it is safe for
// concurrent use.
type Memo struct {
	mu sync.Mutex
	m  map[types.UID]verified
}

type verified struct {
	resourceVersion string
	digest          [sha256.Size]byte
}

// memoLimit bounds a Memo: past it, the Memo starts afresh (objects
// deleted since leave entries behind; the next comparison of each object
// still present remembers it again).
const memoLimit = 1 << 16

// Ensure is Ensure (the function), skipping the comparison for an object
// m last saw holding the same ask at the same resourceVersion.
func (m *Memo) Ensure(ctx context.Context, c client.Client, want, got client.Object) (Outcome, error) {
	data, err := json.Marshal(want)
	if err != nil {
		return Ensure(ctx, c, want, got)
	}
	digest := sha256.Sum256(data)
	if !isNil(got) && m.holds(got, digest) {
		return Unchanged, nil
	}
	out, err := Ensure(ctx, c, want, got)
	if err != nil {
		return out, err
	}
	if out == Created {
		m.remember(want, digest) // want now holds the API server's copy
	} else {
		m.remember(got, digest) // as found, or as patched
	}
	return out, nil
}

func (m *Memo) holds(obj client.Object, digest [sha256.Size]byte) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.m[obj.GetUID()]
	return ok && v.resourceVersion == obj.GetResourceVersion() && v.digest == digest
}

func (m *Memo) remember(obj client.Object, digest [sha256.Size]byte) {
	if obj.GetUID() == "" || obj.GetResourceVersion() == "" {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil || len(m.m) >= memoLimit {
		m.m = map[types.UID]verified{}
	}
	m.m[obj.GetUID()] = verified{obj.GetResourceVersion(), digest}
}
