package fleetvirtualmachine

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/capacity"
	"github.com/fleetvm/fleetvm/pkg/validation"
	"github.com/fleetvm/fleetvm/pkg/write"
)

// reconcileInvalid checks the spec against the rules admission checks
// (pkg/validation) and reports whether it breaks one. If it does, the
// reconcile ends here: the Placement, the ApplicationSet and the
// Applications stay as they are, so nothing new is placed or delivered
// and no VM is removed because of it; Ready and Placed say why, with the
// field errors.
func (r *Reconciler) reconcileInvalid(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine) (bool, error) {
	if r.valid.has(fvm) {
		return false, nil
	}
	_, errs := validation.FleetVirtualMachine(fvm, r.validationOptions())
	if len(errs) == 0 {
		r.valid.add(fvm)
		return false, nil
	}
	before := fvm.DeepCopy()
	invalidStatus(&fvm.Status, fvm.Generation, errs, metav1.NewTime(r.Clock.Now()))
	err := r.patchStatusIfChanged(ctx, before, fvm)
	switch {
	case write.Stale(err):
		return true, nil // the newer object brings the next reconcile
	case err != nil:
		return true, err
	}
	r.recordTransitions(before, fvm)
	return true, nil
}

// validated remembers, per FleetVirtualMachine, the UID and generation
// that last passed validation: a spec is decoded and checked once per
// generation, not at every reconcile. The rules read only the spec, the
// name and the namespace, and the hub's settings, which are fixed.
type validated struct {
	mu sync.Mutex
	m  map[types.NamespacedName]validGeneration
}

type validGeneration struct {
	uid        types.UID
	generation int64
}

func (v *validated) has(fvm *fleetv1alpha1.FleetVirtualMachine) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.m[client.ObjectKeyFromObject(fvm)] == validGeneration{fvm.UID, fvm.Generation}
}

func (v *validated) add(fvm *fleetv1alpha1.FleetVirtualMachine) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil {
		v.m = map[types.NamespacedName]validGeneration{}
	}
	v.m[client.ObjectKeyFromObject(fvm)] = validGeneration{fvm.UID, fvm.Generation}
}

func (v *validated) forget(key types.NamespacedName) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.m, key)
}

// validationOptions are the hub settings the rules depend on.
func (r *Reconciler) validationOptions() validation.Options {
	return validation.Options{ImageNamespace: r.Config.ImageNamespace, SharedImageNamespaces: r.Config.SharedImageNamespaces}
}

// reconcileShapeLimit reports whether fvm's VM shape is one its namespace
// may not add to the shapes every cluster's agent scores
// (capacity.Shapes, which the shapes controller follows too: the shape is
// not in the fleetvm-shapes ConfigMaps, so no cluster would be shown to
// fit it). If so, the reconcile ends here as for an invalid spec: nothing
// new is placed or delivered, no VM is removed, and Ready and Placed say
// why. A FleetVirtualMachine of the namespace deleted or reshaped wakes
// the others (fleetVMsOverShapeLimit).
func (r *Reconciler) reconcileShapeLimit(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine) (bool, error) {
	if _, ok := r.shapes.Of(fvm); !ok {
		return false, nil
	}
	// Most namespaces ask for fewer shapes than the limit: nothing
	// namespace-wide is read. The shapes of every FleetVirtualMachine
	// written before this one are counted once the informer's handler has
	// recorded this one as it is (the handler sees them in order); until
	// then, the namespace is read.
	if r.shapesObserved != nil && r.shapesObserved() && r.shapes.Observed(fvm) &&
		r.shapes.Distinct(fvm.Namespace) <= r.shapesPerNamespace() {
		return false, nil
	}
	// Read-only and shallow: every reconcile of every FleetVirtualMachine
	// asks about its whole namespace, and the shapes come from the cache.
	var list fleetv1alpha1.FleetVirtualMachineList
	if err := r.Client.List(ctx, &list, client.InNamespace(fvm.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return true, fmt.Errorf("list FleetVirtualMachines in %s: %w", fvm.Namespace, err)
	}
	if len(list.Items) <= r.shapesPerNamespace() {
		return false, nil // no more shapes than FleetVirtualMachines
	}
	// The object as read now, not the cache's possibly older copy.
	for i := range list.Items {
		if list.Items[i].Name == fvm.Name {
			list.Items[i] = *fvm
		}
	}
	reason, over := capacity.ShapesOf(list.Items, r.Config.ShapesPerNamespace, r.shapes.Of).Over[client.ObjectKeyFromObject(fvm)]
	if !over {
		return false, nil
	}
	before := fvm.DeepCopy()
	refusedStatus(&fvm.Status, fvm.Generation, fleetv1alpha1.ReasonShapeLimitExceeded,
		"nothing new is placed or delivered, the VMs already running stay: "+reason, metav1.NewTime(r.Clock.Now()))
	err := r.patchStatusIfChanged(ctx, before, fvm)
	switch {
	case write.Stale(err):
		return true, nil
	case err != nil:
		return true, err
	}
	r.recordTransitions(before, fvm)
	return true, nil
}

// shapeMayFreeUp passes the events of a FleetVirtualMachine that may
// leave room for another's shape: a spec change (a new shape) and a
// deletion, not a creation or a status write.
func shapeMayFreeUp() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(e event.UpdateEvent) bool { return predicate.GenerationChangedPredicate{}.Update(e) },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// shapesPerNamespace is the limit capacity.Shapes applies.
func (r *Reconciler) shapesPerNamespace() int {
	if r.Config.ShapesPerNamespace < 1 {
		return capacity.DefaultShapesPerNamespace
	}
	return r.Config.ShapesPerNamespace
}

// fleetVMsOverShapeLimit maps a FleetVirtualMachine to those of its
// namespace held back by the shape limit: its deletion or new shape may
// make room for them.
func (r *Reconciler) fleetVMsOverShapeLimit(ctx context.Context, obj client.Object) []reconcile.Request {
	var list fleetv1alpha1.FleetVirtualMachineList
	if err := r.Client.List(ctx, &list, client.InNamespace(obj.GetNamespace()), client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "list FleetVirtualMachines over the shape limit", "object", klog.KObj(obj))
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		c := meta.FindStatusCondition(list.Items[i].Status.Conditions, fleetv1alpha1.ConditionPlaced)
		if c != nil && c.Reason == fleetv1alpha1.ReasonShapeLimitExceeded && list.Items[i].Name != obj.GetName() {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

// invalidStatus sets Ready and Placed False with reason InvalidSpec and
// a bounded message naming the fields and why; the rest of the status
// (where the VMs run, as last seen) is kept.
func invalidStatus(status *fleetv1alpha1.FleetVirtualMachineStatus, generation int64, errs field.ErrorList, now metav1.Time) {
	refusedStatus(status, generation, fleetv1alpha1.ReasonInvalidSpec,
		"the spec breaks a rule admission checks; nothing new is placed or delivered, the VMs already running stay, until it is fixed: "+
			validation.Summary(errs), now)
}

// refusedStatus sets Ready and Placed False with reason and msg; the rest
// of the status (where the VMs run, as last seen) is kept.
func refusedStatus(status *fleetv1alpha1.FleetVirtualMachineStatus, generation int64, reason, msg string, now metav1.Time) {
	status.ObservedGeneration = generation
	for _, t := range []string{fleetv1alpha1.ConditionReady, fleetv1alpha1.ConditionPlaced} {
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{
			Type: t, Status: metav1.ConditionFalse, Reason: reason, Message: msg,
			ObservedGeneration: generation, LastTransitionTime: now,
		})
	}
}

// observeShapes records every FleetVirtualMachine's shape as the
// informer delivers it, so the shape limit needs no read of a whole
// namespace while it holds.
func (r *Reconciler) observeShapes(mgr ctrl.Manager) error {
	inf, err := mgr.GetCache().GetInformer(context.Background(), &fleetv1alpha1.FleetVirtualMachine{})
	if err != nil {
		return fmt.Errorf("FleetVirtualMachine informer: %w", err)
	}
	reg, err := inf.AddEventHandler(r.shapes.EventHandler(nil))
	if err != nil {
		return fmt.Errorf("observe FleetVirtualMachine shapes: %w", err)
	}
	r.shapesObserved = reg.HasSynced
	return nil
}
