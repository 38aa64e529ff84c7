package write

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// counted is a fake API server that counts the requests that write.
func counted(objs ...client.Object) (client.Client, *int) {
	n := 0
	count := func() { n++ }
	c := fake.NewClientBuilder().WithObjects(objs...).WithStatusSubresource(&corev1.Namespace{}).
		WithInterceptorFuncs(interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				count()
				return c.Create(ctx, obj, opts...)
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				count()
				return c.Update(ctx, obj, opts...)
			},
			Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
				count()
				return c.Patch(ctx, obj, p, opts...)
			},
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				count()
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		}).Build()
	return c, &n
}

func configMap(data map[string]string, labels map[string]string, finalizers ...string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm", Labels: labels, Finalizers: finalizers},
		Data:       data,
	}
}

func read(t *testing.T, c client.Client) *corev1.ConfigMap {
	t.Helper()
	got := &corev1.ConfigMap{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "cm"}, got); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestEnsure(t *testing.T) {
	ctx := context.Background()
	want := func() *corev1.ConfigMap {
		return configMap(map[string]string{"a": "1", "b": "2"}, map[string]string{"app": "fleetvm"}, "fleetvm.io/x")
	}

	t.Run("created once, then nothing at rest", func(t *testing.T) {
		c, writes := counted()
		if out, err := Ensure(ctx, c, want(), (*corev1.ConfigMap)(nil)); err != nil || out != Created {
			t.Fatalf("first Ensure = %v, %v; want Created", out, err)
		}
		for range 3 {
			if out, err := Ensure(ctx, c, want(), read(t, c)); err != nil || out != Unchanged {
				t.Fatalf("Ensure at rest = %v, %v; want Unchanged", out, err)
			}
		}
		if *writes != 1 {
			t.Errorf("writes = %d, want 1 (the create)", *writes)
		}
	})

	t.Run("fields others added are kept and do not cause writes", func(t *testing.T) {
		c, writes := counted()
		if _, err := Ensure(ctx, c, want(), nil); err != nil {
			t.Fatal(err)
		}
		// Someone else adds a label, an annotation and a finalizer; the API
		// server would add defaults the same way.
		got := read(t, c)
		got.Labels["team"] = "a"
		got.Annotations["note"] = "kept"
		got.Finalizers = append(got.Finalizers, "other.io/y")
		if err := c.Update(ctx, got); err != nil {
			t.Fatal(err)
		}
		*writes = 0
		if out, err := Ensure(ctx, c, want(), read(t, c)); err != nil || out != Unchanged {
			t.Fatalf("Ensure = %v, %v; want Unchanged", out, err)
		}
		if *writes != 0 {
			t.Errorf("writes = %d, want 0", *writes)
		}
	})

	t.Run("drift is put back, others' fields kept", func(t *testing.T) {
		c, _ := counted()
		if _, err := Ensure(ctx, c, want(), nil); err != nil {
			t.Fatal(err)
		}
		got := read(t, c)
		got.Data["a"] = "changed by hand"
		got.Labels["team"] = "a"
		if err := c.Update(ctx, got); err != nil {
			t.Fatal(err)
		}
		got = read(t, c)
		if out, err := Ensure(ctx, c, want(), got); err != nil || out != Updated {
			t.Fatalf("Ensure = %v, %v; want Updated", out, err)
		}
		after := read(t, c)
		if diff := cmp.Diff(map[string]string{"a": "1", "b": "2"}, after.Data); diff != "" {
			t.Errorf("data (-want,+got):\n%s", diff)
		}
		if after.Labels["team"] != "a" || after.Labels["app"] != "fleetvm" {
			t.Errorf("labels = %v, want both app and team", after.Labels)
		}
		if diff := cmp.Diff(after, got); diff != "" {
			t.Errorf("got does not hold the API server's copy (-server,+got):\n%s", diff)
		}
	})

	t.Run("a field FleetVM stops generating is removed", func(t *testing.T) {
		c, _ := counted()
		if _, err := Ensure(ctx, c, want(), nil); err != nil {
			t.Fatal(err)
		}
		less := configMap(map[string]string{"a": "1"}, map[string]string{"app": "fleetvm"}, "fleetvm.io/x")
		if out, err := Ensure(ctx, c, less, read(t, c)); err != nil || out != Updated {
			t.Fatalf("Ensure = %v, %v; want Updated", out, err)
		}
		if diff := cmp.Diff(map[string]string{"a": "1"}, read(t, c).Data); diff != "" {
			t.Errorf("data (-want,+got):\n%s", diff)
		}
	})

	t.Run("a write from a stale read loses nobody's change", func(t *testing.T) {
		c, _ := counted()
		if _, err := Ensure(ctx, c, want(), nil); err != nil {
			t.Fatal(err)
		}
		stale := read(t, c)
		fresh := stale.DeepCopy()
		fresh.Data["c"] = "someone's"
		fresh.Finalizers = append(fresh.Finalizers, "other.io/y")
		if err := c.Update(ctx, fresh); err != nil {
			t.Fatal(err)
		}
		// Data keys are patched one by one: someone's key stays.
		changed := configMap(map[string]string{"a": "9"}, nil, "fleetvm.io/x")
		if _, err := Ensure(ctx, c, changed, stale.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(map[string]string{"a": "9", "c": "someone's"}, read(t, c).Data); diff != "" {
			t.Errorf("data (-want,+got):\n%s", diff)
		}
		// A finalizer list is replaced whole: from a stale read it is
		// refused, and someone's finalizer stays.
		more := configMap(map[string]string{"a": "9"}, nil, "fleetvm.io/x", "fleetvm.io/z")
		_, err := Ensure(ctx, c, more, stale)
		if !Stale(err) {
			t.Fatalf("Ensure from a stale read = %v, want a conflict", err)
		}
		if diff := cmp.Diff([]string{"fleetvm.io/x", "other.io/y"}, read(t, c).Finalizers); diff != "" {
			t.Errorf("finalizers (-want,+got):\n%s", diff)
		}
	})

	t.Run("create over an existing object is refused", func(t *testing.T) {
		c, _ := counted(configMap(map[string]string{"mine": "yes"}, nil))
		_, err := Ensure(ctx, c, want(), nil)
		if !apierrors.IsAlreadyExists(err) || !Stale(err) {
			t.Fatalf("Ensure = %v, want AlreadyExists", err)
		}
		if got := read(t, c).Data; got["mine"] != "yes" || len(got) != 1 {
			t.Errorf("data = %v: someone's object was overwritten", got)
		}
	})
}

func TestCreateOnly(t *testing.T) {
	ctx := context.Background()
	c, writes := counted(configMap(map[string]string{"mine": "yes"}, nil))
	created, err := CreateOnly(ctx, c, configMap(map[string]string{"a": "1"}, nil))
	if err != nil || created {
		t.Fatalf("CreateOnly over an existing object = %v, %v; want false, nil", created, err)
	}
	if got := read(t, c).Data; got["mine"] != "yes" {
		t.Errorf("data = %v: the existing object was changed", got)
	}
	if *writes != 1 {
		t.Errorf("writes = %d, want 1 (the refused create)", *writes)
	}
}

func TestMutate(t *testing.T) {
	ctx := context.Background()
	c, writes := counted(configMap(map[string]string{"a": "1"}, nil, "fleetvm.io/x"))

	got := read(t, c)
	if wrote, err := AddFinalizer(ctx, c, got, "fleetvm.io/x"); err != nil || wrote {
		t.Fatalf("AddFinalizer of a present finalizer = %v, %v; want no write", wrote, err)
	}
	if *writes != 0 {
		t.Fatalf("writes = %d, want 0", *writes)
	}

	stale := read(t, c)
	if _, err := RemoveFinalizer(ctx, c, got, "fleetvm.io/x"); err != nil {
		t.Fatal(err)
	}
	if len(read(t, c).Finalizers) != 0 {
		t.Errorf("finalizers = %v, want none", read(t, c).Finalizers)
	}
	_, err := AddFinalizer(ctx, c, stale, "other.io/y")
	if !Stale(err) {
		t.Fatalf("Mutate from a stale read = %v, want a conflict", err)
	}
}

func TestStatus(t *testing.T) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	c, writes := counted(ns)
	got := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: "n"}, got); err != nil {
		t.Fatal(err)
	}
	before := got.DeepCopy()
	if wrote, err := Status(ctx, c, before, got); err != nil || wrote || *writes != 0 {
		t.Fatalf("Status unchanged = %v, %v, %d writes; want no write", wrote, err, *writes)
	}
	got.Spec.Finalizers = []corev1.FinalizerName{"not-status"}
	if wrote, err := Status(ctx, c, before, got); err != nil || wrote || *writes != 0 {
		t.Fatalf("Status with only the spec changed = %v, %v, %d writes; want no write", wrote, err, *writes)
	}
	// Unequal as Go values, equal as JSON: no write either.
	got.Status.Conditions = []corev1.NamespaceCondition{}
	if wrote, err := Status(ctx, c, before, got); err != nil || wrote || *writes != 0 {
		t.Fatalf("Status with an empty list for none = %v, %v, %d writes; want no write", wrote, err, *writes)
	}
	got.Status.Phase = corev1.NamespaceActive
	if wrote, err := Status(ctx, c, before, got); err != nil || !wrote {
		t.Fatalf("Status changed = %v, %v; want a write", wrote, err)
	}
	before.Status.Phase = corev1.NamespaceTerminating
	if _, err := Status(ctx, c, &corev1.Namespace{}, before); !Stale(err) {
		t.Fatalf("Status from a stale read = %v, want a conflict", err)
	}
}

func TestStale(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	conflict := apierrors.NewConflict(gr, "cm", errors.New("changed"))
	exists := apierrors.NewAlreadyExists(gr, "cm")
	other := errors.New("boom")
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"nil":                   {nil, false},
		"conflict":              {conflict, true},
		"already exists":        {exists, true},
		"wrapped conflict":      {fmt.Errorf("update x: %w", conflict), true},
		"joined stale":          {errors.Join(conflict, fmt.Errorf("create y: %w", exists)), true},
		"joined with a failure": {errors.Join(conflict, other), false},
		"other":                 {other, false},
		"not found":             {apierrors.NewNotFound(gr, "cm"), false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Stale(tc.err); got != tc.want {
				t.Errorf("Stale(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

func TestRequeue(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "x"}, "x", errors.New("changed"))
	for name, tc := range map[string]struct {
		res     ctrl.Result
		err     error
		want    ctrl.Result
		wantErr bool
	}{
		"stale ends quietly and comes back": {err: conflict, want: ctrl.Result{RequeueAfter: StaleRetry}},
		"an earlier wake-up is kept": {res: ctrl.Result{RequeueAfter: StaleRetry / 2}, err: conflict,
			want: ctrl.Result{RequeueAfter: StaleRetry / 2}},
		"other errors are returned": {err: errors.New("boom"), wantErr: true},
		"success untouched":         {res: ctrl.Result{RequeueAfter: 7}, want: ctrl.Result{RequeueAfter: 7}},
	} {
		t.Run(name, func(t *testing.T) {
			r := Requeue(reconcile.Func(func(context.Context, ctrl.Request) (ctrl.Result, error) { return tc.res, tc.err }))
			res, err := r.Reconcile(context.Background(), ctrl.Request{})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if !tc.wantErr && res != tc.want {
				t.Errorf("result = %+v, want %+v", res, tc.want)
			}
		})
	}
}

// TestRemoveFinalizerTested: a finalizer comes off an object the caller
// has just deleted, though the delete moved its resourceVersion on; a
// change of its finalizers since it was read, or another object of the
// name, is refused as a Conflict and nothing is lost.
func TestRemoveFinalizerTested(t *testing.T) {
	const mine, theirs = "fleetvm.io/mine", "example.com/theirs"
	cases := map[string]struct {
		between     func(cm *corev1.ConfigMap) // after the read, before the write
		wantRefused bool
		want        []string // finalizers after; nil: gone
	}{
		"deleted since it was read": {},
		"their finalizer added since": {
			between:     func(cm *corev1.ConfigMap) { cm.Finalizers = append(cm.Finalizers, theirs) },
			wantRefused: true, want: []string{mine, theirs},
		},
		"mine taken off and put back since by someone else": {
			between:     func(cm *corev1.ConfigMap) { cm.Finalizers = []string{theirs, mine} },
			wantRefused: true, want: []string{theirs, mine},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cm", UID: "uid-1", Finalizers: []string{mine}}}
			c := fake.NewClientBuilder().WithObjects(cm).WithInterceptorFuncs(interceptor.Funcs{
				// The API server answers a JSON patch whose test fails with
				// 422 (its patch handler); the fake client with a plain error.
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					err := c.Patch(ctx, obj, patch, opts...)
					if err != nil && !apierrors.IsNotFound(err) && apierrors.ReasonForError(err) == metav1.StatusReasonUnknown {
						return apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "patch", schema.GroupResource{}, "", err.Error(), 0, false)
					}
					return err
				},
			}).Build()
			read := &corev1.ConfigMap{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(cm), read); err != nil {
				t.Fatal(err)
			}
			if err := c.Delete(ctx, read.DeepCopy()); err != nil {
				t.Fatal(err)
			}
			if tc.between != nil {
				live := &corev1.ConfigMap{}
				if err := c.Get(ctx, client.ObjectKeyFromObject(cm), live); err != nil {
					t.Fatal(err)
				}
				tc.between(live)
				if err := c.Update(ctx, live); err != nil {
					t.Fatal(err)
				}
			}
			wrote, err := RemoveFinalizerTested(ctx, c, read, mine)
			if refused := Stale(err); refused != tc.wantRefused || (err != nil && !refused) || wrote == refused {
				t.Fatalf("RemoveFinalizerTested = %v, %v; want refused as stale: %v", wrote, err, tc.wantRefused)
			}
			after := &corev1.ConfigMap{}
			var got []string
			switch err := c.Get(ctx, client.ObjectKeyFromObject(cm), after); {
			case apierrors.IsNotFound(err):
			case err != nil:
				t.Fatal(err)
			default:
				got = after.Finalizers
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("finalizers after (-want,+got):\n%s", diff)
			}
		})
	}
}
