// Package movettl deletes FleetVirtualMachineMoves some time after they
// ended, as Kubernetes' TTL-after-finished controller does for Jobs: a
// move that Succeeded or Failed is deleted spec.ttlSecondsAfterFinished
// (default fleetv1alpha1.DefaultMoveTTLSecondsAfterFinished) after its
// status.completionTime. Moves not ended are never touched.
//
// A drain's record outlives the TTL while the drain runs: a move a drain
// made (drain.Made) is kept as long as its ManagedCluster carries the
// drain taint. The drain controller reads its ended moves to know which
// copies it already moved and which failed (it does not try those again),
// and kubectl fleetvm drain shows them; deleting one mid-drain would make
// the drain move the copy again and lose the failure it reported. Once
// the taint is gone the drain controller deletes its ended moves itself,
// and those it leaves (ended later, or of a cluster gone) go by their TTL.
package movettl

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/drain"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine"
)

// +kubebuilder:rbac:groups=fleetvm.io,resources=fleetvirtualmachinemoves,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=cluster.open-cluster-management.io,resources=managedclusters,verbs=get;list;watch

// Reconciler deletes ended moves once their TTL has passed.
type Reconciler struct {
	Client client.Client
	Clock  clock.PassiveClock
}

// SetupWithManager watches ended moves, and ManagedClusters whose drain
// starts or ends (a drain holds its moves).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("movettl").
		For(&fleetv1alpha1.FleetVirtualMachineMove{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			m, ok := o.(*fleetv1alpha1.FleetVirtualMachineMove)
			return ok && m.Status.Phase.Terminal()
		}))).
		Watches(&clusterv1.ManagedCluster{}, handler.EnqueueRequestsFromMapFunc(r.movesOfDrain), builder.WithPredicates(predicate.Funcs{
			CreateFunc:  func(event.CreateEvent) bool { return false },
			GenericFunc: func(event.GenericEvent) bool { return false },
			UpdateFunc: func(e event.UpdateEvent) bool {
				o, okOld := e.ObjectOld.(*clusterv1.ManagedCluster)
				n, okNew := e.ObjectNew.(*clusterv1.ManagedCluster)
				return okOld && okNew && fleetvirtualmachine.Draining(o) != fleetvirtualmachine.Draining(n)
			},
		})).
		Complete(r)
}

// movesOfDrain maps a ManagedCluster to the ended moves labelled with its
// drain: they may be held no more.
func (r *Reconciler) movesOfDrain(ctx context.Context, o client.Object) []reconcile.Request {
	list := &fleetv1alpha1.FleetVirtualMachineMoveList{}
	if err := r.Client.List(ctx, list, client.MatchingLabels{fleetv1alpha1.LabelDrain: o.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "list a drain's moves", "cluster", o.GetName())
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if m := &list.Items[i]; m.Status.Phase.Terminal() {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: m.Namespace, Name: m.Name}})
		}
	}
	return out
}

// Reconcile deletes one move if its TTL has passed, or comes back when it
// will have.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	m := &fleetv1alpha1.FleetVirtualMachineMove{}
	if err := r.Client.Get(ctx, req.NamespacedName, m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	held, err := r.heldByDrain(ctx, m)
	if err != nil {
		return ctrl.Result{}, err
	}
	d := Decide(m, r.Clock.Now(), held)
	if !d.Delete {
		return ctrl.Result{RequeueAfter: d.After}, nil
	}
	// The UID: a move of the same name made since is not this one.
	if err := r.Client.Delete(ctx, m, client.Preconditions{UID: &m.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return ctrl.Result{}, fmt.Errorf("delete ended move %s: %w", klog.KObj(m), err)
	}
	log.FromContext(ctx).V(1).Info("deleted an ended move past its TTL", "move", klog.KObj(m), "phase", m.Status.Phase)
	return ctrl.Result{}, nil
}

// heldByDrain tells whether a drain still running made m.
func (r *Reconciler) heldByDrain(ctx context.Context, m *fleetv1alpha1.FleetVirtualMachineMove) (bool, error) {
	name := m.Labels[fleetv1alpha1.LabelDrain]
	if name == "" || !m.Status.Phase.Terminal() {
		return false, nil
	}
	mc := &clusterv1.ManagedCluster{}
	switch err := r.Client.Get(ctx, types.NamespacedName{Name: name}, mc); {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read ManagedCluster %s, whose drain may hold move %s: %w", name, klog.KObj(m), err)
	}
	return fleetvirtualmachine.Draining(mc) && drain.Made(m, mc), nil
}

// Decision is what to do with a move now: delete it, or look again
// after After (zero: when it changes).
type Decision struct {
	Delete bool
	After  time.Duration
}

// Decide decides for a move at now; held tells a drain still running
// made it. A move is deleted once it ended (Succeeded or Failed) and its
// TTL after status.completionTime has passed, and no running drain
// holds it. A move not ended, without a completion time or held, is
// kept, and looked at again when it or its drain changes.
func Decide(m *fleetv1alpha1.FleetVirtualMachineMove, now time.Time, held bool) Decision {
	if m.DeletionTimestamp != nil || !m.Status.Phase.Terminal() || m.Status.CompletionTime == nil || held {
		return Decision{}
	}
	expiry := Expiry(m)
	if now.Before(expiry) {
		return Decision{After: expiry.Sub(now)}
	}
	return Decision{Delete: true}
}

// Expiry is when an ended move's TTL passes: its completion time plus
// spec.ttlSecondsAfterFinished (the default when unset). Zero for a move
// without a completion time.
func Expiry(m *fleetv1alpha1.FleetVirtualMachineMove) time.Time {
	if m.Status.CompletionTime == nil {
		return time.Time{}
	}
	ttl := int32(fleetv1alpha1.DefaultMoveTTLSecondsAfterFinished)
	if m.Spec.TTLSecondsAfterFinished != nil {
		ttl = max(*m.Spec.TTLSecondsAfterFinished, 0)
	}
	return m.Status.CompletionTime.Add(time.Duration(ttl) * time.Second)
}
