package tenancy

import (
	"bytes"
	"encoding/json"
	"testing"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestClusterObjects(t *testing.T) {
	tenant := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: tenantVerbs},
		{APIGroups: []string{"cdi.kubevirt.io"}, Resources: []string{"datavolumes"}, Verbs: tenantVerbs},
		{APIGroups: []string{"kubevirt.io"}, Resources: []string{"virtualmachines"}, Verbs: tenantVerbs},
	}
	type object struct {
		Kind, Namespace, Name string
		Rules                 []rbacv1.PolicyRule
		Subjects              []rbacv1.Subject
	}
	sa := []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "team-a", Name: "fleetvm-tenant"}}
	base := []object{
		{Kind: "ServiceAccount", Namespace: "team-a", Name: "fleetvm-tenant"},
		{Kind: "Role", Namespace: "team-a", Name: "fleetvm-tenant", Rules: tenant},
		{Kind: "RoleBinding", Namespace: "team-a", Name: "fleetvm-tenant", Subjects: sa},
	}
	cases := map[string]struct {
		images []string
		want   []object
	}{
		"no image: no right in the image namespace (empty resourceNames would grant every name)": {
			want: base,
		},
		"images: clone rights for those names only": {
			images: []string{"team-a.win", "team-a.rhel", "team-a.win"},
			want: append(append([]object(nil), base...),
				object{Kind: "Role", Namespace: "fleetvm-images", Name: "fleetvm-tenant-team-a", Rules: []rbacv1.PolicyRule{{
					APIGroups: []string{"cdi.kubevirt.io"}, Resources: []string{"datavolumes/source"}, Verbs: []string{"create"},
					ResourceNames: []string{"team-a.rhel", "team-a.win"},
				}}},
				object{Kind: "RoleBinding", Namespace: "fleetvm-images", Name: "fleetvm-tenant-team-a", Subjects: sa}),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []object
			for _, o := range ClusterObjects("team-a", "fleetvm-images", DefaultKinds(), tc.images) {
				g := object{Kind: o.GetObjectKind().GroupVersionKind().Kind, Namespace: o.GetNamespace(), Name: o.GetName()}
				switch v := o.(type) {
				case *rbacv1.Role:
					g.Rules = v.Rules
				case *rbacv1.RoleBinding:
					g.Subjects = v.Subjects
					if v.RoleRef.Name != v.Name || v.RoleRef.Kind != "Role" {
						t.Errorf("RoleBinding %s binds %+v, want its own Role", v.Name, v.RoleRef)
					}
				}
				if o.GetLabels()[LabelNamespace] != "team-a" {
					t.Errorf("%s %s: labels %v", g.Kind, g.Name, o.GetLabels())
				}
				got = append(got, g)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want,+got)\n%s", diff)
			}
		})
	}
}

// asArgo is p as Argo CD's AppProject type reads it; a field Argo CD's
// type does not know fails the test.
func asArgo(t *testing.T, p *unstructured.Unstructured) *argov1alpha1.AppProject {
	t.Helper()
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	out := &argov1alpha1.AppProject{}
	if err := dec.Decode(out); err != nil {
		t.Fatalf("Argo CD's AppProject does not read FleetVM's: %v\n%s", err, data)
	}
	return out
}

func TestProjectNamesTheServiceAccount(t *testing.T) {
	p := asArgo(t, Project("argocd", "team-a", DefaultKinds(), nil))
	want := "team-a:fleetvm-tenant"
	if got := p.Spec.DestinationServiceAccounts; len(got) != 1 || got[0].Server != "*" || got[0].Namespace != "team-a" || got[0].DefaultServiceAccount != want {
		t.Errorf("destinationServiceAccounts = %+v, want server *, namespace team-a, %s", got, want)
	}
	if got := ServiceAccountUser("team-a"); got != "system:serviceaccount:team-a:fleetvm-tenant" {
		t.Errorf("ServiceAccountUser = %q", got)
	}
}

// TestProjectConfinesToItsNamespace: as Argo CD reads the project FleetVM
// makes, it lets Applications deploy only into the namespace, only the
// kinds given, nothing cluster-scoped, and serves only that namespace.
func TestProjectConfinesToItsNamespace(t *testing.T) {
	p := asArgo(t, Project("argocd", "team-a", DefaultKinds(), map[string]string{LabelNamespace: "team-a"}))
	if p.Name != "fleetvm-team-a" || p.Namespace != "argocd" || p.Labels[LabelNamespace] != "team-a" {
		t.Errorf("project %s/%s labels %v", p.Namespace, p.Name, p.Labels)
	}
	if diff := cmp.Diff([]argov1alpha1.ApplicationDestination{{Server: "*", Name: "*", Namespace: "team-a"}}, p.Spec.Destinations); diff != "" {
		t.Errorf("destinations (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(DefaultKinds(), p.Spec.NamespaceResourceWhitelist); diff != "" {
		t.Errorf("namespaced kinds (-want +got):\n%s", diff)
	}
	if len(p.Spec.ClusterResourceWhitelist) != 0 {
		t.Errorf("cluster-scoped kinds allowed: %v", p.Spec.ClusterResourceWhitelist)
	}
	if diff := cmp.Diff([]string{"team-a"}, p.Spec.SourceNamespaces); diff != "" {
		t.Errorf("source namespaces (-want +got):\n%s", diff)
	}
}

// TestServesNamespaceAsArgoCD: which namespaces a project serves, by its
// spec.sourceNamespaces, is what Argo CD's own rule says
// (AppProject.IsAppNamespacePermitted): exact names, globs, regular
// expressions between slashes, and patterns that do not compile.
func TestServesNamespaceAsArgoCD(t *testing.T) {
	patterns := [][]string{
		nil,
		{"team-a"},
		{"team-*"},
		{"*"},
		{"team-?"},
		{"/^team-[ab]$/"},
		{"/team/"},
		{"/(/"},
		{"["},
		{"other", "team-{a,b}"},
		{"!team-a"},
	}
	namespaces := []string{"team-a", "team-b", "team-ab", "teams", "other", "", "x-team-a"}
	for _, list := range patterns {
		p := NewAppProject()
		if list != nil {
			if err := unstructured.SetNestedStringSlice(p.Object, list, "spec", "sourceNamespaces"); err != nil {
				t.Fatal(err)
			}
		}
		argo := asArgo(t, p)
		for _, ns := range namespaces {
			want := ns != "" && argo.IsAppNamespacePermitted(&argov1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: ns}}, "argocd")
			if got := ServesNamespace(p, ns); got != want {
				t.Errorf("sourceNamespaces %q, namespace %q: serves %v, Argo CD says %v", list, ns, got, want)
			}
		}
	}
}
