package fleetvirtualmachine

import (
	"errors"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/delivery"
)

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

// renderer renders ApplicationSets with the hub's settings.
func (r *Reconciler) renderer() delivery.Renderer {
	return delivery.Renderer{ArgoNamespace: r.Config.ArgoNamespace, ImageNamespace: r.Config.ImageNamespace, Chart: r.Config.Chart}
}
