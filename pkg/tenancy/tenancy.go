// Package tenancy holds FleetVM's tenant rules that the admission webhook
// and the FleetVirtualMachine controller share: which Argo CD AppProject a
// FleetVirtualMachine's Applications run under.
//
// A FleetVirtualMachine in namespace N delivers only its VM (and the kinds
// the hub operator allows), only into N. Argo CD enforces that on every
// resource an Application syncs, through the Application's AppProject:
// its destinations (namespace N only) and its resource whitelists (no
// cluster-scoped kind, the allowed namespaced kinds). FleetVM's
// Applications live in Argo CD's own namespace, where Argo CD lets an
// Application name any project; so FleetVM decides which projects a
// FleetVirtualMachine may name, by Argo CD's own rule for Applications in
// other namespaces: a project lists the namespaces it serves in
// spec.sourceNamespaces.
//
// On the clusters, the same project names the namespace's ServiceAccount
// (ServiceAccountName) in spec.destinationServiceAccounts: with Argo CD's
// sync impersonation on, Argo CD applies a team's objects as that account,
// which holds only the tenant kinds in its namespace (ClusterObjects), so
// the cluster's RBAC and CDI's and KubeVirt's clone authorization confine
// what a git repository holds, whatever is inside its objects.
package tenancy

import (
	"flag"
	"fmt"
	"strings"

	"github.com/dlclark/regexp2"
	"github.com/gobwas/glob"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// LabelNamespace marks the AppProject FleetVM makes for a namespace.
const LabelNamespace = "fleetvm.io/tenant-namespace"

// ProjectName is the AppProject FleetVM makes for the FleetVirtualMachines
// of a namespace: "fleetvm-<namespace>".
func ProjectName(namespace string) string {
	return "fleetvm-" + namespace
}

// DefaultKinds are the namespaced kinds a namespace's project allows
// unless the hub operator says otherwise: the VM, its DataVolumes, and the
// ConfigMaps and Secrets cloud-init and sysprep read.
func DefaultKinds() []metav1.GroupKind {
	return []metav1.GroupKind{
		{Group: "kubevirt.io", Kind: "VirtualMachine"},
		{Group: "cdi.kubevirt.io", Kind: "DataVolume"},
		{Group: "", Kind: "ConfigMap"},
		{Group: "", Kind: "Secret"},
	}
}

// AppProjectGVK is Argo CD's AppProject kind. The hub reads and writes
// AppProjects unstructured (NewAppProject): it holds one per namespace,
// and a write of the one FleetVM makes (Project) replaces every field of
// the spec, not only those FleetVM sets, so nothing someone added to it
// (a cluster-scoped whitelist, say) outlives FleetVM's next write.
var AppProjectGVK = schema.GroupVersionKind{Group: "argoproj.io", Version: "v1alpha1", Kind: "AppProject"}

// NewAppProject is an empty AppProject to read into.
func NewAppProject() *unstructured.Unstructured {
	p := &unstructured.Unstructured{}
	p.SetGroupVersionKind(AppProjectGVK)
	return p
}

// Project builds the AppProject of a namespace: Applications under it may
// deploy only into that namespace, on any cluster, only the kinds given,
// and nothing cluster-scoped (not even the namespace itself: FleetVM
// creates it on the clusters through OCM, see the controller). With sync
// impersonation on, Argo CD syncs them as the namespace's ServiceAccount
// on every cluster.
func Project(argoNamespace, namespace string, kinds []metav1.GroupKind, labels map[string]string) *unstructured.Unstructured {
	whitelist := make([]any, len(kinds))
	for i, k := range kinds {
		whitelist[i] = map[string]any{"group": k.Group, "kind": k.Kind}
	}
	p := NewAppProject()
	p.SetName(ProjectName(namespace))
	p.SetNamespace(argoNamespace)
	p.SetLabels(labels)
	p.Object["spec"] = map[string]any{
		"description":                fmt.Sprintf("FleetVM: the VMs of the FleetVirtualMachines of namespace %s, only into that namespace", namespace),
		"sourceRepos":                []any{"*"},
		"destinations":               []any{map[string]any{"server": "*", "name": "*", "namespace": namespace}},
		"sourceNamespaces":           []any{namespace},
		"namespaceResourceWhitelist": whitelist,
		"destinationServiceAccounts": []any{map[string]any{
			"server": "*", "namespace": namespace, "defaultServiceAccount": namespace + ":" + ServiceAccountName,
		}},
	}
	return p
}

// SourceNamespaces is an AppProject's spec.sourceNamespaces.
func SourceNamespaces(p *unstructured.Unstructured) []string {
	out, _, _ := unstructured.NestedStringSlice(p.Object, "spec", "sourceNamespaces")
	return out
}

// ServesNamespace tells whether a project serves a namespace: it lists
// the namespace in spec.sourceNamespaces, with Argo CD's own matching
// (its AppProject.IsAppNamespacePermitted): an entry between slashes is a
// regular expression (.NET syntax, as Argo CD compiles it), any other a
// glob.
func ServesNamespace(p *unstructured.Unstructured, namespace string) bool {
	if namespace == "" {
		return false
	}
	for _, pattern := range SourceNamespaces(p) {
		if len(pattern) >= 2 && strings.HasPrefix(pattern, "/") && strings.HasSuffix(pattern, "/") && matchRegexp(pattern[1:len(pattern)-1], namespace) {
			return true
		}
		if g, err := glob.Compile(pattern); err == nil && g.Match(namespace) {
			return true
		}
	}
	return false
}

func matchRegexp(pattern, s string) bool {
	re, err := regexp2.Compile(pattern, 0)
	if err != nil {
		return false
	}
	ok, err := re.MatchString(s)
	return err == nil && ok
}

// ProjectFor is the project a FleetVirtualMachine's Applications run
// under: spec.delivery.project, or the namespace's own project when empty.
func ProjectFor(namespace, requested string) string {
	if requested == "" {
		return ProjectName(namespace)
	}
	return requested
}

// KindsFlag is a flag.Value of kinds written "group/Kind" ("Kind" or
// "/Kind" for the core group), comma-separated.
func KindsFlag(kinds *[]metav1.GroupKind) flag.Value { return &kindsFlag{kinds: kinds} }

type kindsFlag struct{ kinds *[]metav1.GroupKind }

func (f *kindsFlag) String() string {
	if f.kinds == nil {
		return ""
	}
	out := make([]string, len(*f.kinds))
	for i, k := range *f.kinds {
		out[i] = k.Group + "/" + k.Kind
	}
	return strings.Join(out, ",")
}

func (f *kindsFlag) Set(v string) error {
	var kinds []metav1.GroupKind
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		group, kind, found := strings.Cut(item, "/")
		if !found {
			group, kind = "", item
		}
		if kind == "" || strings.ContainsAny(kind, "*/") || strings.Contains(group, "*") {
			return fmt.Errorf("%q: want group/Kind, no wildcard", item)
		}
		kinds = append(kinds, metav1.GroupKind{Group: group, Kind: kind})
	}
	*f.kinds = kinds
	return nil
}
