package delivery

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/argoproj/argo-cd/v3/applicationset/utils"
	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/argoapp"
	"github.com/fleetvm/fleetvm/test/appsetwrite"
)

// TestArgoCDLeavesARemovedApplicationToFleetVM runs the write Argo CD's
// ApplicationSet controller makes to each Application it generates (its
// own utils.CreateOrUpdate, test/appsetwrite) from FleetVM's
// ApplicationSet, on an Application FleetVM is removing: Argo CD's
// resources finalizer added so that Argo CD deletes the VM, released from
// the ApplicationSet when the FleetVirtualMachine is deleted, maybe
// deleted already.
//
// The controller still writes from that ApplicationSet while its cache
// has not seen it deleted (or, in a grace-period removal, not seen it
// drop the cluster). Its write must leave the finalizer and the release
// alone: without the finalizer the Application goes at once and its VM
// stays on the cluster, and the FleetVirtualMachine waits for that VM to
// go for ever; an owner reference put back has the garbage collector
// delete the Application with the ApplicationSet, VM left. The rest of
// the Application it still writes.
func TestArgoCDLeavesARemovedApplicationToFleetVM(t *testing.T) {
	const resources = argov1alpha1.ResourcesFinalizerName
	r := Renderer{ArgoNamespace: "argocd", Chart: ChartSource{RepoURL: "https://example.com/fleetvm.git", Path: "deploy/charts/fleetvm-vm"}}
	fvm := &fleetv1alpha1.FleetVirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "vms"},
		Spec: fleetv1alpha1.FleetVirtualMachineSpec{RunStrategy: fleetv1alpha1.RunStrategyAlways,
			Template: &runtime.RawExtension{Raw: []byte(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","spec":{"template":{"spec":{"domain":{}}}}}`)}},
	}
	appSet, err := r.ApplicationSet(fvm, "fleetvm-vms", []Target{{Name: "prod-a", Environment: "prod"}})
	if err != nil {
		t.Fatal(err)
	}
	appSet.UID = "appset-uid"
	generated := generate(t, appSet)
	owner := []metav1.OwnerReference{{
		APIVersion: argov1alpha1.SchemeGroupVersion.String(), Kind: "ApplicationSet", Name: appSet.Name, UID: appSet.UID,
		Controller: ptrTo(true), BlockOwnerDeletion: ptrTo(true),
	}}
	type want struct {
		Exists     bool
		Finalizers []string
		Owned      bool
		Project    string
	}
	cases := map[string]struct {
		removing func(app *argov1alpha1.Application)
		want     want
	}{
		"released, the resources finalizer added": {
			removing: func(app *argov1alpha1.Application) { app.Finalizers = []string{resources} },
			want:     want{Exists: true, Finalizers: []string{resources}, Project: "fleetvm-vms"},
		},
		"released and deleted, Argo CD about to remove the VM": {
			removing: func(app *argov1alpha1.Application) {
				app.Finalizers, app.DeletionTimestamp = []string{resources}, &metav1.Time{Time: metav1.Now().Time}
			},
			want: want{Exists: true, Finalizers: []string{resources}, Project: "fleetvm-vms"},
		},
		"still owned, the finalizer added (grace period over)": {
			removing: func(app *argov1alpha1.Application) { app.Finalizers, app.OwnerReferences = []string{resources}, owner },
			want:     want{Exists: true, Finalizers: []string{resources}, Owned: true, Project: "fleetvm-vms"},
		},
		"released, its spec changed: the spec is written again": {
			removing: func(app *argov1alpha1.Application) {
				app.Finalizers, app.Spec.Project = []string{resources}, "changed-by-hand"
			},
			want: want{Exists: true, Finalizers: []string{resources}, Project: "fleetvm-vms"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			scheme := runtime.NewScheme()
			utilruntime.Must(argov1alpha1.AddToScheme(scheme))
			app := generated.DeepCopy()
			tc.removing(app)
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(app).Build()

			if _, err := appsetwrite.Application(ctx, c, asArgo[argov1alpha1.ApplicationSet](t, appSet), *generated.DeepCopy()); err != nil {
				t.Fatalf("Argo CD's write: %v", err)
			}
			var got want
			after := &argov1alpha1.Application{}
			switch err := c.Get(ctx, client.ObjectKeyFromObject(app), after); {
			case apierrors.IsNotFound(err):
			case err != nil:
				t.Fatal(err)
			default:
				got = want{Exists: true, Finalizers: slices.Clone(after.Finalizers), Owned: metav1.IsControlledBy(after, appSet), Project: after.Spec.Project}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("the Application after Argo CD's write (-want,+got):\n%s", diff)
			}
		})
	}
}

// generate renders the ApplicationSet's one Application with Argo CD's
// template renderer, from its list generator's one element, as the
// ApplicationSet controller does.
func generate(t *testing.T, hubs *argoapp.ApplicationSet) *argov1alpha1.Application {
	t.Helper()
	appSet := asArgo[argov1alpha1.ApplicationSet](t, hubs)
	elements := appSet.Spec.Generators[0].List.Elements
	if len(elements) != 1 {
		t.Fatalf("%d elements, want 1", len(elements))
	}
	var params map[string]any
	if err := json.Unmarshal(elements[0].Raw, &params); err != nil {
		t.Fatal(err)
	}
	tmpl := appSet.Spec.Template
	app := &argov1alpha1.Application{
		ObjectMeta: metav1.ObjectMeta{Name: tmpl.Name, Namespace: tmpl.Namespace, Labels: tmpl.Labels,
			Annotations: tmpl.Annotations, Finalizers: tmpl.Finalizers},
		Spec: tmpl.Spec,
	}
	out, err := (&utils.Render{}).RenderTemplateParams(app, appSet.Spec.SyncPolicy, params, appSet.Spec.GoTemplate, appSet.Spec.GoTemplateOptions)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }
