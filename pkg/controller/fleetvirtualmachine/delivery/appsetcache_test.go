package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/argoapp"
	"github.com/fleetvm/fleetvm/pkg/write"
)

// asStored is appSet as the hub reads it back from the API server, with
// the status Argo CD's ApplicationSet controller wrote (status, in Argo
// CD's type): the server keeps a custom resource as JSON objects (keys
// sorted, what it does not know pruned) and the hub decodes that into its
// type.
func asStored(t *testing.T, appSet *argoapp.ApplicationSet, status argov1alpha1.ApplicationSetStatus) *argoapp.ApplicationSet {
	t.Helper()
	data, err := json.Marshal(appSet)
	if err != nil {
		t.Fatal(err)
	}
	var stored map[string]any
	if err := json.Unmarshal(data, &stored); err != nil {
		t.Fatal(err)
	}
	if data, err = json.Marshal(status); err != nil {
		t.Fatal(err)
	}
	var st map[string]any
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	stored["status"] = st
	if data, err = json.Marshal(stored); err != nil {
		t.Fatal(err)
	}
	out := &argoapp.ApplicationSet{}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTrimmedApplicationSetKnowsItsSpec: the cache keeps an
// ApplicationSet without its spec, and FleetVM still reads its targets
// and tells, for every kind of ApplicationSet it renders, that the one it
// wrote holds what it renders (so nothing is written, nothing read
// again) and that one rendered otherwise does not.
func TestTrimmedApplicationSetKnowsItsSpec(t *testing.T) {
	r, cases := everyKindOfApplicationSet()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fvm := &fleetv1alpha1.FleetVirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}, Spec: tc.spec}
			want, err := r.ApplicationSet(fvm, "fleetvm-team-a", tc.targets)
			if err != nil {
				t.Fatal(err)
			}
			stored := asStored(t, want, argov1alpha1.ApplicationSetStatus{
				Conditions: []argov1alpha1.ApplicationSetCondition{
					{Type: argov1alpha1.ApplicationSetConditionResourcesUpToDate, Status: argov1alpha1.ApplicationSetConditionStatusTrue, Reason: "ApplicationSetUpToDate", Message: "All applications have been generated successfully"},
					{Type: argov1alpha1.ApplicationSetConditionErrorOccurred, Status: argov1alpha1.ApplicationSetConditionStatusTrue, Reason: argov1alpha1.ApplicationSetReasonApplicationValidationError, Message: "cluster prod-b not found"},
				},
				Resources: []argov1alpha1.ResourceStatus{{Kind: "Application", Name: "web.prod-a", Status: "Synced"}},
			})
			obj, err := TrimApplicationSet(stored.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			cached := obj.(*argoapp.ApplicationSet)
			if !cmp.Equal(cached.Spec, argoapp.ApplicationSetSpec{}) {
				t.Errorf("the cached copy keeps its spec: %+v", cached.Spec)
			}
			if len(cached.Status.Conditions) != 1 || !SetAside(cached) {
				t.Errorf("cached status %+v, want only the ErrorOccurred condition, still read as set aside", cached.Status)
			}
			if diff := cmp.Diff(Targets(stored), Targets(cached)); diff != "" || len(Targets(cached)) != len(tc.targets) {
				t.Errorf("targets of the cached copy (-stored +cached):\n%s", diff)
			}

			full, ok := FullApplicationSet(cached, &want.Spec)
			if !ok {
				t.Fatal("the cached copy of what FleetVM wrote does not hold what it renders: every reconcile would read it again")
			}
			if diff := cmp.Diff(stored.Spec, full.Spec); diff != "" {
				t.Errorf("spec given back for the comparison (-stored +given):\n%s", diff)
			}
			if diff := cmp.Diff(stored.ObjectMeta, full.ObjectMeta); diff != "" {
				t.Errorf("metadata given back for the comparison, the cache's annotation still on it? (-stored +given):\n%s", diff)
			}
			if _, _, held := cached.Held(); !held {
				t.Errorf("giving back the full copy made the cached copy whole")
			}
			if cached.Labels != nil || cached.Annotations != nil {
				t.Errorf("the cached copy keeps its label or annotation map: %v, %v", cached.Labels, cached.Annotations)
			}
			if diff := cmp.Diff(stored.Labels, cached.GetLabels()); diff != "" || len(stored.Labels) == 0 {
				t.Errorf("labels of the cached copy (-stored +cached):\n%s", diff)
			}
			if diff := cmp.Diff(stored.Annotations, cached.GetAnnotations()); diff != "" || len(stored.Annotations) == 0 {
				t.Errorf("annotations of the cached copy (-stored +cached):\n%s", diff)
			}
			if key, ok := OwnerKey(cached); !ok || key != client.ObjectKeyFromObject(fvm) {
				t.Errorf("the cached copy's owner = %v, %v; want %v", key, ok, client.ObjectKeyFromObject(fvm))
			}

			for what, change := range map[string]func(*argoapp.ApplicationSetSpec){
				"template": func(s *argoapp.ApplicationSetSpec) { s.Template.Spec.Destination.Namespace = "elsewhere" },
				"targets": func(s *argoapp.ApplicationSetSpec) {
					s.Generators[0].List.Elements = append(s.Generators[0].List.Elements, apiextensionsv1.JSON{Raw: []byte(`{"environment":"prod","name":"prod-c"}`)})
				},
				"sync policy":     func(s *argoapp.ApplicationSetSpec) { s.SyncPolicy.PreserveResourcesOnDeletion = false },
				"differences":     func(s *argoapp.ApplicationSetSpec) { s.IgnoreApplicationDifferences = nil },
				"template patch":  func(s *argoapp.ApplicationSetSpec) { s.TemplatePatch = ptr.To("{}") },
				"go template off": func(s *argoapp.ApplicationSetSpec) { s.GoTemplate = false },
			} {
				changed := want.Spec.DeepCopy()
				change(changed)
				if _, ok := FullApplicationSet(cached, changed); ok {
					t.Errorf("a cached copy holding another %s passes for the rendered one: a change would never be written", what)
				}
			}
		})
	}
}

// TestFullApplicationSetOfAnUntrimmedCopy: an ApplicationSet read past the
// cache (a test's client, the API server) is compared as it is.
func TestFullApplicationSetOfAnUntrimmedCopy(t *testing.T) {
	got := &argoapp.ApplicationSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "argocd"}}
	got.Spec.Template.Spec.Project = "p"
	full, ok := FullApplicationSet(got, &argoapp.ApplicationSetSpec{})
	if !ok || full != got {
		t.Errorf("FullApplicationSet of an untrimmed copy = %v, %v; want it back as it is", full, ok)
	}
}

// TestHoldsRenderedIsWhereEnsureWritesNothing: for every kind of
// ApplicationSet FleetVM renders, the cached copy of the one write.Ensure
// created holds what FleetVM renders again (HoldsRendered), and Ensure
// agrees: it writes nothing. A copy missing anything FleetVM renders
// (spec, label, annotation, finalizer, owner reference) does not pass,
// and Ensure writes it.
func TestHoldsRenderedIsWhereEnsureWritesNothing(t *testing.T) {
	ctx := context.Background()
	r, cases := everyKindOfApplicationSet()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fvm := &fleetv1alpha1.FleetVirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", UID: "fvm-uid"}, Spec: tc.spec}
			render := func() *argoapp.ApplicationSet {
				t.Helper()
				want, err := r.ApplicationSet(fvm, "fleetvm-team-a", tc.targets)
				if err != nil {
					t.Fatal(err)
				}
				want.Finalizers = []string{ProtectionFinalizer}
				return want
			}
			scheme := runtime.NewScheme()
			utilruntime.Must(argoapp.AddToScheme(scheme))
			c := fake.NewClientBuilder().WithScheme(scheme).Build()
			if out, err := write.Ensure(ctx, c, render(), nil); err != nil || out != write.Created {
				t.Fatalf("create = %v, %v", out, err)
			}
			cachedCopy := func(change func(*argoapp.ApplicationSet)) *argoapp.ApplicationSet {
				t.Helper()
				stored := render()
				if err := c.Get(ctx, client.ObjectKeyFromObject(stored), stored); err != nil {
					t.Fatal(err)
				}
				change(stored)
				obj, err := TrimApplicationSet(stored)
				if err != nil {
					t.Fatal(err)
				}
				return obj.(*argoapp.ApplicationSet)
			}
			ensure := func(cached *argoapp.ApplicationSet, want *argoapp.ApplicationSet) write.Outcome {
				t.Helper()
				full, ok := FullApplicationSet(cached, &want.Spec)
				if !ok {
					return write.Updated // the spec differs: Ensure reads it whole and writes
				}
				// A client that refuses every write: the outcome is what
				// Ensure would do, the fake keeps what was created.
				out, err := write.Ensure(ctx, refuseWrites{c}, want, full)
				if err != nil && !errors.Is(err, errRefused) {
					t.Fatal(err)
				}
				if err != nil {
					return write.Updated
				}
				return out
			}

			cached := cachedCopy(func(*argoapp.ApplicationSet) {})
			if !HoldsRendered(cached, render()) {
				t.Fatal("the cached copy of what FleetVM wrote does not hold what it renders: every restart compares it whole")
			}
			if out := ensure(cached, render()); out != write.Unchanged {
				t.Fatalf("Ensure of what HoldsRendered passes = %v, want %v", out, write.Unchanged)
			}
			if _, _, held := cached.Held(); !held {
				t.Fatal("the cached copy is not held")
			}
			if HoldsRendered(cached.Unhold(&render().Spec), render()) {
				t.Error("a copy that was never held passes: only a held copy's digest is known")
			}

			for what, change := range map[string]func(stored, want *argoapp.ApplicationSet){
				"a label changed":       func(s, _ *argoapp.ApplicationSet) { s.Labels[fleetv1alpha1.LabelFleetVMName] = "other" },
				"an annotation removed": func(s, _ *argoapp.ApplicationSet) { delete(s.Annotations, PlacementAnnotation) },
				"its finalizer removed": func(s, _ *argoapp.ApplicationSet) { s.Finalizers = nil },
				"its spec edited":       func(s, _ *argoapp.ApplicationSet) { s.Spec.SyncPolicy.PreserveResourcesOnDeletion = false },
				"a label FleetVM adds":  func(_, w *argoapp.ApplicationSet) { w.Labels["fleetvm.io/new"] = "x" },
				"an owner FleetVM adds": func(_, w *argoapp.ApplicationSet) {
					w.OwnerReferences = []metav1.OwnerReference{{APIVersion: "fleetvm.io/v1alpha1", Kind: "FleetVirtualMachine", Name: "web", UID: "fvm-uid"}}
				},
			} {
				want := render()
				cached := cachedCopy(func(s *argoapp.ApplicationSet) { change(s, want) })
				if HoldsRendered(cached, want) {
					t.Errorf("with %s, the cached copy passes for what FleetVM renders: nothing would be written", what)
				}
				if out := ensure(cached, want); out == write.Unchanged {
					t.Errorf("with %s, Ensure writes nothing either: the case tests nothing", what)
				}
			}
		})
	}
}

var errRefused = errors.New("refused")

// refuseWrites is a client whose writes fail with errRefused.
type refuseWrites struct{ client.Client }

func (refuseWrites) Patch(context.Context, client.Object, client.Patch, ...client.PatchOption) error {
	return errRefused
}

func (refuseWrites) Update(context.Context, client.Object, ...client.UpdateOption) error {
	return errRefused
}
