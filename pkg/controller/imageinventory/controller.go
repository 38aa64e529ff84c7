// Package imageinventory feeds the clusters' ImageInventories into the
// hub's fleet-wide image reference tally, and wakes the FleetVirtualMachines
// whose status shows a total that changed.
package imageinventory

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/imagerefs"
	"github.com/fleetvm/fleetvm/pkg/write"
)

// Reconciler keeps Tally equal to the ImageInventories on the hub. One
// reconcile handles one cluster.
type Reconciler struct {
	Client client.Client
	Tally  *imagerefs.Tally
	// Notify receives the FleetVirtualMachines to reconcile because a total
	// they show changed. Sends block, so the receiver must keep up (the
	// controller-runtime channel source does).
	Notify chan<- event.GenericEvent
}

// +kubebuilder:rbac:groups=fleetvm.io,resources=imageinventories,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.open-cluster-management.io,resources=managedclusters,verbs=get;list;watch

// Reconcile reads one cluster's inventory. req.Namespace is the cluster.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cluster := req.Namespace
	counts, err := r.counts(ctx, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	for _, key := range r.Tally.Set(cluster, counts) {
		obj := &fleetv1alpha1.FleetVirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		select {
		case r.Notify <- event.GenericEvent{Object: obj}:
		case <-ctx.Done():
			return ctrl.Result{}, ctx.Err()
		}
	}
	return ctrl.Result{}, nil
}

// counts returns the cluster's image counts; none when its inventory is
// gone or the namespace is not a managed cluster's (only a cluster's own
// agent can write in its namespace, so only those inventories count).
func (r *Reconciler) counts(ctx context.Context, cluster string) (map[string]int32, error) {
	inv := &fleetv1alpha1.ImageInventory{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: cluster, Name: fleetv1alpha1.ImageInventoryName}, inv)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get ImageInventory of %s: %w", cluster, err)
	}
	if err := r.Client.Get(ctx, types.NamespacedName{Name: cluster}, &clusterv1.ManagedCluster{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get ManagedCluster %s: %w", cluster, err)
	}
	counts := make(map[string]int32, len(inv.Spec.Images))
	for _, i := range inv.Spec.Images {
		if i.References > 0 {
			counts[i.Image] = i.References
		}
	}
	return counts, nil
}

// SetupWithManager registers the controller: ImageInventories named
// "images", and ManagedClusters (a cluster that joins or leaves adds or
// removes its counts).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	byCluster := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetName(), Name: fleetv1alpha1.ImageInventoryName}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("imageinventory").
		For(&fleetv1alpha1.ImageInventory{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetName() == fleetv1alpha1.ImageInventoryName
		}), predicate.GenerationChangedPredicate{})).
		Watches(&clusterv1.ManagedCluster{}, byCluster, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(event.UpdateEvent) bool { return false },
		})).
		Complete(write.Requeue(r))
}
