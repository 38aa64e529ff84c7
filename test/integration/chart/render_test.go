package chart

import (
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/fleetvm/fleetvm/pkg/addon"
	fleetwebhook "github.com/fleetvm/fleetvm/pkg/webhook"
	"github.com/fleetvm/fleetvm/test/fleetenv"
)

// A release of the chart: how it is installed.
type release struct {
	name, namespace string
	// values overrides the chart's values, as `helm install -f` would.
	values string
}

// The ways the chart is meant to be installed. Every test runs on each.
var releases = map[string]release{
	"defaults (self-managed certificates)": {name: "fleetvm-hub", namespace: "fleetvm-system"},
	"cert-manager, self-signed issuer": {name: "fleetvm-hub", namespace: "fleetvm-cm", values: `
certManager: {enabled: true}
`},
	"cert-manager with an existing issuer, manual agent install, pinned image": {name: "prod", namespace: "fleetvm-prod", values: `
certManager:
  enabled: true
  issuerRef: {name: corp-ca, kind: ClusterIssuer, group: cert-manager.io}
agent: {installStrategy: Manual}
image: {digest: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
argocd: {namespace: openshift-gitops}
replicaCount: 2
`},
}

// rendered is a release as Helm would install it.
type rendered struct {
	release
	objs []*unstructured.Unstructured
	crds []*unstructured.Unstructured
}

func chartDir(t *testing.T) string {
	t.Helper()
	root, err := fleetenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "deploy", "charts", "fleetvm-hub")
}

// render renders rel with Helm's engine in strict mode (a template that
// reads a value that does not exist fails), for the hub's Kubernetes
// version.
func render(t *testing.T, rel release) (rendered, error) {
	t.Helper()
	chrt, err := loader.Load(chartDir(t))
	if err != nil {
		t.Fatalf("load chart: %v", err)
	}
	version := kubernetesVersion(t)
	if !chartutil.IsCompatibleRange(chrt.Metadata.KubeVersion, version.Version) {
		t.Fatalf("chart kubeVersion %q excludes Kubernetes %s", chrt.Metadata.KubeVersion, version.Version)
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = version
	overrides, err := chartutil.ReadValues([]byte(rel.values))
	if err != nil {
		t.Fatalf("values: %v", err)
	}
	vals, err := chartutil.ToRenderValues(chrt, overrides, chartutil.ReleaseOptions{
		Name: rel.name, Namespace: rel.namespace, Revision: 1, IsInstall: true,
	}, caps)
	if err != nil {
		t.Fatalf("render values: %v", err)
	}
	files, err := engine.Engine{Strict: true}.Render(chrt, vals)
	if err != nil {
		return rendered{}, err
	}
	r := rendered{release: rel}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if strings.HasSuffix(name, "NOTES.txt") {
			continue
		}
		for _, doc := range releaseutil.SplitManifests(files[name]) {
			if u := decode(t, name, doc); u != nil {
				r.objs = append(r.objs, u)
			}
		}
	}
	for _, crd := range chrt.CRDObjects() {
		r.crds = append(r.crds, decode(t, crd.Filename, string(crd.File.Data)))
	}
	return r, nil
}

// kubernetesVersion is the Kubernetes version of the test API server. It
// is built from source without a version stamp (its discovery says
// v0.0.0-master), from the k8s.io/kubernetes release that
// hack/tools/apiserver/go.mod pins.
func kubernetesVersion(t *testing.T) chartutil.KubeVersion {
	t.Helper()
	root, err := fleetenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-m", "-f", "{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}", "k8s.io/kubernetes")
	cmd.Dir = filepath.Join(root, "hack", "tools", "apiserver")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("version of the test API server: go list: %v", err)
	}
	v, err := chartutil.ParseKubeVersion(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	return *v
}

func mustRender(t *testing.T, rel release) rendered {
	t.Helper()
	r, err := render(t, rel)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return r
}

func decode(t *testing.T, file, doc string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatalf("%s: not YAML: %v\n%s", file, err, doc)
	}
	if len(m) == 0 {
		return nil
	}
	return &unstructured.Unstructured{Object: m}
}

func (r rendered) ofKind(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range r.objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// one returns the single object of a kind, converted to T.
func one[T any](t *testing.T, r rendered, kind string) *T {
	t.Helper()
	objs := r.ofKind(kind)
	if len(objs) != 1 {
		t.Fatalf("%d objects of kind %s, want 1", len(objs), kind)
	}
	return convert[T](t, objs[0])
}

func convert[T any](t *testing.T, u *unstructured.Unstructured) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, out, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

func TestRenderedObjects(t *testing.T) {
	want := map[string][]string{
		"defaults (self-managed certificates)": {
			"ClusterRole/fleetvm-hub", "ClusterRole/fleetvm-hub-agent-permissions", "ClusterRole/fleetvm-hub-metrics-reader", "ClusterRole/fleetvm-hub-webhook-cert",
			"ClusterRoleBinding/fleetvm-hub", "ClusterRoleBinding/fleetvm-hub-agent-permissions", "ClusterRoleBinding/fleetvm-hub-webhook-cert",
			"Deployment/fleetvm-hub",
			"MutatingWebhookConfiguration/fleetvm-hub",
			"Role/fleetvm-hub", "Role/fleetvm-hub-leader-election", "Role/fleetvm-hub-webhook-cert",
			"RoleBinding/fleetvm-hub", "RoleBinding/fleetvm-hub-leader-election", "RoleBinding/fleetvm-hub-webhook-cert",
			"Secret/fleetvm-hub-webhook-cert",
			"Service/fleetvm-hub-metrics", "Service/fleetvm-hub-webhook",
			"ServiceAccount/fleetvm-hub",
			"ValidatingWebhookConfiguration/fleetvm-hub",
		},
		"cert-manager, self-signed issuer": {
			"Certificate/fleetvm-hub-webhook",
			"ClusterRole/fleetvm-hub", "ClusterRole/fleetvm-hub-agent-permissions", "ClusterRole/fleetvm-hub-metrics-reader",
			"ClusterRoleBinding/fleetvm-hub", "ClusterRoleBinding/fleetvm-hub-agent-permissions",
			"Deployment/fleetvm-hub",
			"Issuer/fleetvm-hub-selfsigned",
			"MutatingWebhookConfiguration/fleetvm-hub",
			"Role/fleetvm-hub", "Role/fleetvm-hub-leader-election", "RoleBinding/fleetvm-hub", "RoleBinding/fleetvm-hub-leader-election",
			"Service/fleetvm-hub-metrics", "Service/fleetvm-hub-webhook",
			"ServiceAccount/fleetvm-hub",
			"ValidatingWebhookConfiguration/fleetvm-hub",
		},
		"cert-manager with an existing issuer, manual agent install, pinned image": {
			"Certificate/prod-fleetvm-hub-webhook",
			"ClusterRole/prod-fleetvm-hub", "ClusterRole/prod-fleetvm-hub-agent-permissions", "ClusterRole/prod-fleetvm-hub-metrics-reader",
			"ClusterRoleBinding/prod-fleetvm-hub", "ClusterRoleBinding/prod-fleetvm-hub-agent-permissions",
			"Deployment/prod-fleetvm-hub",
			"MutatingWebhookConfiguration/prod-fleetvm-hub",
			"Role/prod-fleetvm-hub", "Role/prod-fleetvm-hub-leader-election", "RoleBinding/prod-fleetvm-hub", "RoleBinding/prod-fleetvm-hub-leader-election",
			"Service/prod-fleetvm-hub-metrics", "Service/prod-fleetvm-hub-webhook",
			"ServiceAccount/prod-fleetvm-hub",
			"ValidatingWebhookConfiguration/prod-fleetvm-hub",
		},
	}
	wantCRDs := []string{
		"fleetdiskimages.fleetvm.io", "fleetvirtualmachinemoves.fleetvm.io", "fleetvirtualmachines.fleetvm.io", "imageinventories.fleetvm.io", "vmreports.fleetvm.io",
	}
	for name, rel := range releases {
		t.Run(name, func(t *testing.T) {
			r := mustRender(t, rel)
			var got, gotCRDs []string
			for _, o := range r.objs {
				got = append(got, o.GetKind()+"/"+o.GetName())
				// Only the hub's Role (and its binding) for Argo CD's
				// objects lives outside the release namespace: in Argo
				// CD's (TestRBACLeastPrivilege checks which).
				argoRBAC := (o.GetKind() == "Role" || o.GetKind() == "RoleBinding") && o.GetName() == rel.fullname()
				if ns := o.GetNamespace(); ns != "" && ns != rel.namespace && !argoRBAC {
					t.Errorf("%s/%s in namespace %s, want the release namespace %s", o.GetKind(), o.GetName(), ns, rel.namespace)
				}
				if o.GetLabels()["app.kubernetes.io/part-of"] != "fleetvm" {
					t.Errorf("%s/%s lacks the label app.kubernetes.io/part-of=fleetvm", o.GetKind(), o.GetName())
				}
			}
			for _, c := range r.crds {
				gotCRDs = append(gotCRDs, c.GetName())
			}
			slices.Sort(got)
			slices.Sort(gotCRDs)
			if diff := cmp.Diff(want[name], got); diff != "" {
				t.Errorf("rendered objects (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(wantCRDs, gotCRDs); diff != "" {
				t.Errorf("chart CRDs (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestRenderRefusesBadValues(t *testing.T) {
	cases := map[string]string{
		"unknown install strategy": `agent: {installStrategy: Everywhere}`,
	}
	for name, values := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := render(t, release{name: "x", namespace: "x", values: values}); err == nil {
				t.Error("rendered; want an error")
			}
		})
	}
}

// args returns the flags of the hub container as name → value.
func args(t *testing.T, d *appsv1.Deployment) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		name, value, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		out[name] = value
	}
	return out
}

func TestDeploymentHardened(t *testing.T) {
	for name, rel := range releases {
		t.Run(name, func(t *testing.T) {
			r := mustRender(t, rel)
			d := one[appsv1.Deployment](t, r, "Deployment")
			spec := d.Spec.Template.Spec
			if len(spec.Containers) != 1 || len(spec.InitContainers) != 0 {
				t.Fatalf("%d containers and %d init containers, want one container", len(spec.Containers), len(spec.InitContainers))
			}
			c := spec.Containers[0]
			psc, sc := spec.SecurityContext, c.SecurityContext
			type hardening struct {
				PodRunAsNonRoot, RunAsNonRoot, ReadOnlyRoot, NoPrivilegeEscalation, Privileged bool
				RunAsUser                                                                      int64
				Seccomp                                                                        corev1.SeccompProfileType
				Drop                                                                           []corev1.Capability
				Add                                                                            []corev1.Capability
				HostNetwork, HostPID, HostPath                                                 bool
				Probes                                                                         []string
				LeaderElect, ResourcesSet                                                      bool
			}
			var got hardening
			if psc != nil {
				got.PodRunAsNonRoot = psc.RunAsNonRoot != nil && *psc.RunAsNonRoot
				if psc.RunAsUser != nil {
					got.RunAsUser = *psc.RunAsUser
				}
				if psc.SeccompProfile != nil {
					got.Seccomp = psc.SeccompProfile.Type
				}
			}
			if sc != nil {
				got.RunAsNonRoot = sc.RunAsNonRoot != nil && *sc.RunAsNonRoot
				got.ReadOnlyRoot = sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem
				got.NoPrivilegeEscalation = sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation
				got.Privileged = sc.Privileged != nil && *sc.Privileged
				if sc.Capabilities != nil {
					got.Drop, got.Add = sc.Capabilities.Drop, sc.Capabilities.Add
				}
			}
			got.HostNetwork, got.HostPID = spec.HostNetwork, spec.HostPID
			for _, v := range spec.Volumes {
				got.HostPath = got.HostPath || v.HostPath != nil
			}
			ports := map[string]int32{}
			for _, cp := range c.Ports {
				ports[cp.Name] = cp.ContainerPort
			}
			// A probe names its port; that port, and the address the hub
			// serves probes on, must be 8081.
			for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
				if p == nil || p.HTTPGet == nil {
					got.Probes = append(got.Probes, "none")
					continue
				}
				got.Probes = append(got.Probes, fmt.Sprintf("%s on %d", p.HTTPGet.Path, ports[p.HTTPGet.Port.String()]))
			}
			got.Probes = append(got.Probes, "served on "+args(t, d)["health-probe-bind-address"])
			_, got.LeaderElect = args(t, d)["leader-elect"]
			got.ResourcesSet = !c.Resources.Requests.Cpu().IsZero() && !c.Resources.Requests.Memory().IsZero() && !c.Resources.Limits.Memory().IsZero()
			want := hardening{
				PodRunAsNonRoot: true, RunAsNonRoot: true, ReadOnlyRoot: true, NoPrivilegeEscalation: true,
				RunAsUser: 65532, Seccomp: corev1.SeccompProfileTypeRuntimeDefault,
				Drop:        []corev1.Capability{"ALL"},
				Probes:      []string{"/healthz on 8081", "/readyz on 8081", "served on :8081"},
				LeaderElect: true, ResourcesSet: true,
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("hub Deployment hardening (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestArgsFromValues checks that each value reaches its fleetvm-hub flag.
func TestArgsFromValues(t *testing.T) {
	cases := map[string]struct {
		rel  release
		want map[string]string
	}{
		"defaults": {
			rel: releases["defaults (self-managed certificates)"],
			want: map[string]string{
				"argocd-namespace": "argocd", "environment-label": "env",
				"vm-chart-repo-url": "https://github.com/fleetvm/fleetvm.git", "vm-chart-path": "deploy/charts/fleetvm-vm",
				"vm-chart-name": "", "vm-chart-revision": "main", "removal-grace-period": "5m",
				"agent-image": "ghcr.io/fleetvm/fleetvm:v0.1.0", "addon-install-strategy": "Placements",
				"addon-placement-namespace": "open-cluster-management-addon", "addon-placement-name": "fleetvm-agent",
				"webhook-cert-mode": "self-managed", "metrics-bind-address": ":8443", "metrics-secure": "true", "webhook-port": "9443",
			},
		},
		"every value set": {
			rel: release{name: "fleetvm-hub", namespace: "hub", values: `
image: {repository: registry.example/fleetvm, tag: v9}
argocd: {namespace: openshift-gitops}
environmentLabel: stage
vmChart: {repoURL: https://charts.example, path: "", name: fleetvm-vm, revision: 0.3.0}
removalGracePeriod: 90s
diskImages: {namespace: vm-images, inventoryMaxAge: 30m}
workers: 8
kubeAPI: {burst: 50}
agent: {image: registry.example/agent:v9, installStrategy: Manual, placement: {namespace: addons, name: vms}}
logLevel: debug
extraArgs: [--kube-api-qps=5]
`},
			want: map[string]string{
				"argocd-namespace": "openshift-gitops", "environment-label": "stage",
				"vm-chart-repo-url": "https://charts.example", "vm-chart-path": "",
				"vm-chart-name": "fleetvm-vm", "vm-chart-revision": "0.3.0", "removal-grace-period": "90s", "workers": "8",
				"agent-image": "registry.example/agent:v9", "addon-install-strategy": "Manual",
				"addon-placement-namespace": "addons", "addon-placement-name": "vms",
				"webhook-cert-mode": "self-managed", "metrics-bind-address": ":8443", "metrics-secure": "true", "webhook-port": "9443",
				"zap-log-level": "debug", "kube-api-qps": "5", "kube-api-burst": "50",
				"image-namespace": "vm-images", "image-inventory-max-age": "30m",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := mustRender(t, tc.rel)
			d := one[appsv1.Deployment](t, r, "Deployment")
			got := args(t, d)
			// extraArgs come last and win over the chart's own.
			if name == "every value set" {
				all := d.Spec.Template.Spec.Containers[0].Args
				if all[len(all)-1] != "--kube-api-qps=5" {
					t.Errorf("last argument %q, want the extra argument", all[len(all)-1])
				}
			}
			for k, v := range tc.want {
				if g, ok := got[k]; !ok || g != v {
					t.Errorf("--%s = %q (set: %v), want %q", k, g, ok, v)
				}
			}
			// Unset, fleetvm-hub picks them from the CPUs it gets.
			if name == "defaults" {
				for _, k := range []string{"workers", "kube-api-qps", "kube-api-burst"} {
					if g, ok := got[k]; ok {
						t.Errorf("--%s = %q, want it unset by default", k, g)
					}
				}
			}
			if img := d.Spec.Template.Spec.Containers[0].Image; name == "every value set" && img != "registry.example/fleetvm:v9" {
				t.Errorf("image %q, want registry.example/fleetvm:v9", img)
			}
		})
	}
}

// TestRBACLeastPrivilege: no wildcard anywhere, no binding to a role the
// chart does not define (cluster-admin, admin, edit, ...), bindings only
// for the chart's ServiceAccount, no cluster-wide access to Secrets, and
// the hub's ClusterRole and its Role in Argo CD's namespace hold exactly
// the rules controller-gen generates from the code's markers (files/role.yaml
// in the chart: the copy of deploy/rbac/role.yaml that make manifests writes
// and make verify checks), the Role only in argocd.namespace.
func TestRBACLeastPrivilege(t *testing.T) {
	generated, err := fleetenv.ReadHubRBAC(filepath.Join(chartDir(t), "files", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for name, rel := range releases {
		t.Run(name, func(t *testing.T) {
			r := mustRender(t, rel)
			sa := one[corev1.ServiceAccount](t, r, "ServiceAccount")
			d := one[appsv1.Deployment](t, r, "Deployment")
			if d.Spec.Template.Spec.ServiceAccountName != sa.Name {
				t.Errorf("Deployment runs as %q, want the chart's ServiceAccount %q", d.Spec.Template.Spec.ServiceAccountName, sa.Name)
			}
			defined := map[string]bool{}
			for _, kind := range []string{"Role", "ClusterRole"} {
				for _, u := range r.ofKind(kind) {
					defined[kind+"/"+u.GetName()] = true
					role := convert[rbacv1.ClusterRole](t, u) // Role and ClusterRole share rules.
					for _, rule := range role.Rules {
						for _, list := range [][]string{rule.Verbs, rule.Resources, rule.APIGroups, rule.NonResourceURLs} {
							if slices.Contains(list, "*") {
								t.Errorf("%s %s: wildcard in rule %+v", kind, u.GetName(), rule)
							}
						}
						if kind == "ClusterRole" && slices.Contains(rule.APIGroups, "") && slices.Contains(rule.Resources, "secrets") {
							t.Errorf("ClusterRole %s grants %v on Secrets cluster-wide", u.GetName(), rule.Verbs)
						}
					}
				}
			}
			for _, kind := range []string{"RoleBinding", "ClusterRoleBinding"} {
				for _, u := range r.ofKind(kind) {
					binding := convert[rbacv1.RoleBinding](t, u)
					if ref := binding.RoleRef.Kind + "/" + binding.RoleRef.Name; !defined[ref] {
						t.Errorf("%s %s binds %s, which the chart does not define", kind, u.GetName(), ref)
					}
					want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: rel.namespace}}
					if diff := cmp.Diff(want, binding.Subjects); diff != "" {
						t.Errorf("%s %s subjects (-want,+got):\n%s", kind, u.GetName(), diff)
					}
				}
			}
			roles := map[string]*rbacv1.ClusterRole{}
			for _, u := range r.ofKind("ClusterRole") {
				roles[u.GetName()] = convert[rbacv1.ClusterRole](t, u)
			}
			hubRole, agentRole := roles[rel.fullname()], roles[rel.fullname()+"-agent-permissions"]
			if hubRole == nil || agentRole == nil {
				t.Fatalf("ClusterRoles %s and %s-agent-permissions: got %v", rel.fullname(), rel.fullname(), slices.Collect(maps.Keys(roles)))
			}
			if diff := cmp.Diff(generated.ClusterRole.Rules, hubRole.Rules); diff != "" {
				t.Errorf("hub ClusterRole rules differ from the generated ones in files/role.yaml (-generated,+chart):\n%s", diff)
			}
			var argoRole *rbacv1.Role
			for _, u := range r.ofKind("Role") {
				if u.GetName() == rel.fullname() {
					argoRole = convert[rbacv1.Role](t, u)
				}
			}
			argoNS := args(t, d)["argocd-namespace"]
			switch {
			case argoRole == nil:
				t.Errorf("no Role %s for Argo CD's namespace", rel.fullname())
			case argoRole.Namespace != argoNS:
				t.Errorf("Role %s is in namespace %q, want Argo CD's %q (the hub's --argocd-namespace)", argoRole.Name, argoRole.Namespace, argoNS)
			default:
				if diff := cmp.Diff(generated.ArgoRole.Rules, argoRole.Rules); diff != "" {
					t.Errorf("hub Role rules differ from the generated ones in files/role.yaml (-generated,+chart):\n%s", diff)
				}
			}
			// What the hub grants each agent, it must hold.
			if diff := cmp.Diff(addon.AgentHubRules(), agentRole.Rules); diff != "" {
				t.Errorf("agent-permissions ClusterRole differs from the Role pkg/addon grants each agent (-addon,+chart):\n%s", diff)
			}
		})
	}
}

// fullname is the chart's name for the release's objects.
func (r release) fullname() string {
	if strings.Contains(r.name, "fleetvm-hub") {
		return r.name
	}
	return r.name + "-fleetvm-hub"
}

// TestWebhookWiring checks that the names the hub is given, the objects
// the chart creates and the webhook configuration agree, for each
// certificate mode.
func TestWebhookWiring(t *testing.T) {
	for name, rel := range releases {
		t.Run(name, func(t *testing.T) {
			r := mustRender(t, rel)
			d := one[appsv1.Deployment](t, r, "Deployment")
			a := args(t, d)
			vwc := one[admissionregistrationv1.ValidatingWebhookConfiguration](t, r, "ValidatingWebhookConfiguration")
			mwc := one[admissionregistrationv1.MutatingWebhookConfiguration](t, r, "MutatingWebhookConfiguration")
			// One name for both: the hub writes the CA bundle into the
			// two configurations --webhook-configuration-name names.
			if mwc.Name != vwc.Name {
				t.Errorf("MutatingWebhookConfiguration %s, ValidatingWebhookConfiguration %s: want one name", mwc.Name, vwc.Name)
			}
			// The finalizer webhook fails open and sees creates only
			// (pkg/webhook/finalizer.go says why).
			if n := len(mwc.Webhooks); n != 1 {
				t.Fatalf("MutatingWebhookConfiguration holds %d webhooks, want the finalizer webhook alone", n)
			}
			if w := mwc.Webhooks[0]; w.Name != fleetwebhook.FinalizerWebhookName ||
				ptr.Deref(w.FailurePolicy, "") != admissionregistrationv1.Ignore ||
				ptr.Deref(w.ReinvocationPolicy, "") != admissionregistrationv1.NeverReinvocationPolicy ||
				ptr.Deref(w.SideEffects, "") != admissionregistrationv1.SideEffectClassNone ||
				len(w.Rules) != 1 || !slices.Equal(w.Rules[0].Operations, []admissionregistrationv1.OperationType{admissionregistrationv1.Create}) {
				t.Errorf("finalizer webhook %s: failurePolicy %v, reinvocationPolicy %v, sideEffects %v, rules %+v; want %s, Ignore, Never, None, CREATE only",
					w.Name, ptr.Deref(w.FailurePolicy, ""), ptr.Deref(w.ReinvocationPolicy, ""), ptr.Deref(w.SideEffects, ""), w.Rules, fleetwebhook.FinalizerWebhookName)
			}
			var svc *corev1.Service
			for _, u := range r.ofKind("Service") {
				if s := convert[corev1.Service](t, u); s.Spec.Ports[0].Name == "webhook" {
					svc = s
				}
			}
			if svc == nil {
				t.Fatal("no webhook Service")
			}
			if diff := cmp.Diff(d.Spec.Selector.MatchLabels, svc.Spec.Selector); diff != "" {
				t.Errorf("webhook Service selects other pods than the Deployment's (-deployment,+service):\n%s", diff)
			}
			if tp := svc.Spec.Ports[0].TargetPort.String(); tp != "webhook" || a["webhook-port"] != "9443" {
				t.Errorf("webhook Service targets %q, hub serves on %q; want the container port named webhook, 9443", tp, a["webhook-port"])
			}
			clientConfigs := map[string]admissionregistrationv1.WebhookClientConfig{}
			for _, w := range vwc.Webhooks {
				clientConfigs[w.Name] = w.ClientConfig
			}
			for _, w := range mwc.Webhooks {
				clientConfigs[w.Name] = w.ClientConfig
			}
			for name, cc := range clientConfigs {
				s := cc.Service
				if s == nil || s.Name != svc.Name || s.Namespace != rel.namespace || (s.Port != nil && *s.Port != svc.Spec.Ports[0].Port) {
					t.Errorf("webhook %s calls %+v, want Service %s/%s port %d", name, s, rel.namespace, svc.Name, svc.Spec.Ports[0].Port)
				}
			}
			dnsName := svc.Name + "." + rel.namespace + ".svc"

			certManager := strings.Contains(rel.values, "certManager")
			if !certManager {
				want := map[string]string{
					"webhook-cert-mode": "self-managed", "webhook-namespace": rel.namespace,
					"webhook-service-name": svc.Name, "webhook-configuration-name": vwc.Name,
					"webhook-secret-name": one[corev1.Secret](t, r, "Secret").Name,
				}
				for k, v := range want {
					if a[k] != v {
						t.Errorf("--%s = %q, want %q", k, a[k], v)
					}
				}
				if len(vwc.Annotations) != 0 || len(mwc.Annotations) != 0 || len(d.Spec.Template.Spec.Volumes) != 0 {
					t.Errorf("self-managed: annotations %v and %v, volumes %v, want none", vwc.Annotations, mwc.Annotations, d.Spec.Template.Spec.Volumes)
				}
				// The certificate RBAC names exactly the Secret and the
				// two webhook configurations.
				for _, u := range slices.Concat(r.ofKind("Role"), r.ofKind("ClusterRole")) {
					if !strings.HasSuffix(u.GetName(), "-webhook-cert") {
						continue
					}
					role := convert[rbacv1.ClusterRole](t, u)
					wantName := want["webhook-secret-name"]
					if u.GetKind() == "ClusterRole" {
						wantName = vwc.Name
					}
					var resources []string
					for _, rule := range role.Rules {
						if !slices.Equal(rule.ResourceNames, []string{wantName}) {
							t.Errorf("%s %s rule %+v, want resourceNames [%s]", u.GetKind(), u.GetName(), rule, wantName)
						}
						resources = append(resources, rule.Resources...)
					}
					if u.GetKind() == "ClusterRole" {
						slices.Sort(resources)
						if diff := cmp.Diff([]string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"}, resources); diff != "" {
							t.Errorf("ClusterRole %s resources (-want,+got):\n%s", u.GetName(), diff)
						}
					}
				}
				return
			}

			// cert-manager: a Certificate for the Service into the Secret
			// the hub mounts, its CA injected into the configuration.
			if len(r.ofKind("Secret")) != 0 {
				t.Error("cert-manager mode renders a Secret; cert-manager writes it")
			}
			cert := r.ofKind("Certificate")[0]
			secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
			dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
			if !slices.Contains(dnsNames, dnsName) {
				t.Errorf("Certificate DNS names %v, want %s among them", dnsNames, dnsName)
			}
			for _, annotations := range []map[string]string{vwc.Annotations, mwc.Annotations} {
				if got, want := annotations["cert-manager.io/inject-ca-from"], rel.namespace+"/"+cert.GetName(); got != want {
					t.Errorf("inject-ca-from = %q, want %q", got, want)
				}
			}
			vols, mounts := d.Spec.Template.Spec.Volumes, d.Spec.Template.Spec.Containers[0].VolumeMounts
			if len(vols) != 1 || vols[0].Secret == nil || vols[0].Secret.SecretName != secretName ||
				len(mounts) != 1 || mounts[0].Name != vols[0].Name || mounts[0].MountPath != a["webhook-cert-dir"] || !mounts[0].ReadOnly {
				t.Errorf("volumes %+v, mounts %+v; want Secret %s mounted read-only at --webhook-cert-dir %q", vols, mounts, secretName, a["webhook-cert-dir"])
			}
			if a["webhook-cert-mode"] != "external" {
				t.Errorf("--webhook-cert-mode = %q, want external", a["webhook-cert-mode"])
			}
			issuerKind, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "kind")
			issuerName, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
			issuers := r.ofKind("Issuer")
			switch {
			case strings.Contains(rel.values, "issuerRef"):
				if issuerKind != "ClusterIssuer" || issuerName != "corp-ca" || len(issuers) != 0 {
					t.Errorf("Certificate issued by %s %s with %d Issuers rendered; want the given ClusterIssuer corp-ca and none", issuerKind, issuerName, len(issuers))
				}
			default:
				if len(issuers) != 1 || issuerKind != "Issuer" || issuerName != issuers[0].GetName() {
					t.Errorf("Certificate issued by %s %s; want the chart's self-signed Issuer", issuerKind, issuerName)
				}
			}
		})
	}
}
