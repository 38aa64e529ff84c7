package addon

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"open-cluster-management.io/addon-framework/pkg/agent"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/addon"
	"github.com/fleetvm/fleetvm/test/fleetenv"
)

// TestAgentHubPermissions grants the agents of cluster-a and cluster-b their
// hub permissions with the addon's own PermissionConfig and proves, with
// the hub API server's real authentication and authorization, that the
// agent of cluster-a can write its reports and score in namespace cluster-a
// and nothing for cluster-b, reads only the shapes ConfigMap, no secrets,
// and no FleetVirtualMachines. Both clusters have the addon: a binding to a
// group every agent shares would show up as cluster-a's agent being allowed
// in cluster-b.
func TestAgentHubPermissions(t *testing.T) {
	ctx := t.Context()
	f := fleet(t)
	hub := f.Hub.Client
	hubKube := kubernetes.NewForConfigOrDie(f.Hub.Config)
	grant := addon.PermissionConfig(hubKube)

	const clusterA, clusterB = "cluster-a", "cluster-b"
	agents := map[string]client.Client{}
	for _, name := range []string{clusterA, clusterB} {
		if err := f.RegisterManagedCluster(ctx, fleetenv.ManagedCluster{Name: name}); err != nil {
			t.Fatal(err)
		}
		mca := &addonv1alpha1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Name: addon.AddonName, Namespace: name}}
		if err := hub.Create(ctx, mca); err != nil {
			t.Fatal(err)
		}
		var cluster clusterv1.ManagedCluster
		if err := hub.Get(ctx, client.ObjectKey{Name: name}, &cluster); err != nil {
			t.Fatal(err)
		}
		if err := grant(&cluster, mca); err != nil {
			t.Fatal(err)
		}
		// The identity the agent's CSR asks for, as the addon framework
		// names it (agent.DefaultUser, agent.DefaultGroups).
		cfg, err := f.Hub.AddUser(agent.DefaultUser(name, addon.AddonName, addon.AgentName), agent.DefaultGroups(name, addon.AddonName)...)
		if err != nil {
			t.Fatal(err)
		}
		if agents[name], err = client.New(cfg, client.Options{Scheme: f.Scheme}); err != nil {
			t.Fatal(err)
		}
	}

	// What the API server holds is AgentHubRules, bound to cluster-a's
	// agent group only.
	var role rbacv1.Role
	if err := hub.Get(ctx, client.ObjectKey{Namespace: clusterA, Name: addon.AgentHubRoleName}, &role); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(addon.AgentHubRules(), role.Rules); diff != "" {
		t.Errorf("Role %s/%s rules (-want,+got):\n%s", clusterA, role.Name, diff)
	}
	var binding rbacv1.RoleBinding
	if err := hub.Get(ctx, client.ObjectKey{Namespace: clusterA, Name: addon.AgentHubRoleName}, &binding); err != nil {
		t.Fatal(err)
	}
	wantSubjects := []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:open-cluster-management:cluster:cluster-a:addon:fleetvm"}}
	if diff := cmp.Diff(wantSubjects, binding.Subjects); diff != "" {
		t.Errorf("RoleBinding %s/%s subjects (-want,+got):\n%s", clusterA, binding.Name, diff)
	}

	// Objects the agent may or may not read.
	for _, obj := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: clusterA, Name: fleetv1alpha1.ShapesConfigMapName}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: clusterB, Name: fleetv1alpha1.ShapesConfigMapName}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: clusterA, Name: "other"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: clusterA, Name: "hub-secret"}},
		&fleetv1alpha1.ImageInventory{ObjectMeta: metav1.ObjectMeta{Namespace: clusterA, Name: fleetv1alpha1.ImageInventoryName}},
	} {
		if err := hub.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	a, b := agents[clusterA], agents[clusterB]
	cases := map[string]struct {
		do      func(context.Context) error
		allowed bool
	}{
		"A creates a VMReport in cluster-a": {do: func(ctx context.Context) error { return a.Create(ctx, vmReport(clusterA, "r1")) }, allowed: true},
		"A updates a VMReport in cluster-a": {do: func(ctx context.Context) error {
			r := vmReport(clusterA, "r2")
			if err := a.Create(ctx, r); err != nil {
				return err
			}
			r.Spec.VMs = []fleetv1alpha1.VMState{{Namespace: "vms", Name: "vm-1", PrintableStatus: "Running"}}
			if err := a.Update(ctx, r); err != nil {
				return err
			}
			return a.Delete(ctx, r)
		}, allowed: true},
		"A lists VMReports in cluster-a": {do: func(ctx context.Context) error {
			return a.List(ctx, &fleetv1alpha1.VMReportList{}, client.InNamespace(clusterA))
		}, allowed: true},
		"A creates a VMReport in cluster-b": {do: func(ctx context.Context) error { return a.Create(ctx, vmReport(clusterB, "r1")) }},
		"A lists VMReports in cluster-b": {do: func(ctx context.Context) error {
			return a.List(ctx, &fleetv1alpha1.VMReportList{}, client.InNamespace(clusterB))
		}},
		"A lists VMReports in all namespaces":           {do: func(ctx context.Context) error { return a.List(ctx, &fleetv1alpha1.VMReportList{}) }},
		"B creates a VMReport in cluster-b":             {do: func(ctx context.Context) error { return b.Create(ctx, vmReport(clusterB, "r2")) }, allowed: true},
		"A patches the ImageInventory in cluster-a":     {do: func(ctx context.Context) error { return patchInventory(ctx, a, clusterA) }, allowed: true},
		"A creates an ImageInventory in cluster-b":      {do: func(ctx context.Context) error { return a.Create(ctx, imageInventory(clusterB)) }},
		"A creates its AddOnPlacementScore":             {do: func(ctx context.Context) error { return createScore(ctx, a, clusterA) }, allowed: true},
		"A creates an AddOnPlacementScore in cluster-b": {do: func(ctx context.Context) error { return createScore(ctx, a, clusterB) }},
		"A reads secrets in cluster-a": {do: func(ctx context.Context) error {
			return a.Get(ctx, client.ObjectKey{Namespace: clusterA, Name: "hub-secret"}, &corev1.Secret{})
		}},
		"A lists secrets in cluster-a": {do: func(ctx context.Context) error {
			return a.List(ctx, &corev1.SecretList{}, client.InNamespace(clusterA))
		}},
		"A creates a FleetVirtualMachine in cluster-a": {do: func(ctx context.Context) error {
			return a.Create(ctx, &fleetv1alpha1.FleetVirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: clusterA, Name: "vm"}})
		}},
		"A lists FleetVirtualMachines in cluster-a": {do: func(ctx context.Context) error {
			return a.List(ctx, &fleetv1alpha1.FleetVirtualMachineList{}, client.InNamespace(clusterA))
		}},
		"A gets the shapes ConfigMap in cluster-a": {do: func(ctx context.Context) error {
			return a.Get(ctx, client.ObjectKey{Namespace: clusterA, Name: fleetv1alpha1.ShapesConfigMapName}, &corev1.ConfigMap{})
		}, allowed: true},
		"A lists the shapes ConfigMap by name in cluster-a": {do: func(ctx context.Context) error {
			return a.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(clusterA),
				client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", fleetv1alpha1.ShapesConfigMapName)})
		}, allowed: true},
		"A gets another ConfigMap in cluster-a": {do: func(ctx context.Context) error {
			return a.Get(ctx, client.ObjectKey{Namespace: clusterA, Name: "other"}, &corev1.ConfigMap{})
		}},
		"A lists every ConfigMap in cluster-a": {do: func(ctx context.Context) error {
			return a.List(ctx, &corev1.ConfigMapList{}, client.InNamespace(clusterA))
		}},
		"A updates the shapes ConfigMap in cluster-a": {do: func(ctx context.Context) error {
			return a.Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: clusterA, Name: fleetv1alpha1.ShapesConfigMapName}})
		}},
		"A gets the shapes ConfigMap in cluster-b": {do: func(ctx context.Context) error {
			return a.Get(ctx, client.ObjectKey{Namespace: clusterB, Name: fleetv1alpha1.ShapesConfigMapName}, &corev1.ConfigMap{})
		}},
		"A widens its own Role": {do: func(ctx context.Context) error {
			return a.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: clusterA, Name: "more"}})
		}},
		"A reads its ManagedClusterAddOn": {do: func(ctx context.Context) error {
			var mca addonv1alpha1.ManagedClusterAddOn
			return a.Get(ctx, client.ObjectKey{Namespace: clusterA, Name: addon.AddonName}, &mca)
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			checkAccess(t, tc.do(t.Context()), tc.allowed)
		})
	}
}

func vmReport(namespace, name string) *fleetv1alpha1.VMReport {
	return &fleetv1alpha1.VMReport{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       fleetv1alpha1.VMReportSpec{FleetVM: fleetv1alpha1.FleetVMReference{Namespace: "vms", Name: name}},
	}
}

func imageInventory(namespace string) *fleetv1alpha1.ImageInventory {
	return &fleetv1alpha1.ImageInventory{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fleetv1alpha1.ImageInventoryName}}
}

func patchInventory(ctx context.Context, c client.Client, namespace string) error {
	inv := imageInventory(namespace)
	if err := c.Get(ctx, client.ObjectKeyFromObject(inv), inv); err != nil {
		return err
	}
	before := inv.DeepCopy()
	inv.Spec.Images = []fleetv1alpha1.ImageUse{{Image: "datasource:os-images/rhel9", References: 1}}
	return c.Patch(ctx, inv, client.MergeFrom(before))
}

// createScore creates the capacity score and writes its status, as the agent
// does.
func createScore(ctx context.Context, c client.Client, namespace string) error {
	score := &clusterv1alpha1.AddOnPlacementScore{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fleetv1alpha1.CapacityScoreName}}
	if err := c.Create(ctx, score); err != nil {
		return err
	}
	score.Status.Scores = []clusterv1alpha1.AddOnPlacementScoreItem{{Name: "cpu", Value: 42}}
	return c.Status().Update(ctx, score)
}
