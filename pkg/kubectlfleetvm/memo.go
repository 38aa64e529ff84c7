package kubectlfleetvm

import (
	"context"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// memoReader answers each distinct Get and List once, errors included,
// and hands out copies: drain --dry-run explains every FleetVM with a copy
// on the cluster, and they mostly read the same cluster sets, clusters
// and scores. It is for one command's reads, one goroutine at a time.
type memoReader struct {
	reader client.Reader
	seen   map[string]memoEntry
}

type memoEntry struct {
	obj runtime.Object // as read
	err error
}

func newMemoReader(r client.Reader) *memoReader {
	return &memoReader{reader: r, seen: map[string]memoEntry{}}
}

// Get implements client.Reader.
func (m *memoReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	k := fmt.Sprintf("get %T %s", obj, key)
	if e, ok := m.seen[k]; ok {
		return e.fill(obj)
	}
	err := m.reader.Get(ctx, key, obj, opts...)
	m.seen[k] = memoEntry{obj: obj.DeepCopyObject(), err: err}
	return err
}

// List implements client.Reader.
func (m *memoReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	k := fmt.Sprintf("list %T %q %v %v %d %q", list, lo.Namespace, lo.LabelSelector, lo.FieldSelector, lo.Limit, lo.Continue)
	if e, ok := m.seen[k]; ok {
		return e.fill(list)
	}
	err := m.reader.List(ctx, list, opts...)
	m.seen[k] = memoEntry{obj: list.DeepCopyObject(), err: err}
	return err
}

// fill sets into a copy of what was read, or returns the error read.
func (e memoEntry) fill(into runtime.Object) error {
	if e.err != nil {
		return e.err
	}
	src, dst := reflect.ValueOf(e.obj.DeepCopyObject()), reflect.ValueOf(into)
	if src.Type() != dst.Type() {
		return fmt.Errorf("memoReader: %T read into %T", e.obj, into)
	}
	dst.Elem().Set(src.Elem())
	return nil
}
