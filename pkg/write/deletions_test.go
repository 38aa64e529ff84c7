package write

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestDeletionsAskOnce: an object deleted is not deleted again while the
// cache still shows it, nor one a finalizer holds; once DeletionMemory has
// passed it is, and an object of the same name with another UID (created
// anew) is deleted at once. An object already gone is no error.
func TestDeletionsAskOnce(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	d := &Deletions{Now: func() time.Time { return now }}
	var asked []types.UID
	c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
		// The cache lags: the object stays where the reconcile reads it.
		Delete: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.DeleteOption) error {
			asked = append(asked, obj.GetUID())
			return nil
		},
	}).Build()
	cm := func(uid types.UID) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "work", UID: uid}}
	}
	del := func(obj client.Object) {
		t.Helper()
		if err := d.Delete(t.Context(), c, obj); err != nil {
			t.Fatal(err)
		}
	}
	del(cm("a"))
	del(cm("a"))
	now = now.Add(DeletionMemory - time.Second)
	del(cm("a"))
	if len(asked) != 1 {
		t.Fatalf("deletions asked %v, want one for a while the cache still shows it", asked)
	}
	del(cm("b"))
	terminating := cm("c")
	terminating.DeletionTimestamp = &metav1.Time{Time: now}
	terminating.Finalizers = []string{"cluster.open-cluster-management.io/manifest-work-cleanup"}
	del(terminating)
	now = now.Add(time.Second)
	del(cm("a"))
	want := []types.UID{"a", "b", "a"}
	if len(asked) != len(want) {
		t.Fatalf("deletions asked %v, want %v", asked, want)
	}
	for i := range want {
		if asked[i] != want[i] {
			t.Fatalf("deletions asked %v, want %v", asked, want)
		}
	}

	gone := fake.NewClientBuilder().Build()
	if err := d.Delete(t.Context(), gone, cm("d")); err != nil {
		t.Errorf("an object already gone: %v", err)
	}
}
