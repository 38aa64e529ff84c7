package fleetvirtualmachine

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/fleetvm/fleetvm/pkg/argoapp"
	"github.com/fleetvm/fleetvm/pkg/write"
)

// TestRemoveApplicationNamesTheVersionItWrote: an Application FleetVM
// removes is deleted only as FleetVM left it. Another writer that changes
// its finalizers between FleetVM's finalizer write and its delete (Argo
// CD's ApplicationSet controller writing from an ApplicationSet it has not
// seen deleted yet, sets them to the template's) gets the delete refused
// with a Conflict, which the next reconcile retries from the newer
// Application: deleted anyway, it would go without Argo CD's resources
// finalizer and leave a VM that must go, or with it and remove a VM that
// must stay.
func TestRemoveApplicationNamesTheVersionItWrote(t *testing.T) {
	const resources = argoapp.ResourcesFinalizerName
	type want struct {
		Exists, Deleting bool
		Finalizers       []string
		Refused          bool
	}
	cases := map[string]struct {
		finalizers []string
		deleteVM   bool
		// between runs right after FleetVM's finalizer write.
		between func(app *argoapp.Application)
		want    want
	}{
		"delete: deleted with the resources finalizer": {
			deleteVM: true,
			want:     want{Exists: true, Deleting: true, Finalizers: []string{resources}},
		},
		"delete: the finalizer taken off meanwhile is not deleted": {
			deleteVM: true,
			between:  func(app *argoapp.Application) { app.Finalizers = nil },
			want:     want{Exists: true, Refused: true},
		},
		"delete: another change meanwhile is not deleted either": {
			deleteVM: true,
			between:  func(app *argoapp.Application) { app.Labels = map[string]string{"touched": "yes"} },
			want:     want{Exists: true, Finalizers: []string{resources}, Refused: true},
		},
		"orphan: deleted without it": {
			finalizers: []string{resources},
			want:       want{},
		},
		"orphan: the finalizer put back meanwhile is not deleted": {
			finalizers: []string{resources},
			between:    func(app *argoapp.Application) { app.Finalizers = []string{resources} },
			want:       want{Exists: true, Finalizers: []string{resources}, Refused: true},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			app := &argoapp.Application{ObjectMeta: metav1.ObjectMeta{
				Namespace: "argocd", Name: "fvm-vms.web.prod-a", Finalizers: tc.finalizers,
			}}
			c := fake.NewClientBuilder().WithScheme(testScheme()).WithObjects(app).WithInterceptorFuncs(interceptor.Funcs{
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					if err := c.Patch(ctx, obj, patch, opts...); err != nil || tc.between == nil {
						return err
					}
					other := &argoapp.Application{}
					if err := c.Get(ctx, client.ObjectKeyFromObject(obj), other); err != nil {
						return err
					}
					tc.between(other)
					return c.Update(ctx, other)
				},
			}).Build()
			read := &argoapp.Application{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(app), read); err != nil {
				t.Fatal(err)
			}
			r := &Reconciler{Client: c}

			err := r.removeApplication(ctx, read, tc.deleteVM)
			var got want
			got.Refused = write.Stale(err)
			if err != nil && !got.Refused {
				t.Fatalf("removeApplication: %v", err)
			}
			after := &argoapp.Application{}
			switch err := c.Get(ctx, client.ObjectKeyFromObject(app), after); {
			case apierrors.IsNotFound(err):
			case err != nil:
				t.Fatal(err)
			default:
				got.Exists, got.Deleting = true, after.DeletionTimestamp != nil
				got.Finalizers = slices.Clone(after.Finalizers)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got):\n%s", diff)
			}
		})
	}
}
