package addon

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetvm/fleetvm/pkg/addon"
	"github.com/fleetvm/fleetvm/test/fleetenv"
)

// TestSetupAddonManager runs the addon manager as fleetvm-hub does and plays
// OCM's part (the ManagedClusterAddOn its addon manager creates from the
// install strategy): the framework must then grant the agent its hub Role,
// record the agent's registration subject, and deploy the agent manifests
// as a ManifestWork in the cluster namespace, with the Deployment's
// availability fed back for the health prober.
func TestSetupAddonManager(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	f := fleet(t)
	hub := f.Hub.Client
	const cluster = "cluster-c"
	if err := f.RegisterManagedCluster(ctx, fleetenv.ManagedCluster{Name: cluster}); err != nil {
		t.Fatal(err)
	}

	if err := addon.SetupAddonManager(ctx, f.Hub.Config, addon.Options{AgentImage: "registry.invalid/fleetvm:test"}); err != nil {
		t.Fatal(err)
	}

	// The hub objects of the default install strategy.
	var cma addonv1alpha1.ClusterManagementAddOn
	if err := hub.Get(ctx, client.ObjectKey{Name: addon.AddonName}, &cma); err != nil {
		t.Fatal(err)
	}
	wantRefs := []addonv1alpha1.PlacementRef{{Namespace: addon.DefaultPlacementNamespace, Name: addon.DefaultPlacementName}}
	var gotRefs []addonv1alpha1.PlacementRef
	for _, p := range cma.Spec.InstallStrategy.Placements {
		gotRefs = append(gotRefs, p.PlacementRef)
	}
	if cma.Spec.InstallStrategy.Type != addonv1alpha1.AddonInstallStrategyPlacements {
		t.Errorf("install strategy = %q, want Placements", cma.Spec.InstallStrategy.Type)
	}
	if diff := cmp.Diff(wantRefs, gotRefs); diff != "" {
		t.Errorf("install strategy placements (-want,+got):\n%s", diff)
	}
	var placement clusterv1beta1.Placement
	if err := hub.Get(ctx, client.ObjectKey{Namespace: addon.DefaultPlacementNamespace, Name: addon.DefaultPlacementName}, &placement); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{addon.DefaultClusterSet}, placement.Spec.ClusterSets); diff != "" {
		t.Errorf("placement cluster sets (-want,+got):\n%s", diff)
	}

	// What OCM's addon manager does for each cluster the Placement selects.
	mca := &addonv1alpha1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{
		Name: addon.AddonName, Namespace: cluster,
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: addonv1alpha1.GroupVersion.String(), Kind: "ClusterManagementAddOn", Name: cma.Name, UID: cma.UID,
		}},
	}}
	if err := hub.Create(ctx, mca); err != nil {
		t.Fatal(err)
	}

	// The framework called PermissionConfig: the Role and its binding.
	err := fleetenv.Eventually(ctx, 30*time.Second, func() (bool, error) {
		var role rbacv1.Role
		if err := hub.Get(ctx, client.ObjectKey{Namespace: cluster, Name: addon.AgentHubRoleName}, &role); err != nil {
			return false, err
		}
		if diff := cmp.Diff(addon.AgentHubRules(), role.Rules); diff != "" {
			return false, fmt.Errorf("role rules (-want,+got):\n%s", diff)
		}
		var binding rbacv1.RoleBinding
		if err := hub.Get(ctx, client.ObjectKey{Namespace: cluster, Name: addon.AgentHubRoleName}, &binding); err != nil {
			return false, err
		}
		if len(binding.Subjects) != 1 || binding.Subjects[0].Name != addon.AgentGroup(cluster) {
			return false, fmt.Errorf("binding subjects = %+v, want only group %s", binding.Subjects, addon.AgentGroup(cluster))
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("agent hub Role and RoleBinding in %s: %v", cluster, err)
	}

	// The registration subject the agent's CSR must match.
	err = fleetenv.Eventually(ctx, 30*time.Second, func() (bool, error) {
		if err := hub.Get(ctx, client.ObjectKeyFromObject(mca), mca); err != nil {
			return false, err
		}
		for _, r := range mca.Status.Registrations {
			// SignerName and Subject are what OCM v1.2 fills (deprecated for v1beta1).
			if r.SignerName == "kubernetes.io/kube-apiserver-client" && r.Subject.User == addon.AgentUser(cluster) { //nolint:staticcheck // see above
				return true, nil
			}
		}
		return false, fmt.Errorf("registrations = %+v", mca.Status.Registrations)
	})
	if err != nil {
		t.Fatalf("ManagedClusterAddOn registration: %v", err)
	}

	// The agent manifests, as a ManifestWork in the cluster namespace.
	var work *workv1.ManifestWork
	err = fleetenv.Eventually(ctx, 30*time.Second, func() (bool, error) {
		var works workv1.ManifestWorkList
		if err := hub.List(ctx, &works, client.InNamespace(cluster), client.MatchingLabels{addonv1alpha1.AddonLabelKey: addon.AddonName}); err != nil {
			return false, err
		}
		for i := range works.Items {
			if strings.HasPrefix(works.Items[i].Name, "addon-fleetvm-deploy") {
				work = &works.Items[i]
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("deploy ManifestWork in %s: %v", cluster, err)
	}
	var kinds []string
	var deployment *appsv1.Deployment
	decoder := scheme.Codecs.UniversalDeserializer()
	for _, m := range work.Spec.Workload.Manifests {
		obj, gvk, err := decoder.Decode(m.Raw, nil, nil)
		if err != nil {
			t.Fatalf("decode manifest: %v", err)
		}
		kinds = append(kinds, gvk.Kind)
		if d, ok := obj.(*appsv1.Deployment); ok {
			deployment = d
		}
	}
	// The framework orders the manifests its own way.
	slices.Sort(kinds)
	if diff := cmp.Diff([]string{"ClusterRole", "ClusterRoleBinding", "Deployment", "Namespace", "ServiceAccount"}, kinds); diff != "" {
		t.Errorf("ManifestWork manifests (-want,+got):\n%s", diff)
	}
	if deployment == nil {
		t.Fatal("no Deployment in the ManifestWork")
	}
	if args := deployment.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--cluster-name="+cluster) {
		t.Errorf("Deployment args = %q, want --cluster-name=%s", args, cluster)
	}
	if !hasDeploymentFeedback(work, deployment) {
		t.Errorf("ManifestWork manifestConfigs = %+v, want status feedback of Deployment %s/%s for the health prober",
			work.Spec.ManifestConfigs, deployment.Namespace, deployment.Name)
	}
}

func hasDeploymentFeedback(work *workv1.ManifestWork, d *appsv1.Deployment) bool {
	for _, c := range work.Spec.ManifestConfigs {
		id := c.ResourceIdentifier
		if id.Group == "apps" && id.Resource == "deployments" && id.Namespace == d.Namespace && id.Name == d.Name && len(c.FeedbackRules) > 0 {
			return true
		}
	}
	return false
}
