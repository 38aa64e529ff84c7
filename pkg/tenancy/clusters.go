package tenancy

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ServiceAccountName is the ServiceAccount FleetVM makes in a team's
// namespace on every cluster it delivers to. The namespace's AppProject
// names it in spec.destinationServiceAccounts, so with Argo CD's sync
// impersonation on, everything a team's Applications sync is applied as
// system:serviceaccount:<namespace>:fleetvm-tenant, and the cluster's own
// RBAC, and KubeVirt's and CDI's clone authorization, which check the
// requesting user, confine what a git repository holds.
const ServiceAccountName = "fleetvm-tenant"

// ServiceAccountUser is the user name Argo CD impersonates for a
// namespace's Applications.
func ServiceAccountUser(namespace string) string {
	return "system:serviceaccount:" + namespace + ":" + ServiceAccountName
}

// ImageRoleName is the Role and RoleBinding, in FleetVM's image namespace
// on a cluster, that let a namespace's ServiceAccount clone that
// namespace's own disk images. Namespace names are unique, so two teams'
// never meet.
func ImageRoleName(namespace string) string {
	return "fleetvm-tenant-" + namespace
}

// tenantVerbs are what a team's ServiceAccount may do with the tenant
// kinds: what Argo CD's sync (apply, prune, its diffs) needs.
var tenantVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete"}

// ClusterObjects are what a namespace's ServiceAccount holds on a cluster:
// the ServiceAccount; a Role and RoleBinding that grant exactly the tenant
// kinds (the kinds the namespace's AppProject allows), in the namespace
// only; and, when the namespace has disk images, a Role and RoleBinding in
// the image namespace granting create on datavolumes/source (CDI's clone
// permission) for those images only, by name. CDI and KubeVirt ask for
// that permission with the source PVC's name (FleetVM's image DataSource,
// DataVolume and PVC share it, see package diskimage), so a team clones
// its own images and no other team's. With no image, no such Role: an
// empty resourceNames would grant every name.
//
// Kinds become resources by the usual lower-case plural
// (meta.UnsafeGuessKindToResource): VirtualMachine → virtualmachines.
func ClusterObjects(namespace, imageNamespace string, kinds []metav1.GroupKind, images []string) []client.Object {
	labels := map[string]string{"app.kubernetes.io/managed-by": "fleetvm", LabelNamespace: namespace}
	subject := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: ServiceAccountName, Namespace: namespace}
	sa := &corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: ServiceAccountName, Labels: labels},
	}
	role := &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "Role"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: ServiceAccountName, Labels: labels},
		Rules:      kindRules(kinds),
	}
	binding := &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: ServiceAccountName, Labels: labels},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{subject},
	}
	out := []client.Object{sa, role, binding}
	if len(images) == 0 || imageNamespace == "" {
		return out
	}
	names := slices.Clone(images)
	slices.Sort(names)
	names = slices.Compact(names)
	imageRole := &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "Role"},
		ObjectMeta: metav1.ObjectMeta{Namespace: imageNamespace, Name: ImageRoleName(namespace), Labels: labels},
		Rules: []rbacv1.PolicyRule{{
			APIGroups:     []string{"cdi.kubevirt.io"},
			Resources:     []string{"datavolumes/source"},
			Verbs:         []string{"create"},
			ResourceNames: names,
		}},
	}
	imageBinding := &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Namespace: imageNamespace, Name: ImageRoleName(namespace), Labels: labels},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: imageRole.Name},
		Subjects:   []rbacv1.Subject{subject},
	}
	return append(out, imageRole, imageBinding)
}

// kindRules grants tenantVerbs on the kinds, one rule per API group, in a
// stable order.
func kindRules(kinds []metav1.GroupKind) []rbacv1.PolicyRule {
	byGroup := map[string][]string{}
	for _, k := range kinds {
		plural, _ := meta.UnsafeGuessKindToResource(schema.GroupVersionKind{Group: k.Group, Kind: k.Kind})
		byGroup[k.Group] = append(byGroup[k.Group], plural.Resource)
	}
	var rules []rbacv1.PolicyRule
	for group, resources := range byGroup {
		slices.Sort(resources)
		rules = append(rules, rbacv1.PolicyRule{
			APIGroups: []string{group},
			Resources: slices.Compact(resources),
			Verbs:     slices.Clone(tenantVerbs),
		})
	}
	slices.SortFunc(rules, func(a, b rbacv1.PolicyRule) int { return cmp.Compare(a.APIGroups[0], b.APIGroups[0]) })
	return rules
}
