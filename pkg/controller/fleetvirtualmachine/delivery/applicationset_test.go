package delivery

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/argoapp"
	"github.com/fleetvm/fleetvm/pkg/diskimage"
)

// TestKubevirtFilledFields: Argo CD leaves out of its diff exactly the
// fields KubeVirt fills in that the VM definition leaves empty.
func TestKubevirtFilledFields(t *testing.T) {
	all := []string{
		"/spec/template/spec/domain/firmware/uuid",
		"/spec/template/spec/domain/firmware/serial",
		"/spec/template/spec/domain/machine/type",
		"/spec/template/spec/architecture",
		"/spec/template/metadata/annotations/kubevirt.io~1pci-topology-version",
		"/spec/instancetype/revisionName",
		"/spec/preference/revisionName",
	}
	ignore := func(pointers ...string) []argoapp.ResourceIgnoreDifferences {
		return []argoapp.ResourceIgnoreDifferences{{Group: "kubevirt.io", Kind: "VirtualMachine", JSONPointers: pointers}}
	}
	cases := map[string]struct {
		vm   string // the VM definition; empty: a git source, unknown
		want []argoapp.ResourceIgnoreDifferences
	}{
		"git source: every field KubeVirt fills in": {want: ignore(all...)},
		"template setting none of them": {
			vm:   `{"spec":{"template":{"spec":{"domain":{"cpu":{"cores":1}}}}}}`,
			want: ignore(all...),
		},
		"firmware with a bootloader only: uuid and serial still KubeVirt's": {
			vm:   `{"spec":{"template":{"spec":{"domain":{"firmware":{"bootloader":{"efi":{}}}}}}}}`,
			want: ignore(all...),
		},
		"fields the template sets stay compared": {
			vm: `{"spec":{"template":{"metadata":{"annotations":{"kubevirt.io/pci-topology-version":"v3"}},
				"spec":{"architecture":"amd64","domain":{"firmware":{"serial":"S-1"},"machine":{"type":"pc-q35-rhel9.6.0"}}}}}}`,
			want: ignore(
				"/spec/template/spec/domain/firmware/uuid",
				"/spec/instancetype/revisionName",
				"/spec/preference/revisionName",
			),
		},
		"null is not set": {
			vm:   `{"spec":{"template":{"spec":{"domain":{"firmware":{"uuid":null}}}}}}`,
			want: ignore(all...),
		},
		"template setting all of them: nothing ignored": {
			vm: `{"spec":{"instancetype":{"name":"u1.small","revisionName":"r1"},"preference":{"name":"rhel.9","revisionName":"r2"},
				"template":{"metadata":{"annotations":{"kubevirt.io/pci-topology-version":"v3"}},
				"spec":{"architecture":"amd64","domain":{"firmware":{"uuid":"u","serial":"s"},"machine":{"type":"q35"}}}}}}`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var vm map[string]any
			if tc.vm != "" {
				if err := json.Unmarshal([]byte(tc.vm), &vm); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(tc.want, KubevirtFilledFields(vm)); diff != "" {
				t.Errorf("KubevirtFilledFields (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestApplicationTemplateIgnoresKubevirtFields: every Application an
// ApplicationSet makes, inline template or git source, tells Argo CD to
// leave KubeVirt's firmware uuid and serial out of the diff, and only
// with ignoreDifferences: the sync options do not make a sync keep live
// values over the source's.
func TestApplicationTemplateIgnoresKubevirtFields(t *testing.T) {
	inline := &runtime.RawExtension{Raw: []byte(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine",
		"spec":{"template":{"spec":{"domain":{"machine":{"type":"q35"},"memory":{"guest":"1Gi"}}}}}}`)}
	cases := map[string]fleetv1alpha1.FleetVirtualMachineSpec{
		"inline": {Template: inline, RunStrategy: fleetv1alpha1.RunStrategyAlways},
		"git kustomize": {
			Source:      &fleetv1alpha1.GitSource{RepoURL: "https://git.example/vms.git", Path: "vm/{{environment}}", TargetRevision: "main"},
			RunStrategy: fleetv1alpha1.RunStrategyAlways,
		},
		"git helm": {
			Source:      &fleetv1alpha1.GitSource{RepoURL: "https://git.example/vms.git", Path: "chart", Helm: &fleetv1alpha1.HelmOptions{}},
			RunStrategy: fleetv1alpha1.RunStrategyAlways,
		},
	}
	r := Renderer{ArgoNamespace: "argocd", ImageNamespace: diskimage.DefaultNamespace, Chart: ChartSource{RepoURL: "https://github.com/fleetvm/fleetvm.git", Path: "deploy/charts/fleetvm-vm", TargetRevision: "main"}}
	for name, spec := range cases {
		t.Run(name, func(t *testing.T) {
			fvm := &fleetv1alpha1.FleetVirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}, Spec: spec}
			appSet, err := r.ApplicationSet(fvm, "fleetvm-team-a", []Target{{Name: "prod-a", Environment: "prod"}})
			if err != nil {
				t.Fatal(err)
			}
			app := appSet.Spec.Template.Spec
			ignored := map[string]bool{}
			for _, d := range app.IgnoreDifferences {
				if d.Group != "kubevirt.io" || d.Kind != "VirtualMachine" || d.Name != "" || d.Namespace != "" {
					t.Errorf("ignoreDifferences entry for %s/%s %s/%s, want every kubevirt.io VirtualMachine", d.Group, d.Kind, d.Namespace, d.Name)
				}
				for _, p := range d.JSONPointers {
					ignored[p] = true
				}
			}
			for _, p := range []string{"/spec/template/spec/domain/firmware/uuid", "/spec/template/spec/domain/firmware/serial"} {
				if !ignored[p] {
					t.Errorf("ignoreDifferences %+v does not hold %s", app.IgnoreDifferences, p)
				}
			}
			if name == "inline" && ignored["/spec/template/spec/domain/machine/type"] {
				t.Errorf("the template sets the machine type, yet it is left out of the diff")
			}
			if slices.Contains(app.SyncPolicy.SyncOptions, "RespectIgnoreDifferences=true") {
				t.Errorf("sync options %v: a changed value in the source would never reach an existing VM", app.SyncPolicy.SyncOptions)
			}
		})
	}
}

// TestApplicationSetHoldsAMovingCopy: while a move holds a cluster's VM
// stopped, every element carries its run strategy and the template
// reads it; otherwise the ApplicationSet is as it always was.
func TestApplicationSetHoldsAMovingCopy(t *testing.T) {
	r := Renderer{ArgoNamespace: "argocd", ImageNamespace: "fleetvm-images", Chart: ChartSource{RepoURL: "https://example.com/fleetvm.git", Path: "deploy/charts/fleetvm-vm"}}
	fvm := &fleetv1alpha1.FleetVirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "vms"},
		Spec: fleetv1alpha1.FleetVirtualMachineSpec{RunStrategy: fleetv1alpha1.RunStrategyAlways,
			Template: &runtime.RawExtension{Raw: []byte(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","spec":{"template":{"spec":{"domain":{}}}}}`)}},
	}
	elements := func(a *argoapp.ApplicationSet) []map[string]string {
		var out []map[string]string
		for _, e := range a.Spec.Generators[0].List.Elements {
			m := map[string]string{}
			if err := json.Unmarshal(e.Raw, &m); err != nil {
				t.Fatal(err)
			}
			out = append(out, m)
		}
		return out
	}
	plain, err := r.ApplicationSet(fvm, "p", []Target{{Name: "a", Environment: "prod"}, {Name: "b", Environment: "prod"}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]map[string]string{{"name": "a", "environment": "prod"}, {"name": "b", "environment": "prod"}}, elements(plain)); diff != "" {
		t.Fatalf("elements without a hold (-want +got):\n%s", diff)
	}
	if n := len(plain.Spec.Template.Spec.Source.Helm.Parameters); n != 1 {
		t.Fatalf("%d Helm parameters without a hold, want 1 (cluster)", n)
	}

	held, err := r.ApplicationSet(fvm, "p", []Target{{Name: "a", Environment: "prod", RunStrategy: fleetv1alpha1.RunStrategyHalted, Hold: "uid-m1.Switching"}, {Name: "b", Environment: "prod"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []map[string]string{{"name": "a", "environment": "prod", "runStrategy": "Halted", "hold": "uid-m1.Switching"},
		{"name": "b", "environment": "prod", "runStrategy": "Always", "hold": ""}}
	if diff := cmp.Diff(want, elements(held)); diff != "" {
		t.Fatalf("elements with a hold (-want +got):\n%s", diff)
	}
	params := held.Spec.Template.Spec.Source.Helm.Parameters
	wantParams := []argoapp.HelmParameter{{Name: "vm.spec.runStrategy", Value: "{{.runStrategy}}"}, {Name: "hold", Value: "{{.hold}}", ForceString: true}}
	if diff := cmp.Diff(wantParams, params[len(params)-2:]); diff != "" {
		t.Fatalf("run strategy and hold parameters (-want +got):\n%s", diff)
	}
}

// TestApplicationSetImportsTheMovingDisks: the target of a Cold move gets
// the VM's dataVolumeTemplates reading from the source's export (the
// FleetDiskImage clone too: its disk was written since), through a
// parameter the fleetvm-vm chart applies; every other cluster renders its
// own definition.
func TestApplicationSetImportsTheMovingDisks(t *testing.T) {
	r := Renderer{ArgoNamespace: "argocd", ImageNamespace: "fleetvm-images", Chart: ChartSource{RepoURL: "https://example.com/fleetvm.git", Path: "deploy/charts/fleetvm-vm"}}
	fvm := &fleetv1alpha1.FleetVirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "vms"},
		Spec: fleetv1alpha1.FleetVirtualMachineSpec{RunStrategy: fleetv1alpha1.RunStrategyAlways,
			DiskImages: []fleetv1alpha1.DiskImageReference{{Name: "rhel9"}},
			Template: &runtime.RawExtension{Raw: []byte(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","spec":{
				"dataVolumeTemplates":[
					{"metadata":{"name":"db-root"},"spec":{"sourceRef":{"kind":"DataSource","name":"rhel9"},"storage":{"resources":{"requests":{"storage":"30Gi"}}}}},
					{"metadata":{"name":"db-data"},"spec":{"source":{"blank":{}},"storage":{"resources":{"requests":{"storage":"100Gi"}}}}}],
				"template":{"spec":{"domain":{}}}}}`)}},
	}
	imp := &Import{HeaderSecret: "h", CAConfigMap: "ca", URLs: map[string]string{
		"db-root": "https://proxy.a/api/export.kubevirt.io/v1beta1/namespaces/vms/virtualmachineexports/e/volumes/db-root/disk.img.gz",
		"db-data": "https://proxy.a/api/export.kubevirt.io/v1beta1/namespaces/vms/virtualmachineexports/e/volumes/db-data/disk.img.gz",
	}}
	a, err := r.ApplicationSet(fvm, "p", []Target{{Name: "a", Environment: "prod", RunStrategy: fleetv1alpha1.RunStrategyHalted},
		{Name: "b", Environment: "prod", RunStrategy: fleetv1alpha1.RunStrategyHalted, Import: imp}})
	if err != nil {
		t.Fatal(err)
	}
	params := a.Spec.Template.Spec.Source.Helm.Parameters
	if diff := cmp.Diff(argoapp.HelmParameter{Name: "dataVolumeTemplates", Value: "{{.dataVolumeTemplates}}", ForceString: true}, params[len(params)-1]); diff != "" {
		t.Fatalf("dataVolumeTemplates parameter (-want +got):\n%s", diff)
	}
	var els []map[string]string
	for _, e := range a.Spec.Generators[0].List.Elements {
		m := map[string]string{}
		if err := json.Unmarshal(e.Raw, &m); err != nil {
			t.Fatal(err)
		}
		els = append(els, m)
	}
	if v, ok := els[0]["dataVolumeTemplates"]; !ok || v != "" {
		t.Fatalf("the source's element: dataVolumeTemplates %q (present %v), want present and empty", v, ok)
	}
	raw, err := base64.StdEncoding.DecodeString(els[1]["dataVolumeTemplates"])
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	// CDI binds and imports at once, whatever the storage's binding
	// mode: the VM is held stopped, and no first consumer comes.
	immediate := map[string]any{"cdi.kubevirt.io/storage.bind.immediate.requested": "true"}
	want := []map[string]any{
		{"metadata": map[string]any{"name": "db-root", "annotations": immediate}, "spec": map[string]any{
			"source":  map[string]any{"http": map[string]any{"url": imp.URLs["db-root"], "secretExtraHeaders": []any{"h"}, "certConfigMap": "ca"}},
			"storage": map[string]any{"resources": map[string]any{"requests": map[string]any{"storage": "30Gi"}}}}},
		{"metadata": map[string]any{"name": "db-data", "annotations": immediate}, "spec": map[string]any{
			"source":  map[string]any{"http": map[string]any{"url": imp.URLs["db-data"], "secretExtraHeaders": []any{"h"}, "certConfigMap": "ca"}},
			"storage": map[string]any{"resources": map[string]any{"requests": map[string]any{"storage": "100Gi"}}}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("the target's dataVolumeTemplates (-want +got):\n%s", diff)
	}

	fromGit := fvm.DeepCopy()
	fromGit.Spec.Template, fromGit.Spec.Source = nil, &fleetv1alpha1.GitSource{RepoURL: "https://example.com/vms.git", Path: "db"}
	if _, err := r.ApplicationSet(fromGit, "p", []Target{{Name: "b", Import: imp}}); err == nil {
		t.Fatal("a VM from git rendered importing its disks")
	}
}

// TestApplicationSetRevisions: with spec.rollout, every element carries the
// revision its cluster is given and the chart values hold the VM of each
// revision other than the latest that a cluster is still given; without,
// the ApplicationSet is as it always was.
func TestApplicationSetRevisions(t *testing.T) {
	r := Renderer{ArgoNamespace: "argocd", Chart: ChartSource{RepoURL: "https://example.com/fleetvm.git", Path: "deploy/charts/fleetvm-vm"}}
	tmpl := func(mem string) *runtime.RawExtension {
		return &runtime.RawExtension{Raw: []byte(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","spec":{"runStrategy":"Halted","template":{"spec":{"domain":{"memory":{"guest":"` + mem + `"}}}}}}`)}
	}
	fvm := &fleetv1alpha1.FleetVirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "vms"},
		Spec: fleetv1alpha1.FleetVirtualMachineSpec{RunStrategy: fleetv1alpha1.RunStrategyAlways, Template: tmpl("2Gi"),
			Rollout: &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.All}},
		Status: fleetv1alpha1.FleetVirtualMachineStatus{Rollout: &fleetv1alpha1.RolloutStatus{Revision: 4, Hash: "h"}},
	}
	latest := RevisionOf(fvm, 4)
	old := &Revision{Number: 3, Template: tmpl("1Gi")}

	a, err := r.ApplicationSet(fvm, "p", []Target{{Name: "a", Revision: latest}, {Name: "b", Revision: old}})
	if err != nil {
		t.Fatal(err)
	}
	var els []map[string]string
	for _, e := range a.Spec.Generators[0].List.Elements {
		m := map[string]string{}
		if err := json.Unmarshal(e.Raw, &m); err != nil {
			t.Fatal(err)
		}
		els = append(els, m)
	}
	if diff := cmp.Diff([]map[string]string{{"name": "a", "environment": "", "revision": "4"}, {"name": "b", "environment": "", "revision": "3"}}, els); diff != "" {
		t.Errorf("elements (-want +got):\n%s", diff)
	}
	helm := a.Spec.Template.Spec.Source.Helm
	if !slices.Contains(helm.Parameters, argoapp.HelmParameter{Name: "revision", Value: "{{.revision}}", ForceString: true}) {
		t.Errorf("no revision parameter in %v", helm.Parameters)
	}
	var values struct {
		VM        map[string]any            `json:"vm"`
		Revisions map[string]map[string]any `json:"revisions"`
	}
	if err := json.Unmarshal(helm.ValuesObject.Raw, &values); err != nil {
		t.Fatal(err)
	}
	guest := func(vm map[string]any) any {
		return vm["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["domain"].(map[string]any)["memory"].(map[string]any)["guest"]
	}
	if guest(values.VM) != "2Gi" || len(values.Revisions) != 1 || guest(values.Revisions["3"]) != "1Gi" {
		t.Errorf("values: vm %v, revisions %v; want 2Gi and only revision 3 with 1Gi", guest(values.VM), values.Revisions)
	}
	if rs := values.Revisions["3"]["spec"].(map[string]any)["runStrategy"]; rs != "Always" {
		t.Errorf("revision 3's runStrategy %v, want the fleet's Always", rs)
	}

	// Every cluster on the latest: no other revision's VM in the values.
	a, err = r.ApplicationSet(fvm, "p", []Target{{Name: "a", Revision: latest}, {Name: "b", Revision: latest}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(a.Spec.Template.Spec.Source.Helm.ValuesObject.Raw), "revisions") {
		t.Errorf("values hold revisions with every cluster on the latest: %s", a.Spec.Template.Spec.Source.Helm.ValuesObject.Raw)
	}
	if _, err := r.ApplicationSet(fvm, "p", []Target{{Name: "a"}}); err == nil {
		t.Error("a target without a revision under spec.rollout was rendered")
	}

	// Without spec.rollout: no revision anywhere.
	plain := fvm.DeepCopy()
	plain.Spec.Rollout, plain.Status.Rollout = nil, nil
	a, err = r.ApplicationSet(plain, "p", []Target{{Name: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if raw := string(a.Spec.Generators[0].List.Elements[0].Raw); strings.Contains(raw, "revision") || len(a.Spec.Template.Spec.Source.Helm.Parameters) != 1 {
		t.Errorf("without spec.rollout: element %s, parameters %v", raw, a.Spec.Template.Spec.Source.Helm.Parameters)
	}

	// The hash follows the content, not the number.
	h1, _ := RevisionOf(fvm, 1).Hash()
	h2, _ := RevisionOf(fvm, 2).Hash()
	h3, _ := old.Hash()
	if h1 != h2 || h1 == h3 || len(h1) != 32 {
		t.Errorf("hashes %q %q %q: want the same for the same content, another for another", h1, h2, h3)
	}
}
