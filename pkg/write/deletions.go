package write

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Deletions remember the objects a controller deleted, by UID, for
// DeletionMemory, so that it asks for each deletion once. Objects deleted
// together (a namespace's ManifestWorks, one per cluster) are still in the
// cache when the next reconcile looks, until the watch brings their
// deletions; one a finalizer holds stays there until the finalizer goes.
// Deleted again, each is a request answered 404 Not Found, or one that
// changes nothing.
//
// The zero value is ready to use.
type Deletions struct {
	mu sync.Mutex
	m  map[types.UID]time.Time
	// next is the size at which expired entries are dropped.
	next int
	// Now is the time source; time.Now when nil.
	Now func() time.Time
}

// DeletionMemory is how long a deletion is remembered: past it the object,
// if the cache still has it, is deleted again (a watch that skipped the
// event, after a relist).
const DeletionMemory = 30 * time.Second

func (d *Deletions) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// Delete deletes obj, as read from the cache, unless it is being deleted
// already (it has a deletion timestamp) or this controller deleted it
// within DeletionMemory. An object already gone is no error.
func (d *Deletions) Delete(ctx context.Context, c client.Writer, obj client.Object) error {
	if obj.GetDeletionTimestamp() != nil {
		return nil
	}
	uid := obj.GetUID()
	if uid != "" && d.pending(uid) {
		return nil
	}
	if err := c.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if uid != "" {
		d.deleted(uid)
	}
	return nil
}

func (d *Deletions) pending(uid types.UID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	at, ok := d.m[uid]
	return ok && d.now().Sub(at) < DeletionMemory
}

func (d *Deletions) deleted(uid types.UID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	if d.m == nil {
		d.m = map[types.UID]time.Time{}
	}
	if len(d.m) >= d.next {
		for k, at := range d.m {
			if now.Sub(at) >= DeletionMemory {
				delete(d.m, k)
			}
		}
		d.next = max(64, 2*len(d.m))
	}
	d.m[uid] = now
}
