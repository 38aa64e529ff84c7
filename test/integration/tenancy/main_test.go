// Package tenancy is FleetVM's red-team suite of tenant isolation: users
// who hold only namespace rights (impersonated, under the hub's real RBAC
// authorizer) try to reach past their namespace through FleetVM, and every
// attempt must be refused with a message that names the field and the
// reason, or be confined: nothing lands outside the namespace, on a
// cluster the namespace may not use, or under an Argo CD project it may
// not name. The fleet is real but for Argo CD and KubeVirt: a hub and two
// spokes on real API servers (prod-a in the default cluster set, secure-a
// in the set "restricted", never bound to a team), the real OCM scheduler
// and work agents, fleetvm-hub and its webhooks, the agents with the
// KubeVirt simulator, and the delivery stand-in, which checks every object
// against its Application's AppProject as Argo CD's sync does. The spokes
// authorize clones as CDI and KubeVirt do (fleetenv.InstallCloneAuthorization),
// so the account Argo CD syncs a team as is checked on the clusters.
package tenancy

import (
	"context"
	"os"
	"testing"
	"time"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/test/agenttest"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/fleetrun"
)

const (
	argoNS = "argocd"
	wait   = 60 * time.Second
)

var (
	fleet   *fleetenv.Fleet
	fleetVM *fleetrun.FleetVM
	// alice may manage FleetVirtualMachines and FleetDiskImages in team-a,
	// bob in team-b; hubUser holds fleetvm-hub's ClusterRole as generated
	// (deploy/rbac/role.yaml). Each is an impersonated client of the hub.
	alice, bob, hubUser client.Client
)

// TestMain starts the fleet (a hub, spokes prod-a and secure-a with work
// agents, fleetvm-hub's admission webhooks), FleetVM on it, and the
// tenants.
func TestMain(m *testing.M) {
	os.Exit(fleetrun.Main(m, fleetrun.Suite{
		Fleet:    fleetenv.Options{Spokes: []string{"prod-a", "secure-a"}, WorkAgents: true},
		Webhooks: true,
		Setup: func(ctx context.Context, f *fleetenv.Fleet) (func() error, error) {
			fleet = f
			err := setup(ctx, f)
			return func() error {
				if fleetVM != nil {
					fleetVM.Wait()
				}
				return nil
			}, err
		},
	}))
}

// setup registers the clusters, starts FleetVM, and does what a hub
// operator does for two teams: their namespaces with the default cluster
// set bound, and a Role that lets each manage FleetVirtualMachines and
// FleetDiskImages there, nothing more. The operator also has an Argo CD
// project for platform admins (anything, anywhere; it serves namespace
// "platform") and one shared with team-a (namespace team-a only).
func setup(ctx context.Context, f *fleetenv.Fleet) error {
	for _, c := range []fleetenv.ManagedCluster{
		{Name: "prod-a", Labels: map[string]string{"env": "prod"}},
		{Name: "secure-a", Labels: map[string]string{"env": "prod"}, ClusterSet: "restricted"},
	} {
		if err := f.RegisterManagedCluster(ctx, c); err != nil {
			return err
		}
		if _, err := f.Spoke(c.Name).CreateNode(ctx, fleetenv.Node{Name: c.Name + "-node-1", CPU: "16", Memory: "64Gi"}); err != nil {
			return err
		}
	}
	var err error
	fleetVM, err = fleetrun.Run(ctx, f, fleetrun.Options{ArgoNamespace: argoNS, Logger: agenttest.Logger(), CapacityDebounce: 200 * time.Millisecond})
	if err != nil {
		return err
	}
	for user, ns := range map[string]string{"alice": "team-a", "bob": "team-b"} {
		if err := f.Hub.Tenant(ctx, ns); err != nil {
			return err
		}
		if err := grantNamespace(ctx, f.Hub.Client, user, ns); err != nil {
			return err
		}
	}
	if alice, err = impersonate(f, "alice"); err != nil {
		return err
	}
	if bob, err = impersonate(f, "bob"); err != nil {
		return err
	}
	if hubUser, err = hubIdentity(ctx, f); err != nil {
		return err
	}
	for _, p := range []*argov1alpha1.AppProject{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "platform-admin", Namespace: argoNS},
			Spec: argov1alpha1.AppProjectSpec{
				SourceRepos: []string{"*"}, SourceNamespaces: []string{"platform"},
				Destinations:             []argov1alpha1.ApplicationDestination{{Server: "*", Name: "*", Namespace: "*"}},
				ClusterResourceWhitelist: []metav1.GroupKind{{Group: "*", Kind: "*"}},
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "team-a-shared", Namespace: argoNS},
			Spec: argov1alpha1.AppProjectSpec{
				SourceRepos: []string{"*"}, SourceNamespaces: []string{"team-a"},
				Destinations:               []argov1alpha1.ApplicationDestination{{Server: "*", Name: "*", Namespace: "team-a"}},
				NamespaceResourceWhitelist: []metav1.GroupKind{{Group: "kubevirt.io", Kind: "VirtualMachine"}},
			},
		},
	} {
		if err := f.Hub.Client.Create(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// grantNamespace gives a user what a team gets: manage FleetVirtualMachines,
// FleetDiskImages and FleetVirtualMachineMoves in its namespace (not their
// status).
func grantNamespace(ctx context.Context, c client.Client, user, ns string) error {
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleetvm-user"},
		Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{fleetv1alpha1.GroupVersion.Group},
			Resources: []string{"fleetvirtualmachines", "fleetdiskimages", "fleetvirtualmachinemoves"},
			Verbs:     []string{"get", "list", "watch", "create", "update", "patch", "delete"},
		}},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "fleetvm-user-" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// impersonate returns a hub client acting as user: every request is
// authorized for that user by the hub's RBAC authorizer.
func impersonate(f *fleetenv.Fleet, user string) (client.Client, error) {
	cfg := rest.CopyConfig(f.Hub.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	return client.New(cfg, client.Options{Scheme: f.Scheme})
}

// hubIdentity returns a client of a user bound to fleetvm-hub's rights
// exactly as generated from the code (deploy/rbac/role.yaml).
func hubIdentity(ctx context.Context, f *fleetenv.Fleet) (client.Client, error) {
	if err := fleetenv.GrantHubRBAC(ctx, f.Hub.Client, "as-fleetvm-hub", "mallory-as-hub", argoNS); err != nil {
		return nil, err
	}
	return impersonate(f, "mallory-as-hub")
}

// waitFVM polls the FleetVirtualMachine (as the admin) until cond holds.
func waitFVM(t *testing.T, key client.ObjectKey, what string, cond func(*fleetv1alpha1.FleetVirtualMachine) bool) *fleetv1alpha1.FleetVirtualMachine {
	t.Helper()
	return fleetrun.WaitFVM(t, fleet.Hub.Client, key, wait, what, cond)
}

// remove deletes a FleetVirtualMachine as the admin when the test ends.
func remove(t *testing.T, fvm *fleetv1alpha1.FleetVirtualMachine) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		key := client.ObjectKeyFromObject(fvm)
		_ = fleet.Hub.Client.Delete(ctx, &fleetv1alpha1.FleetVirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
		_ = fleetenv.Eventually(ctx, wait, func() (bool, error) {
			err := fleet.Hub.Client.Get(ctx, key, &fleetv1alpha1.FleetVirtualMachine{})
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
	})
}
