package delivery

import (
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// LabelClusterSet marks the shared objects of a cluster set.
const LabelClusterSet = "fleetvm.io/cluster-set"

// OwnerLabels name the FleetVirtualMachine an object in the Argo CD
// namespace (or a VM on a cluster) belongs to; a watch maps them back.
func OwnerLabels(fvm *fleetv1alpha1.FleetVirtualMachine) map[string]string {
	return map[string]string{
		fleetv1alpha1.LabelFleetVMName:      fvm.Name,
		fleetv1alpha1.LabelFleetVMNamespace: fvm.Namespace,
		fleetv1alpha1.LabelPartOf:           fleetv1alpha1.PartOfValue,
	}
}

// OwnerKey reads the FleetVirtualMachine an object belongs to.
func OwnerKey(obj client.Object) (types.NamespacedName, bool) {
	var name, ns string
	if held, ok := obj.(interface{ Label(string) string }); ok {
		// A cached Application holds its labels without a map
		// (argoapp.Trim): read them without making one.
		name, ns = held.Label(fleetv1alpha1.LabelFleetVMName), held.Label(fleetv1alpha1.LabelFleetVMNamespace)
	} else {
		l := obj.GetLabels()
		name, ns = l[fleetv1alpha1.LabelFleetVMName], l[fleetv1alpha1.LabelFleetVMNamespace]
	}
	if name == "" || ns == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: ns, Name: name}, true
}

func ManagedLabels() map[string]string {
	return map[string]string{fleetv1alpha1.LabelPartOf: fleetv1alpha1.PartOfValue}
}

func SharedLabels(set string) map[string]string {
	l := ManagedLabels()
	l[LabelClusterSet] = set
	return l
}

func IsOwnedBy(obj client.Object, fvm *fleetv1alpha1.FleetVirtualMachine) bool {
	key, ok := OwnerKey(obj)
	return ok && key == client.ObjectKeyFromObject(fvm)
}
