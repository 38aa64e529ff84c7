package webhook

import (
	"context"
	"strings"
	"testing"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/vmclaim"
)

const testImageNamespace = "fleetvm-images"

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{fleetv1alpha1.AddToScheme, argov1alpha1.AddToScheme, clusterv1beta2.Install} {
		utilruntime.Must(add(s))
	}
	return s
}

// inlineFVM is a FleetVirtualMachine of team-a with an inline VM; the
// template's metadata and spec may be replaced.
func inlineFVM(name, metadata, spec string) *fleetv1alpha1.FleetVirtualMachine {
	if metadata == "" {
		metadata = `{}`
	}
	if spec == "" {
		spec = `{"template":{"spec":{"domain":{"cpu":{"cores":1},"memory":{"guest":"1Gi"},"devices":{}}}}}`
	}
	raw := `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":` + metadata + `,"spec":` + spec + `}`
	return &fleetv1alpha1.FleetVirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name},
		Spec: fleetv1alpha1.FleetVirtualMachineSpec{
			Template:    &runtime.RawExtension{Raw: []byte(raw)},
			RunStrategy: fleetv1alpha1.RunStrategyAlways,
		},
	}
}

// TestValidateCreate: every refusal names the field and the reason, and
// what a namespace is allowed passes. The hub holds: team-a bound to the
// sets "default" and "prod"; the AppProjects "shared" (serving team-*) and
// "platform-admin" (serving nobody but its own namespace); a
// FleetVirtualMachine team-a/taken delivering VM team-a/db.
func TestValidateCreate(t *testing.T) {
	taken := inlineFVM("taken", `{"name":"db"}`, "")
	objs := []client.Object{
		&clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "default"}, Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: "default"}},
		&clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "prod"}, Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: "prod"}},
		&argov1alpha1.AppProject{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "shared"}, Spec: argov1alpha1.AppProjectSpec{SourceNamespaces: []string{"team-*"}}},
		&argov1alpha1.AppProject{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "platform-admin"}, Spec: argov1alpha1.AppProjectSpec{SourceNamespaces: []string{"argocd"}}},
		taken,
	}
	reader := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objs...).
		WithIndex(&fleetv1alpha1.FleetVirtualMachine{}, vmclaim.IndexVM, func(o client.Object) []string {
			if k, ok := vmclaim.Key(o.(*fleetv1alpha1.FleetVirtualMachine)); ok {
				return []string{k}
			}
			return nil
		}).Build()
	v := &FleetVirtualMachineValidator{Reader: reader, ArgoNamespace: "argocd", ImageNamespace: testImageNamespace}

	with := func(f *fleetv1alpha1.FleetVirtualMachine, change func(*fleetv1alpha1.FleetVirtualMachine)) *fleetv1alpha1.FleetVirtualMachine {
		change(f)
		return f
	}
	cases := map[string]struct {
		fvm *fleetv1alpha1.FleetVirtualMachine
		// want: the field path and words of the reason; none: accepted.
		want []string
	}{
		"plain inline VM": {fvm: inlineFVM("web", "", "")},
		"VM in another namespace": {
			fvm:  inlineFVM("web", `{"namespace":"kube-system"}`, ""),
			want: []string{"spec.template.metadata.namespace", "only into its own namespace (team-a)"},
		},
		"status in the template": {
			fvm: func() *fleetv1alpha1.FleetVirtualMachine {
				f := inlineFVM("web", "", "")
				f.Spec.Template.Raw = []byte(strings.Replace(string(f.Spec.Template.Raw), `"kind":"VirtualMachine",`, `"kind":"VirtualMachine","status":{"ready":true},`, 1))
				return f
			}(),
			want: []string{"spec.template.status", "reported by the clusters"},
		},
		"clone straight from the image namespace": {
			fvm: inlineFVM("web", "", `{"dataVolumeTemplates":[{"metadata":{"name":"root"},"spec":{"sourceRef":{"kind":"DataSource","name":"team-b.rhel9","namespace":"`+testImageNamespace+`"}}}],
				"template":{"spec":{"domain":{"cpu":{"cores":1},"memory":{"guest":"1Gi"},"devices":{}}}}}`),
			want: []string{"spec.template.spec.dataVolumeTemplates[0].spec.sourceRef.namespace", "every namespace's FleetDiskImages"},
		},
		"selector with an unknown operator": {
			fvm: with(inlineFVM("web", "", ""), func(f *fleetv1alpha1.FleetVirtualMachine) {
				f.Spec.Placement.ClusterSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "region", Operator: "Near", Values: []string{"eu"}}}}
			}),
			want: []string{"spec.placement.clusterSelector.matchExpressions[0].operator", "Near"},
		},
		"Helm release name too long": {
			fvm: &fleetv1alpha1.FleetVirtualMachine{
				ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: strings.Repeat("x", 54)},
				Spec:       fleetv1alpha1.FleetVirtualMachineSpec{Source: &fleetv1alpha1.GitSource{RepoURL: "https://git.example/x.git", Path: ".", Helm: &fleetv1alpha1.HelmOptions{}}},
			},
			want: []string{"metadata.name", "at most 53 characters"},
		},
		"a bound set": {
			fvm: with(inlineFVM("web", "", ""), func(f *fleetv1alpha1.FleetVirtualMachine) { f.Spec.Placement.ClusterSets = []string{"prod"} }),
		},
		"a set not bound to the namespace": {
			fvm: with(inlineFVM("web", "", ""), func(f *fleetv1alpha1.FleetVirtualMachine) {
				f.Spec.Placement.ClusterSets = []string{"prod", "restricted"}
			}),
			want: []string{"spec.placement.clusterSets[1]", `cluster set "restricted" is not bound to namespace team-a`},
		},
		"no set listed, default not bound": {
			fvm: func() *fleetv1alpha1.FleetVirtualMachine {
				f := inlineFVM("web", "", "")
				f.Namespace = "team-z"
				return f
			}(),
			want: []string{"spec.placement.clusterSets", "none listed means the default set"},
		},
		"a project that serves the namespace": {
			fvm: with(inlineFVM("web", "", ""), func(f *fleetv1alpha1.FleetVirtualMachine) { f.Spec.Delivery.Project = "shared" }),
		},
		"a project that does not serve the namespace": {
			fvm:  with(inlineFVM("web", "", ""), func(f *fleetv1alpha1.FleetVirtualMachine) { f.Spec.Delivery.Project = "platform-admin" }),
			want: []string{"spec.delivery.project", "does not serve namespace team-a"},
		},
		"a project that does not exist": {
			fvm:  with(inlineFVM("web", "", ""), func(f *fleetv1alpha1.FleetVirtualMachine) { f.Spec.Delivery.Project = "nope" }),
			want: []string{"spec.delivery.project", "AppProject nope does not exist in argocd"},
		},
		"a VM another FleetVirtualMachine delivers": {
			fvm:  inlineFVM("second", `{"name":"db"}`, ""),
			want: []string{"spec.template.metadata.name", "already delivered by FleetVirtualMachine team-a/taken"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := v.ValidateCreate(context.Background(), tc.fvm)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("got %v, want Invalid naming %q", err, tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestValidateCreateCacheLag: a binding or AppProject the cache does not
// hold yet (created by the same kubectl apply, just before) is read from
// the API server before the FleetVirtualMachine is refused; one that is
// nowhere is still refused.
func TestValidateCreateCacheLag(t *testing.T) {
	scheme := testScheme(t)
	empty := fake.NewClientBuilder().WithScheme(scheme).
		WithIndex(&fleetv1alpha1.FleetVirtualMachine{}, vmclaim.IndexVM, func(client.Object) []string { return nil }).Build()
	live := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		&clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "default"}, Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: "default"}},
		&argov1alpha1.AppProject{ObjectMeta: metav1.ObjectMeta{Namespace: "argocd", Name: "shared"}, Spec: argov1alpha1.AppProjectSpec{SourceNamespaces: []string{"team-a"}}},
	).Build()
	withProject := func(project string) *fleetv1alpha1.FleetVirtualMachine {
		f := inlineFVM("vm", "", "")
		f.Spec.Delivery.Project = project
		return f
	}
	cases := map[string]struct {
		live client.Reader
		fvm  *fleetv1alpha1.FleetVirtualMachine
		want string
	}{
		"binding and project only live":   {live: live, fvm: withProject("shared")},
		"no live reader: the cache rules": {fvm: withProject(""), want: `cluster set "default" (none listed means the default set) is not bound to namespace team-a`},
		"project nowhere":                 {live: live, fvm: withProject("other"), want: "AppProject other does not exist in argocd"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			v := &FleetVirtualMachineValidator{Reader: empty, LiveReader: tc.live, ArgoNamespace: "argocd", ImageNamespace: testImageNamespace}
			_, err := v.ValidateCreate(context.Background(), tc.fvm)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("err = %v, want one saying %q", err, tc.want)
			}
		})
	}
}
