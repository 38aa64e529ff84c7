package addon

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	kubevirtv1 "kubevirt.io/api/core/v1"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetvm/fleetvm/pkg/addon"
)

// TestAgentManifestsOnSpoke renders the agent manifests through the addon
// factory for cluster-a, creates every object on cluster-a's API server, and
// proves with that server's authorizer that the agent's ServiceAccount can
// read what it needs and write nothing.
func TestAgentManifestsOnSpoke(t *testing.T) {
	ctx := t.Context()
	spoke := fleet(t).Spoke(spokeName)

	agentAddon, err := addon.NewAgentAddon(kubernetes.NewForConfigOrDie(fleet(t).Hub.Config), addon.Options{AgentImage: "registry.invalid/fleetvm:test"})
	if err != nil {
		t.Fatal(err)
	}
	cluster := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: spokeName}}
	mca := &addonv1alpha1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Name: addon.AddonName, Namespace: spokeName}}
	objs, err := agentAddon.Manifests(cluster, mca)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) == 0 {
		t.Fatal("no manifests rendered")
	}
	// The work agent applies them as the ManifestWork lists them; the
	// namespace comes first.
	var deployment *appsv1.Deployment
	for _, o := range objs {
		obj, ok := o.(client.Object)
		if !ok {
			t.Fatalf("%T is not a client.Object", o)
		}
		if err := spoke.Client.Create(ctx, obj); err != nil {
			t.Fatalf("create %s %s on the spoke: %v", o.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
		if d, ok := o.(*appsv1.Deployment); ok {
			deployment = d
		}
	}
	if deployment == nil {
		t.Fatal("no Deployment among the manifests")
	}
	var got appsv1.Deployment
	if err := spoke.Client.Get(ctx, client.ObjectKeyFromObject(deployment), &got); err != nil {
		t.Fatal(err)
	}
	if got.Namespace != addon.DefaultInstallNamespace {
		t.Errorf("Deployment namespace = %q, want %q", got.Namespace, addon.DefaultInstallNamespace)
	}
	wantArg := "--cluster-name=" + spokeName
	if args := got.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, wantArg) {
		t.Errorf("Deployment args = %q, want %q among them", args, wantArg)
	}

	// The ServiceAccount's user, authenticated by the spoke's API server.
	ns := addon.DefaultInstallNamespace
	cfg, err := spoke.AddUser("system:serviceaccount:"+ns+":"+addon.AgentName,
		"system:serviceaccounts", "system:serviceaccounts:"+ns, "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	sa, err := client.New(cfg, client.Options{Scheme: fleet(t).Scheme})
	if err != nil {
		t.Fatal(err)
	}
	vm := func() *kubevirtv1.VirtualMachine {
		return &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "vm-1"}}
	}
	cases := map[string]struct {
		do      func() error
		allowed bool
	}{
		"list nodes":               {do: func() error { return sa.List(ctx, &corev1.NodeList{}) }, allowed: true},
		"list pods":                {do: func() error { return sa.List(ctx, &corev1.PodList{}) }, allowed: true},
		"list pvcs":                {do: func() error { return sa.List(ctx, &corev1.PersistentVolumeClaimList{}) }, allowed: true},
		"list virtual machines":    {do: func() error { return sa.List(ctx, &kubevirtv1.VirtualMachineList{}) }, allowed: true},
		"list vm instances":        {do: func() error { return sa.List(ctx, &kubevirtv1.VirtualMachineInstanceList{}) }, allowed: true},
		"list data volumes":        {do: func() error { return sa.List(ctx, unstructuredList("cdi.kubevirt.io", "v1beta1", "DataVolumeList")) }, allowed: true},
		"list data sources":        {do: func() error { return sa.List(ctx, unstructuredList("cdi.kubevirt.io", "v1beta1", "DataSourceList")) }, allowed: true},
		"create a virtual machine": {do: func() error { return sa.Create(ctx, vm()) }},
		"delete a virtual machine": {do: func() error { return sa.Delete(ctx, vm()) }},
		"create a pod":             {do: func() error { return sa.Create(ctx, testPod()) }},
		"read secrets":             {do: func() error { return sa.List(ctx, &corev1.SecretList{}) }},
		"read configmaps":          {do: func() error { return sa.List(ctx, &corev1.ConfigMapList{}) }},
		"list deployments":         {do: func() error { return sa.List(ctx, &appsv1.DeploymentList{}) }},
		"delete its namespace":     {do: func() error { return sa.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) }},
		"delete its cluster role": {do: func() error {
			return sa.Delete(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: addon.AgentName}})
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			checkAccess(t, tc.do(), tc.allowed)
		})
	}
}

func unstructuredList(group, version, kind string) *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetAPIVersion(group + "/" + version)
	l.SetKind(kind)
	return l
}

func testPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}},
	}
}

// checkAccess fails the test unless err is nil when allowed, and Forbidden
// when not.
func checkAccess(t *testing.T, err error, allowed bool) {
	t.Helper()
	switch {
	case allowed && err != nil:
		t.Errorf("allowed request failed: %v", err)
	case !allowed && !apierrors.IsForbidden(err):
		t.Errorf("got %v, want Forbidden", err)
	}
}
