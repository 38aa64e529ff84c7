package delivery

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/argoapp"
)

// asArgo is v, a value of the hub's Argo CD types (package argoapp), as
// Argo CD's own type T reads its JSON. It fails the test when the JSON
// holds a field T does not know (a name misspelt in argoapp) or when T,
// written back as JSON, reads as other than v (a field Argo CD would
// drop or change).
func asArgo[T any](t *testing.T, v any) *T {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	out := new(T)
	if err := dec.Decode(out); err != nil {
		t.Fatalf("Argo CD's %T does not read the hub's %T: %v\n%s", out, v, err, data)
	}
	back, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	again := reflectNew(v)
	if err := json.Unmarshal(back, again); err != nil {
		t.Fatal(err)
	}
	if reflect.TypeOf(v).Kind() != reflect.Pointer {
		again = reflect.ValueOf(again).Elem().Interface()
	}
	// What a cached copy holds (argoapp.ApplicationSet.Hold) is no field.
	if diff := cmp.Diff(v, again, cmpopts.IgnoreUnexported(argoapp.ApplicationSet{})); diff != "" {
		t.Fatalf("the hub's %T through Argo CD's %T (-hub +through Argo CD):\n%s", v, out, diff)
	}
	return out
}

// reflectNew is a new value of v's type to decode into: a pointer to
// it, or for a pointer a new one of the same type.
func reflectNew(v any) any {
	typ := reflect.TypeOf(v)
	if typ.Kind() == reflect.Pointer {
		return reflect.New(typ.Elem()).Interface()
	}
	return reflect.New(typ).Interface()
}

// TestApplicationSetIsArgoCDs: every kind of ApplicationSet FleetVM
// renders, in the hub's own type (argoapp: fleetvm-hub does not link
// Argo CD's module), is read by Argo CD's type field for field, and
// written back by it unchanged. The other tests of this package run Argo
// CD's own rendering and diffing on what asArgo gives.
func TestApplicationSetIsArgoCDs(t *testing.T) {
	r, cases := everyKindOfApplicationSet()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fvm := &fleetv1alpha1.FleetVirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}, Spec: tc.spec}
			appSet, err := r.ApplicationSet(fvm, "fleetvm-team-a", tc.targets)
			if err != nil {
				t.Fatal(err)
			}
			argo := asArgo[argov1alpha1.ApplicationSet](t, appSet)
			if argo.Spec.Template.Spec.Project != "fleetvm-team-a" || len(argo.Spec.Generators) != 1 || argo.Spec.Generators[0].List == nil {
				t.Errorf("Argo CD reads project %q and generators %+v", argo.Spec.Template.Spec.Project, argo.Spec.Generators)
			}
		})
	}
}

// appSetCase is a FleetVirtualMachine's spec and the clusters it is
// delivered to: one kind of ApplicationSet FleetVM renders.
type appSetCase struct {
	spec    fleetv1alpha1.FleetVirtualMachineSpec
	targets []Target
}

// everyKindOfApplicationSet are the kinds of ApplicationSet FleetVM
// renders: an inline template (the fleetvm-vm chart) on clusters, on
// none, with a copy a move holds, with a manual sync; a git source with
// kustomize, its options, a held copy; a git source with Helm.
func everyKindOfApplicationSet() (Renderer, map[string]appSetCase) {
	r := Renderer{ArgoNamespace: "argocd", ImageNamespace: "fleetvm-images", Chart: ChartSource{RepoURL: "https://example.com/fleetvm.git", Path: "deploy/charts/fleetvm-vm", TargetRevision: "main"}}
	inline := fleetv1alpha1.FleetVirtualMachineSpec{RunStrategy: fleetv1alpha1.RunStrategyAlways,
		Template: &runtime.RawExtension{Raw: []byte(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","spec":{"template":{"metadata":{"labels":{"app":"a<b>&c"}},` +
			`"spec":{"domain":{"cpu":{"cores":2},"memory":{"guest":"1.5Gi"},"firmware":{"serial":"S-1"}},"volumes":[{"name":"root","containerDisk":{"image":"quay.io/containerdisks/fedora:41"}}]}}}}`)}}
	manual := inline
	manual.Delivery.SyncMode = fleetv1alpha1.SyncModeManual
	kustomize := &fleetv1alpha1.GitSource{RepoURL: "https://git.example/vms.git", Path: "vm/{{environment}}", TargetRevision: "v1.2",
		Kustomize: &fleetv1alpha1.KustomizeOptions{NamePrefix: "team-", CommonLabels: map[string]string{"tier": "web"}}}
	held := Target{Name: "prod-a", Environment: "prod", RunStrategy: fleetv1alpha1.RunStrategyHalted, Hold: "uid-m1.Switching"}
	return r, map[string]appSetCase{
		"inline template":                        {spec: inline, targets: []Target{{Name: "prod-a", Environment: "prod"}, {Name: "prod-b", Environment: "prod"}}},
		"inline template, no target left":        {spec: inline},
		"inline template, a move holding a copy": {spec: inline, targets: []Target{held, {Name: "prod-b", Environment: "prod"}}},
		"inline template, manual sync":           {spec: manual, targets: []Target{{Name: "prod-a", Environment: "prod"}}},
		"git kustomize": {spec: fleetv1alpha1.FleetVirtualMachineSpec{RunStrategy: fleetv1alpha1.RunStrategyManual,
			Source: &fleetv1alpha1.GitSource{RepoURL: "https://git.example/vms.git", Path: "vm/{{environment}}", TargetRevision: "v1.2"}},
			targets: []Target{{Name: "edge-1", Environment: "edge"}}},
		"git kustomize with options, a copy held": {spec: fleetv1alpha1.FleetVirtualMachineSpec{RunStrategy: fleetv1alpha1.RunStrategyAlways, Source: kustomize},
			targets: []Target{held}},
		"git helm": {spec: fleetv1alpha1.FleetVirtualMachineSpec{RunStrategy: fleetv1alpha1.RunStrategyAlways,
			Source: &fleetv1alpha1.GitSource{RepoURL: "https://git.example/vms.git", Path: "chart", Helm: &fleetv1alpha1.HelmOptions{ValueFiles: []string{"values-{{environment}}.yaml"}, Values: "replicas: 1\n"}}},
			targets: []Target{{Name: "prod-a", Environment: "prod"}}},
	}
}
