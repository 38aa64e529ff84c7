package webhook

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/drain"
)

// ValidateMovePath is where the FleetVirtualMachineMove webhook is served.
const ValidateMovePath = "/validate-fleetvm-io-v1alpha1-fleetvirtualmachinemove"

// MoveWebhookName is the move webhook's name in the configuration (the
// marker's name).
const MoveWebhookName = "vfleetvirtualmachinemove.fleetvm.io"

// +kubebuilder:webhook:path=/validate-fleetvm-io-v1alpha1-fleetvirtualmachinemove,mutating=false,failurePolicy=fail,sideEffects=None,groups=fleetvm.io,resources=fleetvirtualmachinemoves,verbs=create;update,versions=v1alpha1,name=vfleetvirtualmachinemove.fleetvm.io,admissionReviewVersions=v1

// MoveMatchConditions send the move webhook only the requests that carry
// or change a drain mark (label fleetv1alpha1.LabelDrain, annotation
// drain.AnnotationCluster): a team's own moves, status writes and the
// controller adding or removing its finalizer never wait for it, so with
// fleetvm-hub down nothing but a drain's marks is refused (failurePolicy
// Fail), and no deletion hangs. An update reaches it when any label or
// annotation changed; it judges only the drain's.
var MoveMatchConditions = []admissionregistrationv1.MatchCondition{{
	Name: "drain-marks",
	Expression: "request.operation == 'CREATE' ? " +
		"((has(object.metadata.labels) && '" + fleetv1alpha1.LabelDrain + "' in object.metadata.labels) || " +
		"(has(object.metadata.annotations) && '" + drain.AnnotationCluster + "' in object.metadata.annotations)) : " +
		"((has(object.metadata.labels) ? object.metadata.labels : {}) != (has(oldObject.metadata.labels) ? oldObject.metadata.labels : {}) || " +
		"(has(object.metadata.annotations) ? object.metadata.annotations : {}) != (has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {}))",
}}

// MoveValidator keeps the marks of a drain's moves to fleetvm-hub: the
// label fleetv1alpha1.LabelDrain and the annotation drain.AnnotationCluster
// may be on a FleetVirtualMachineMove only as the hub's drain controller
// wrote them. Anyone else who creates a move with either, or adds,
// changes or removes either, is refused. A team that could would take
// every slot of a drain with moves of its own, or keep its copies on a
// draining cluster. (The drain controller checks the cluster's UID in
// the annotation whatever admission does: drain.Made.)
type MoveValidator struct {
	// HubUser tells the user fleetvm-hub acts as: the one user that may
	// write the marks.
	HubUser func(context.Context) (string, error)
}

var _ admission.CustomValidator = &MoveValidator{}

// SetupWithManager registers the validator with the manager's webhook server.
func (v *MoveValidator) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr).For(&fleetv1alpha1.FleetVirtualMachineMove{}).WithValidator(v).Complete()
}

// Register serves the validator on a webhook server without a manager.
func (v *MoveValidator) Register(server webhook.Server, scheme *runtime.Scheme) {
	server.Register(ValidateMovePath, admission.WithCustomValidator(scheme, &fleetv1alpha1.FleetVirtualMachineMove{}, v))
}

// ValidateCreate implements admission.CustomValidator.
func (v *MoveValidator) ValidateCreate(ctx context.Context, obj runtime.Object) (admission.Warnings, error) {
	m, ok := obj.(*fleetv1alpha1.FleetVirtualMachineMove)
	if !ok {
		return nil, fmt.Errorf("expected a FleetVirtualMachineMove, got %T", obj)
	}
	return nil, v.validate(ctx, nil, m)
}

// ValidateUpdate implements admission.CustomValidator.
func (v *MoveValidator) ValidateUpdate(ctx context.Context, oldObj, newObj runtime.Object) (admission.Warnings, error) {
	old, ok := oldObj.(*fleetv1alpha1.FleetVirtualMachineMove)
	if !ok {
		return nil, fmt.Errorf("expected a FleetVirtualMachineMove, got %T", oldObj)
	}
	m, ok := newObj.(*fleetv1alpha1.FleetVirtualMachineMove)
	if !ok {
		return nil, fmt.Errorf("expected a FleetVirtualMachineMove, got %T", newObj)
	}
	return nil, v.validate(ctx, old, m)
}

// ValidateDelete implements admission.CustomValidator: deleting is never
// refused (the move's finalizer ends it safely).
func (v *MoveValidator) ValidateDelete(context.Context, runtime.Object) (admission.Warnings, error) {
	return nil, nil
}

func (v *MoveValidator) validate(ctx context.Context, old, m *fleetv1alpha1.FleetVirtualMachineMove) error {
	changed := drainMarksChanged(old, m)
	if len(changed) == 0 {
		return nil
	}
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("no admission request: %w", err))
	}
	hub, err := v.HubUser(ctx)
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("cannot tell fleetvm-hub's user, who alone may set a drain's marks: %w", err))
	}
	if errs := drainMarkErrors(req.UserInfo.Username, hub, changed); len(errs) > 0 {
		return apierrors.NewInvalid(fleetv1alpha1.GroupVersion.WithKind("FleetVirtualMachineMove").GroupKind(), m.Name, errs)
	}
	return nil
}

// drainMarksChanged lists the paths of the drain marks a request sets
// (old nil: a create carrying them) or adds, changes or removes.
func drainMarksChanged(old, m *fleetv1alpha1.FleetVirtualMachineMove) []*field.Path {
	var oldLabels, oldAnnotations map[string]string
	if old != nil {
		oldLabels, oldAnnotations = old.Labels, old.Annotations
	}
	var out []*field.Path
	if differs(oldLabels, m.Labels, fleetv1alpha1.LabelDrain) {
		out = append(out, field.NewPath("metadata", "labels").Key(fleetv1alpha1.LabelDrain))
	}
	if differs(oldAnnotations, m.Annotations, drain.AnnotationCluster) {
		out = append(out, field.NewPath("metadata", "annotations").Key(drain.AnnotationCluster))
	}
	return out
}

// differs tells whether key is on one map and not the other, or has
// another value there.
func differs(a, b map[string]string, key string) bool {
	va, inA := a[key]
	vb, inB := b[key]
	return inA != inB || va != vb
}

// drainMarkErrors refuses the changed drain marks unless user is
// fleetvm-hub's user hub (never when hub is unknown).
func drainMarkErrors(user, hub string, changed []*field.Path) field.ErrorList {
	if hub != "" && user == hub {
		return nil
	}
	var errs field.ErrorList
	for _, p := range changed {
		errs = append(errs, field.Forbidden(p, fmt.Sprintf(
			"only fleetvm-hub's drain controller sets, changes or removes it (it marks the moves a drain of a cluster made, and a drain counts only those); "+
				"%s may not. To move a VM, create a move without it; to drain a cluster, taint the ManagedCluster %s (kubectl fleetvm drain)",
			user, fleetv1alpha1.DrainTaintKey)))
	}
	return errs
}
