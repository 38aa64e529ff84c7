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

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// Project builds the AppProject of a namespace: Applications under it may
// deploy only into that namespace, on any cluster, only the kinds given,
// and nothing cluster-scoped (not even the namespace itself: FleetVM
// creates it on the clusters through OCM, see the controller). With sync
// impersonation on, Argo CD syncs them as the namespace's ServiceAccount
// on every cluster.
func Project(argoNamespace, namespace string, kinds []metav1.GroupKind, labels map[string]string) *argov1alpha1.AppProject {
	return &argov1alpha1.AppProject{
		ObjectMeta: metav1.ObjectMeta{Name: ProjectName(namespace), Namespace: argoNamespace, Labels: labels},
		Spec: argov1alpha1.AppProjectSpec{
			Description:                fmt.Sprintf("FleetVM: the VMs of the FleetVirtualMachines of namespace %s, only into that namespace", namespace),
			SourceRepos:                []string{"*"},
			Destinations:               []argov1alpha1.ApplicationDestination{{Server: "*", Name: "*", Namespace: namespace}},
			SourceNamespaces:           []string{namespace},
			NamespaceResourceWhitelist: append([]metav1.GroupKind(nil), kinds...),
			DestinationServiceAccounts: []argov1alpha1.ApplicationDestinationServiceAccount{{
				Server: "*", Namespace: namespace, DefaultServiceAccount: namespace + ":" + ServiceAccountName,
			}},
		},
	}
}

// ServesNamespace tells whether a project serves a namespace: it lists
// the namespace in spec.sourceNamespaces (with Argo CD's own matching,
// globs and /regular expressions/ included).
func ServesNamespace(p *argov1alpha1.AppProject, namespace string) bool {
	if namespace == "" {
		return false
	}
	return p.IsAppNamespacePermitted(&argov1alpha1.Application{ObjectMeta: metav1.ObjectMeta{Namespace: namespace}}, "")
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
