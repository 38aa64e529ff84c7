package addon

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"open-cluster-management.io/addon-framework/pkg/agent"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
)

func testCluster(name string) *clusterv1.ManagedCluster {
	return &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func testAddon(cluster, installNamespace string) *addonv1alpha1.ManagedClusterAddOn {
	return &addonv1alpha1.ManagedClusterAddOn{
		ObjectMeta: metav1.ObjectMeta{Name: AddonName, Namespace: cluster, UID: types.UID("uid-" + cluster)},
		Spec:       addonv1alpha1.ManagedClusterAddOnSpec{InstallNamespace: installNamespace},
	}
}

// rendered is what the tests read from the rendered manifests.
type rendered struct {
	Kinds            []string
	Namespaces       []string
	Image            string
	PullPolicy       corev1.PullPolicy
	Command          []string
	Args             []string
	HubSecret        string
	ServiceAccount   string
	BindingSubject   rbacv1.Subject
	RunAsNonRoot     bool
	ProbePaths       []string
	RequestsCPU      string
	RequestsMemory   string
	NamespaceOrphans bool
}

func summarize(t *testing.T, objs []runtime.Object) rendered {
	t.Helper()
	var r rendered
	for _, o := range objs {
		r.Kinds = append(r.Kinds, o.GetObjectKind().GroupVersionKind().Kind)
		switch o := o.(type) {
		case *corev1.Namespace:
			_, r.NamespaceOrphans = o.Annotations[addonv1alpha1.DeletionOrphanAnnotationKey]
		case *corev1.ServiceAccount:
			r.Namespaces = append(r.Namespaces, o.Namespace)
		case *rbacv1.ClusterRoleBinding:
			r.BindingSubject = o.Subjects[0]
		case *appsv1.Deployment:
			r.Namespaces = append(r.Namespaces, o.Namespace)
			spec := o.Spec.Template.Spec
			c := spec.Containers[0]
			r.Image, r.PullPolicy, r.Command, r.Args = c.Image, c.ImagePullPolicy, c.Command, c.Args
			r.HubSecret = spec.Volumes[0].Secret.SecretName
			r.ServiceAccount = spec.ServiceAccountName
			r.RunAsNonRoot = *spec.SecurityContext.RunAsNonRoot && *c.SecurityContext.RunAsNonRoot && !*c.SecurityContext.AllowPrivilegeEscalation
			r.ProbePaths = []string{c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path}
			r.RequestsCPU, r.RequestsMemory = c.Resources.Requests.Cpu().String(), c.Resources.Requests.Memory().String()
		}
	}
	return r
}

func TestManifests(t *testing.T) {
	cases := map[string]struct {
		opts             Options
		cluster          string
		installNamespace string
		want             rendered
	}{
		"default install namespace": {
			opts:    Options{AgentImage: "registry.example/fleetvm:v1"},
			cluster: "cluster-a",
			want: rendered{
				Kinds:            []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment"},
				Namespaces:       []string{DefaultInstallNamespace, DefaultInstallNamespace},
				Image:            "registry.example/fleetvm:v1",
				PullPolicy:       corev1.PullIfNotPresent,
				Command:          []string{"/usr/local/bin/fleetvm-agent"},
				Args:             []string{"--cluster-name=cluster-a", "--hub-kubeconfig=/var/run/hub/kubeconfig"},
				HubSecret:        "fleetvm-hub-kubeconfig",
				ServiceAccount:   "fleetvm-agent",
				BindingSubject:   rbacv1.Subject{Kind: "ServiceAccount", Name: "fleetvm-agent", Namespace: DefaultInstallNamespace},
				RunAsNonRoot:     true,
				ProbePaths:       []string{"/healthz", "/readyz"},
				RequestsCPU:      "20m",
				RequestsMemory:   "64Mi",
				NamespaceOrphans: true,
			},
		},
		"install namespace of the ManagedClusterAddOn, pull policy set": {
			opts:             Options{AgentImage: "registry.example/fleetvm@sha256:0123", AgentImagePullPolicy: corev1.PullAlways},
			cluster:          "edge-7",
			installNamespace: "fleetvm",
			want: rendered{
				Kinds:            []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment"},
				Namespaces:       []string{"fleetvm", "fleetvm"},
				Image:            "registry.example/fleetvm@sha256:0123",
				PullPolicy:       corev1.PullAlways,
				Command:          []string{"/usr/local/bin/fleetvm-agent"},
				Args:             []string{"--cluster-name=edge-7", "--hub-kubeconfig=/var/run/hub/kubeconfig"},
				HubSecret:        "fleetvm-hub-kubeconfig",
				ServiceAccount:   "fleetvm-agent",
				BindingSubject:   rbacv1.Subject{Kind: "ServiceAccount", Name: "fleetvm-agent", Namespace: "fleetvm"},
				RunAsNonRoot:     true,
				ProbePaths:       []string{"/healthz", "/readyz"},
				RequestsCPU:      "20m",
				RequestsMemory:   "64Mi",
				NamespaceOrphans: true,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a, err := NewAgentAddon(fake.NewClientset(), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := a.Manifests(testCluster(tc.cluster), testAddon(tc.cluster, tc.installNamespace))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, summarize(t, objs)); diff != "" {
				t.Errorf("rendered manifests (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestSpokeRulesReadOnly checks the agent's ClusterRole on its cluster: it
// reads exactly the resources the agent needs and writes nothing.
func TestSpokeRulesReadOnly(t *testing.T) {
	a, err := NewAgentAddon(fake.NewClientset(), Options{AgentImage: "img"})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := a.Manifests(testCluster("c"), testAddon("c", ""))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, o := range objs {
		role, ok := o.(*rbacv1.ClusterRole)
		if !ok {
			continue
		}
		for _, r := range role.Rules {
			if len(r.ResourceNames) != 0 || len(r.NonResourceURLs) != 0 {
				t.Errorf("unexpected rule %+v", r)
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					verbs := slices.Clone(r.Verbs)
					slices.Sort(verbs)
					got[g+"/"+res] = verbs
				}
			}
		}
	}
	read := []string{"get", "list", "watch"}
	want := map[string][]string{
		"/nodes": read, "/pods": read, "/persistentvolumeclaims": read,
		"kubevirt.io/virtualmachines": read, "kubevirt.io/virtualmachineinstances": read,
		"cdi.kubevirt.io/datavolumes": read, "cdi.kubevirt.io/datasources": read,
		"k8s.cni.cncf.io/network-attachment-definitions": read,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("spoke ClusterRole group/resource → verbs (-want,+got):\n%s", diff)
	}
}

func TestOptionsErrors(t *testing.T) {
	cases := map[string]struct {
		opts    Options
		wantErr bool
	}{
		"valid":                {opts: Options{AgentImage: "quay.io/fleetvm/fleetvm:v0.1.0"}},
		"no image":             {opts: Options{}, wantErr: true},
		"image breaks quoting": {opts: Options{AgentImage: `img" evil: "x`}, wantErr: true},
		"template in image":    {opts: Options{AgentImage: "{{ .ClusterName }}"}, wantErr: true},
		"bad pull policy":      {opts: Options{AgentImage: "img", AgentImagePullPolicy: "Sometimes"}, wantErr: true},
		"bad install strategy": {opts: Options{AgentImage: "img", InstallStrategy: "Everywhere"}, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := NewAgentAddon(fake.NewClientset(), tc.opts)
			if gotErr := err != nil; gotErr != tc.wantErr {
				t.Errorf("NewAgentAddon error = %v, want error: %v", err, tc.wantErr)
			}
		})
	}
}

func TestAgentAddonOptions(t *testing.T) {
	a, err := NewAgentAddon(fake.NewClientset(), Options{AgentImage: "img"})
	if err != nil {
		t.Fatal(err)
	}
	o := a.GetAgentAddonOptions()
	if o.AddonName != AddonName {
		t.Errorf("addon name = %q, want %q", o.AddonName, AddonName)
	}
	if o.HealthProber == nil || o.HealthProber.Type != agent.HealthProberTypeDeploymentAvailability {
		t.Errorf("health prober = %+v, want DeploymentAvailability", o.HealthProber)
	}
	reg := o.Registration
	if reg == nil || reg.CSRConfigurations == nil || reg.CSRApproveCheck == nil || reg.PermissionConfig == nil {
		t.Fatalf("registration = %+v, want CSR configurations, approval and permissions", reg)
	}
	got, err := reg.CSRConfigurations(testCluster("cluster-a"), testAddon("cluster-a", ""))
	if err != nil {
		t.Fatal(err)
	}
	want := []addonv1alpha1.RegistrationConfig{{
		SignerName: "kubernetes.io/kube-apiserver-client",
		Subject: addonv1alpha1.Subject{
			User: "system:open-cluster-management:cluster:cluster-a:addon:fleetvm:agent:fleetvm-agent",
			Groups: []string{
				"system:open-cluster-management:cluster:cluster-a:addon:fleetvm",
				"system:open-cluster-management:addon:fleetvm",
				"system:authenticated",
			},
		},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CSR configurations (-want,+got):\n%s", diff)
	}
	// Subject is what addon-framework v1.2 fills (deprecated for v1beta1).
	if user, subject := AgentUser("cluster-a"), want[0].Subject.User; user != subject { //nolint:staticcheck // see above
		t.Errorf("AgentUser = %q, want %q", user, subject)
	}
}

// TestAgentGroup checks that the only group the hub Role is bound to is one
// the agent's certificate carries and that no other cluster's agent has.
func TestAgentGroup(t *testing.T) {
	for _, cluster := range []string{"cluster-a", "cluster-b"} {
		if g := AgentGroup(cluster); !slices.Contains(agent.DefaultGroups(cluster, AddonName), g) {
			t.Errorf("AgentGroup(%s) = %q, not among the agent's groups %v", cluster, g, agent.DefaultGroups(cluster, AddonName))
		}
	}
	if slices.Contains(agent.DefaultGroups("cluster-b", AddonName), AgentGroup("cluster-a")) {
		t.Errorf("the agent of cluster-b is in group %q of cluster-a", AgentGroup("cluster-a"))
	}
}

func TestPermissionConfig(t *testing.T) {
	kube := fake.NewClientset()
	configure := PermissionConfig(kube)
	for _, c := range []string{"cluster-a", "cluster-b"} {
		if err := configure(testCluster(c), testAddon(c, "")); err != nil {
			t.Fatal(err)
		}
	}
	ctx := t.Context()
	for _, c := range []string{"cluster-a", "cluster-b"} {
		role, err := kube.RbacV1().Roles(c).Get(ctx, AgentHubRoleName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(AgentHubRules(), role.Rules); diff != "" {
			t.Errorf("%s: Role rules (-want,+got):\n%s", c, diff)
		}
		binding, err := kube.RbacV1().RoleBindings(c).Get(ctx, AgentHubRoleName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		type summary struct {
			RoleRef  string
			Subjects []rbacv1.Subject
			Owner    string
		}
		want := summary{RoleRef: "Role/" + AgentHubRoleName, Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: AgentGroup(c)}}, Owner: "ManagedClusterAddOn/fleetvm/uid-" + c}
		got := summary{RoleRef: binding.RoleRef.Kind + "/" + binding.RoleRef.Name, Subjects: binding.Subjects}
		if len(binding.OwnerReferences) == 1 {
			o := binding.OwnerReferences[0]
			got.Owner = o.Kind + "/" + o.Name + "/" + string(o.UID)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: RoleBinding (-want,+got):\n%s", c, diff)
		}
	}
}

func TestClusterManagementAddOn(t *testing.T) {
	all := clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.All}
	cases := map[string]struct {
		opts Options
		want addonv1alpha1.InstallStrategy
		// wantPlacement is namespace/name/clusterSet of DefaultPlacement, "" for none.
		wantPlacement string
	}{
		"default: placement of the global set": {
			opts: Options{AgentImage: "img"},
			want: addonv1alpha1.InstallStrategy{Type: "Placements", Placements: []addonv1alpha1.PlacementStrategy{{
				PlacementRef: addonv1alpha1.PlacementRef{Namespace: "open-cluster-management-addon", Name: "fleetvm-agent"}, RolloutStrategy: all,
			}}},
			wantPlacement: "open-cluster-management-addon/fleetvm-agent/global",
		},
		"own placement and set": {
			opts: Options{AgentImage: "img", PlacementNamespace: "fleet", PlacementName: "vm-clusters", ClusterSet: "prod"},
			want: addonv1alpha1.InstallStrategy{Type: "Placements", Placements: []addonv1alpha1.PlacementStrategy{{
				PlacementRef: addonv1alpha1.PlacementRef{Namespace: "fleet", Name: "vm-clusters"}, RolloutStrategy: all,
			}}},
			wantPlacement: "fleet/vm-clusters/prod",
		},
		"manual": {
			opts: Options{AgentImage: "img", InstallStrategy: InstallManual},
			want: addonv1alpha1.InstallStrategy{Type: "Manual"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cma, err := ClusterManagementAddOn(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if cma.Name != AddonName {
				t.Errorf("name = %q, want %q", cma.Name, AddonName)
			}
			if diff := cmp.Diff(tc.want, cma.Spec.InstallStrategy); diff != "" {
				t.Errorf("install strategy (-want,+got):\n%s", diff)
			}
			p, err := DefaultPlacement(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			b, err := DefaultClusterSetBinding(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			var gotPlacement string
			if p != nil {
				gotPlacement = p.Namespace + "/" + p.Name + "/" + p.Spec.ClusterSets[0]
				if b == nil || b.Namespace != p.Namespace || b.Spec.ClusterSet != p.Spec.ClusterSets[0] {
					t.Errorf("cluster set binding %+v does not bind the placement's set into its namespace", b)
				}
			}
			if gotPlacement != tc.wantPlacement {
				t.Errorf("default placement = %q, want %q", gotPlacement, tc.wantPlacement)
			}
		})
	}
}
