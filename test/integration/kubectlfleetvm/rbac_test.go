package kubectlfleetvm

import (
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetvm/fleetvm/test/fleetenv"
)

// The permissions docs/user-guide/kubectl-plugin.md lists for move,
// drain and undrain. The tests run those commands impersonating a user
// who has these and nothing else, so the list is known to be enough; and
// where a command must write nothing, as a user who may not write at all.
var (
	// readDrain: drain without a write (the taint is there already),
	// drain --wait, and drain --dry-run with what explain reads for it.
	readDrain = []rbacv1.PolicyRule{
		{APIGroups: []string{"cluster.open-cluster-management.io"}, Resources: []string{"managedclusters", "managedclustersets"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"cluster.open-cluster-management.io"}, Resources: []string{"managedclustersetbindings", "addonplacementscores"}, Verbs: []string{"get"}},
		{APIGroups: []string{"fleetvm.io"}, Resources: []string{"fleetvirtualmachines", "fleetvirtualmachinemoves"}, Verbs: []string{"list"}},
	}
	// writeDrain: drain and undrain.
	writeDrain = append([]rbacv1.PolicyRule{
		{APIGroups: []string{"cluster.open-cluster-management.io"}, Resources: []string{"managedclusters"}, Verbs: []string{"patch"}},
	}, readDrain...)
	// moveRules: move and move --wait, in one namespace.
	moveRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"fleetvm.io"}, Resources: []string{"fleetvirtualmachines"}, Verbs: []string{"get"}},
		{APIGroups: []string{"fleetvm.io"}, Resources: []string{"fleetvirtualmachinemoves"}, Verbs: []string{"create", "list", "watch"}},
	}
)

// grantCluster gives user the rules on the whole hub; the user is
// impersonated with --as.
func grantCluster(t *testing.T, user string, rules []rbacv1.PolicyRule) {
	t.Helper()
	name := "kubectl-fleetvm-test-" + user
	createRBAC(t, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules})
	createRBAC(t, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	})
	waitAllowed(t, "", user, rules)
}

// grantNamespace gives user the rules in one namespace only.
func grantNamespace(t *testing.T, ns, user string, rules []rbacv1.PolicyRule) {
	t.Helper()
	name := "kubectl-fleetvm-test-" + user
	createRBAC(t, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules})
	createRBAC(t, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	})
	waitAllowed(t, ns, user, rules)
}

// waitAllowed waits until the API server's authorizer, which reads RBAC
// from a cache, lets user do everything rules allow: a command run right
// after the grant could otherwise be refused.
func waitAllowed(t *testing.T, ns, user string, rules []rbacv1.PolicyRule) {
	t.Helper()
	err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		for _, r := range rules {
			for _, resource := range r.Resources {
				for _, verb := range r.Verbs {
					sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
						User: user,
						ResourceAttributes: &authorizationv1.ResourceAttributes{
							Namespace: ns, Group: r.APIGroups[0], Resource: resource, Verb: verb,
						},
					}}
					if err := fleet.Hub.Client.Create(t.Context(), sar); err != nil || !sar.Status.Allowed {
						return false, err
					}
				}
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("%s never got the rights granted: %v", user, err)
	}
}

func createRBAC(t *testing.T, obj client.Object) {
	t.Helper()
	if err := fleet.Hub.Client.Create(t.Context(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}
