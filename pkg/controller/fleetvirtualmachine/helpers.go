package fleetvirtualmachine

import (
	"errors"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// labelClusterSet marks the shared objects of a cluster set.
const labelClusterSet = "fleetvm.io/cluster-set"

// ownerLabels name the FleetVirtualMachine an object in the Argo CD
// namespace (or a VM on a cluster) belongs to; a watch maps them back.
func ownerLabels(fvm *fleetv1alpha1.FleetVirtualMachine) map[string]string {
	return map[string]string{
		fleetv1alpha1.LabelFleetVMName:      fvm.Name,
		fleetv1alpha1.LabelFleetVMNamespace: fvm.Namespace,
		fleetv1alpha1.LabelPartOf:           fleetv1alpha1.PartOfValue,
	}
}

// ownerKey reads the FleetVirtualMachine an object belongs to.
func ownerKey(obj client.Object) (types.NamespacedName, bool) {
	l := obj.GetLabels()
	name, ns := l[fleetv1alpha1.LabelFleetVMName], l[fleetv1alpha1.LabelFleetVMNamespace]
	if name == "" || ns == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: ns, Name: name}, true
}

func managedLabels() map[string]string {
	return map[string]string{fleetv1alpha1.LabelPartOf: fleetv1alpha1.PartOfValue}
}

func sharedLabels(set string) map[string]string {
	l := managedLabels()
	l[labelClusterSet] = set
	return l
}

func isOwnedBy(obj client.Object, fvm *fleetv1alpha1.FleetVirtualMachine) bool {
	key, ok := ownerKey(obj)
	return ok && key == client.ObjectKeyFromObject(fvm)
}

func withoutOwner(refs []metav1.OwnerReference, uid types.UID) []metav1.OwnerReference {
	var out []metav1.OwnerReference
	for _, r := range refs {
		if r.UID != uid {
			out = append(out, r)
		}
	}
	return out
}

func joinErrors(errs []error) error { return errors.Join(errs...) }

// sortedCopy returns the strings sorted, without changing in.
func sortedCopy(in []string) []string {
	out := slices.Clone(in)
	slices.Sort(out)
	return out
}
