package tenancy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
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

func TestProjectNamesTheServiceAccount(t *testing.T) {
	p := Project("argocd", "team-a", DefaultKinds(), nil)
	want := "team-a:fleetvm-tenant"
	if got := p.Spec.DestinationServiceAccounts; len(got) != 1 || got[0].Server != "*" || got[0].Namespace != "team-a" || got[0].DefaultServiceAccount != want {
		t.Errorf("destinationServiceAccounts = %+v, want server *, namespace team-a, %s", got, want)
	}
	if got := ServiceAccountUser("team-a"); got != "system:serviceaccount:team-a:fleetvm-tenant" {
		t.Errorf("ServiceAccountUser = %q", got)
	}
}
