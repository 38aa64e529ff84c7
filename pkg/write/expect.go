package write

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Expectations remember, per object, the resourceVersion of the
// controller's own last write until its cache has caught up with it. A
// reconcile that starts from an older copy (another object's event came
// first) would compute from a stale read, and its write would be refused
// with 409 Conflict; with Satisfied it waits for the watch event of its own
// write instead, which brings the next reconcile. This is the
// "expectations" of Kubernetes' own controllers, for one object.
//
// The zero value is ready to use.
type Expectations struct {
	mu sync.Mutex
	m  map[types.NamespacedName]expectation
	// Now is the time source; time.Now when nil.
	Now func() time.Time
}

type expectation struct {
	resourceVersion string
	at              time.Time
}

// ExpectationTimeout bounds the wait for the cache: past it the object is
// read as it is (the watch may have skipped the version, after a relist).
const ExpectationTimeout = 2 * time.Second

func (e *Expectations) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

// Wrote records that obj, as the API server returned it, was just written.
func (e *Expectations) Wrote(obj client.Object) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[types.NamespacedName]expectation{}
	}
	e.m[client.ObjectKeyFromObject(obj)] = expectation{resourceVersion: obj.GetResourceVersion(), at: e.now()}
}

// Satisfied reports whether obj, as read from the cache, may be acted on:
// no write of it is pending, or this copy is the one written, or the wait
// timed out. It forgets the expectation once satisfied.
func (e *Expectations) Satisfied(obj client.Object) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	key := client.ObjectKeyFromObject(obj)
	exp, ok := e.m[key]
	if !ok {
		return true
	}
	if obj.GetResourceVersion() == exp.resourceVersion || e.now().Sub(exp.at) >= ExpectationTimeout {
		delete(e.m, key)
		return true
	}
	return false
}

// Forget drops the expectation of an object that is gone.
func (e *Expectations) Forget(key types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, key)
}
