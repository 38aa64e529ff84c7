package fleetvirtualmachine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/status"
)

// In Argo CD's namespace only (the manager caches only argocd-cm there):
// +kubebuilder:rbac:groups="",namespace=argocd,resources=configmaps,verbs=get;list;watch

// ArgoCDConfigMap is Argo CD's settings ConfigMap; its key
// status.ImpersonationKey turns sync impersonation on (Argo CD 2.13 and
// later).
const ArgoCDConfigMap = "argocd-cm"

// readImpersonation reads argocd-cm from the cache. Argo CD itself syncs
// nothing without it, so a missing one is Unknown, not off.
func (r *Reconciler) readImpersonation(ctx context.Context) status.Impersonation {
	cm := &corev1.ConfigMap{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: r.Config.ArgoNamespace, Name: ArgoCDConfigMap}, cm)
	switch {
	case apierrors.IsNotFound(err):
		return status.Impersonation{Problem: fmt.Sprintf("ConfigMap %s/%s not found", r.Config.ArgoNamespace, ArgoCDConfigMap)}
	case err != nil:
		return status.Impersonation{Problem: fmt.Sprintf("read ConfigMap %s/%s: %v", r.Config.ArgoNamespace, ArgoCDConfigMap, err)}
	}
	return status.Impersonation{Known: true, Enabled: impersonationEnabled(cm)}
}

// impersonationEnabled is Argo CD's own test (settings.IsImpersonationEnabled).
func impersonationEnabled(cm *corev1.ConfigMap) bool {
	return cm.Data[status.ImpersonationKey] == "true"
}

// isArgoCDConfigMap selects argocd-cm in the Argo CD namespace.
func (r *Reconciler) isArgoCDConfigMap(obj client.Object) bool {
	return obj.GetNamespace() == r.Config.ArgoNamespace && obj.GetName() == ArgoCDConfigMap
}

// argoSettingsChanged passes argocd-cm events that change what the
// Confined condition says: created, deleted, or impersonation switched.
func (r *Reconciler) argoSettingsChanged() predicate.Predicate {
	return predicate.And(
		predicate.NewPredicateFuncs(r.isArgoCDConfigMap),
		updateChanged(func(o, n *corev1.ConfigMap) bool { return impersonationEnabled(o) != impersonationEnabled(n) }),
	)
}

// allFleetVMs maps argocd-cm to every FleetVirtualMachine: each says
// whether Argo CD confines it.
func (r *Reconciler) allFleetVMs(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.fleetVMsMatching(ctx, "for Argo CD's settings", obj)
}
