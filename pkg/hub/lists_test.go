package hub

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	synccommon "github.com/argoproj/gitops-engine/pkg/sync/common"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/argoapp"
	"github.com/fleetvm/fleetvm/pkg/argoapp/argoapptest"
)

func application(name string) *argov1alpha1.Application {
	return &argov1alpha1.Application{
		TypeMeta: metav1.TypeMeta{APIVersion: "argoproj.io/v1alpha1", Kind: "Application"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "argocd", ResourceVersion: "41", Generation: 1 << 40,
			Labels:     map[string]string{fleetv1alpha1.LabelPartOf: fleetv1alpha1.PartOfValue},
			Finalizers: []string{argov1alpha1.ResourcesFinalizerName},
			ManagedFields: []metav1.ManagedFieldsEntry{{
				Manager: "argocd-applicationset-controller", Operation: metav1.ManagedFieldsOperationUpdate,
				FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)},
			}},
		},
		Spec: argov1alpha1.ApplicationSpec{
			Project:     "fleetvm-bench",
			Destination: argov1alpha1.ApplicationDestination{Name: "cluster-0001", Namespace: "bench"},
			Source: &argov1alpha1.ApplicationSource{RepoURL: "https://charts.fleet.invalid", Helm: &argov1alpha1.ApplicationSourceHelm{
				ValuesObject: &runtime.RawExtension{Raw: []byte(`{"vm":{"spec":{"runStrategy":"Always","template":{"spec":{"domain":{"cpu":{"cores":2}}}}}}}`)},
			}},
		},
		Status: argov1alpha1.ApplicationStatus{
			Sync:   argov1alpha1.SyncStatus{Status: argov1alpha1.SyncStatusCodeSynced},
			Health: argov1alpha1.AppHealthStatus{Status: "Healthy"},
			OperationState: &argov1alpha1.OperationState{
				Phase: synccommon.OperationFailed, Message: "one resource failed",
				SyncResult: &argov1alpha1.SyncOperationResult{Resources: []*argov1alpha1.ResourceResult{
					{Name: "vm-1", Status: synccommon.ResultCodeSyncFailed, Message: "admission webhook denied the request"},
					{Name: "vm-1-data", Status: synccommon.ResultCodeSynced, Message: "created"},
				}},
			},
			Resources: []argov1alpha1.ResourceStatus{{Kind: "VirtualMachine", Name: "vm-1"}},
		},
	}
}

// decodedApplication is app as the hub's cache decodes it (argoapp).
func decodedApplication(t *testing.T, app *argov1alpha1.Application) *argoapp.Application {
	t.Helper()
	out, err := argoapptest.FromArgo(app)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// listJSON is a List response as the API server writes it.
func listJSON(t *testing.T, meta metav1.ListMeta, items ...client.Object) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationList", "metadata": meta, "items": items})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDecodeItemwise: a List decoded item by item holds the list metadata
// and, for each item, what the cache transform makes of the item decoded
// whole.
func TestDecodeItemwise(t *testing.T) {
	transform := CacheTransform(&argoapp.Application{})
	meta := metav1.ListMeta{ResourceVersion: "42", Continue: "next-page", RemainingItemCount: ptr.To(int64(7))}
	body := listJSON(t, meta, application("a"), application("b"))

	got, err := decodeItemwise(strings.NewReader(body), func() runtime.Object { return &argoapp.Application{} }, transform)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.ListMeta, meta) {
		t.Errorf("list metadata = %+v, want %+v", got.ListMeta, meta)
	}
	if len(got.Items) != 2 {
		t.Fatalf("%d items, want 2", len(got.Items))
	}
	for i, name := range []string{"a", "b"} {
		want, err := transform(decodedApplication(t, application(name)))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.Items[i], want) {
			t.Errorf("item %d = %+v\nwant %+v", i, got.Items[i], want)
		}
		app := got.Items[i].(*argoapp.Application)
		if app.ManagedFields != nil || app.Spec.Project != "fleetvm-bench" {
			t.Errorf("item %d: managed fields %v, project %q; want none and fleetvm-bench", i, app.ManagedFields, app.Spec.Project)
		}
		if op := app.Status.OperationState; op == nil || op.SyncResult == nil || len(op.SyncResult.Resources) != 1 || !op.SyncResult.Resources[0].Failed() {
			t.Errorf("item %d: sync result %+v, want only the resource that failed", i, op)
		}
		if app.Generation != 1<<40 {
			t.Errorf("item %d generation = %d, want %d (integers decoded as integers)", i, app.Generation, int64(1<<40))
		}
	}

	// No items, and items: null.
	for _, body := range []string{`{"kind":"ApplicationList","metadata":{"resourceVersion":"7"},"items":[]}`, `{"metadata":{"resourceVersion":"7"},"items":null}`} {
		got, err := decodeItemwise(strings.NewReader(body), func() runtime.Object { return &argoapp.Application{} }, transform)
		if err != nil || len(got.Items) != 0 || got.ResourceVersion != "7" {
			t.Errorf("decode %s = %+v, %v; want no items at resourceVersion 7", body, got, err)
		}
	}
	// What is not a List, or is cut short, is an error, not a shorter list.
	for _, body := range []string{``, `[]`, `{"items":{}}`, body[:len(body)/2], `{"items":[{"metadata":{"name":1}}]}`} {
		if got, err := decodeItemwise(strings.NewReader(body), func() runtime.Object { return &argoapp.Application{} }, transform); err == nil {
			t.Errorf("decode %.60q = %+v, want an error", body, got)
		}
	}
}

// TestItemwiseTransformsIdempotent: the kinds listed item by item go
// through their cache transform twice, once as listed and once as the
// informer stores them; the second pass changes nothing.
func TestItemwiseTransformsIdempotent(t *testing.T) {
	fvm := &fleetv1alpha1.FleetVirtualMachine{ObjectMeta: metav1.ObjectMeta{
		Name: "vm-1", Namespace: "bench", Labels: map[string]string{"app": "web"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
	}}
	appSet := &argoapp.ApplicationSet{
		ObjectMeta: metav1.ObjectMeta{
			Name: "fvm-bench.vm-1", Namespace: "argocd",
			Labels:      map[string]string{fleetv1alpha1.LabelFleetVMName: "vm-1", fleetv1alpha1.LabelFleetVMNamespace: "bench"},
			Annotations: map[string]string{"fleetvm.io/placement": "fvm-bench.vm-1"},
		},
		Spec: argoapp.ApplicationSetSpec{
			GoTemplate: true,
			Generators: []argoapp.ApplicationSetGenerator{{List: &argoapp.ListGenerator{Elements: []apiextensionsv1.JSON{{Raw: []byte(`{"environment":"prod","name":"cluster-0001"}`)}}}}},
		},
		Status: argoapp.ApplicationSetStatus{Conditions: []argoapp.ApplicationSetCondition{
			{Type: argoapp.ApplicationSetConditionErrorOccurred, Status: "False", Reason: "ApplicationSetUpToDate"},
			{Type: "ResourcesUpToDate", Status: "True", Reason: "ApplicationSetUpToDate"},
		}},
	}
	objs := map[string]client.Object{"Application": application("a"), "VMReport": report(), "FleetVirtualMachine": fvm, "ApplicationSet": appSet}
	for gvk := range itemwiseKinds {
		obj := objs[gvk.Kind]
		if obj == nil {
			t.Fatalf("no %s to test", gvk.Kind)
		}
		transform := CacheTransform(obj)
		once, err := transform(decoded(t, obj))
		if err != nil {
			t.Fatal(err)
		}
		snapshot := once.(client.Object).DeepCopyObject()
		twice, err := transform(once)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(twice, snapshot) {
			t.Errorf("%s: transformed twice = %+v\nonce = %+v", gvk.Kind, twice, snapshot)
		}
	}
}

// TestItemwiseScope: the hub's cache lists item by item the kinds it holds
// per FleetVM, in the namespace it caches them in, with their own
// transform; a kind cached by a selector or in several namespaces lists as
// before.
func TestItemwiseScope(t *testing.T) {
	opts := CacheOptions(&rest.Config{Host: "https://hub.invalid"}, "argocd")
	if opts.NewInformer == nil {
		t.Fatal("no item-wise lists with a config")
	}
	if CacheOptions(nil, "argocd").NewInformer != nil {
		t.Error("item-wise lists without a config")
	}
	scheme := Scheme()
	for gvk := range itemwiseKinds {
		ns, transform, ok := itemwiseScope(gvk, scheme, &opts)
		want := ""
		if gvk.Group == argov1alpha1.SchemeGroupVersion.Group {
			want = "argocd"
		}
		if !ok || ns != want || transform == nil {
			t.Errorf("%s: scope %q, transform %v, item-wise %v; want %q with a transform", gvk.Kind, ns, transform != nil, ok, want)
		}
	}

	app := argov1alpha1.SchemeGroupVersion.WithKind("Application")
	for name, by := range map[string]cache.ByObject{
		"two namespaces":          {Namespaces: map[string]cache.Config{"a": {}, "b": {}}},
		"a label":                 {Label: labels.Everything()},
		"a field":                 {Field: fields.Everything()},
		"a namespace's label":     {Namespaces: map[string]cache.Config{"a": {LabelSelector: labels.Everything()}}},
		"a namespace's field":     {Namespaces: map[string]cache.Config{"a": {FieldSelector: fields.Everything()}}},
		"a namespace's transform": {Namespaces: map[string]cache.Config{"a": {Transform: cache.TransformStripManagedFields()}}},
	} {
		o := cache.Options{ByObject: map[client.Object]cache.ByObject{&argoapp.Application{}: by}}
		if _, _, ok := itemwiseScope(app, scheme, &o); ok {
			t.Errorf("%s: listed item by item", name)
		}
	}
	if _, _, ok := itemwiseScope(app, scheme, &cache.Options{DefaultNamespaces: map[string]cache.Config{"a": {}}}); ok {
		t.Error("default namespaces: listed item by item")
	}
}
