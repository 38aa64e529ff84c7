// Package webhook holds fleetvm-hub's admission webhooks: what the CRD's
// OpenAPI and CEL rules cannot check, such as decoding a VM template strictly
// into the KubeVirt API types.
package webhook

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/vmtemplate"
)

// ValidateFleetVirtualMachinePath is where the FleetVirtualMachine validator
// is served.
const ValidateFleetVirtualMachinePath = "/validate-fleetvm-io-v1alpha1-fleetvirtualmachine"

// +kubebuilder:webhook:path=/validate-fleetvm-io-v1alpha1-fleetvirtualmachine,mutating=false,failurePolicy=fail,sideEffects=None,groups=fleetvm.io,resources=fleetvirtualmachines,verbs=create;update,versions=v1alpha1,name=vfleetvirtualmachine.fleetvm.io,admissionReviewVersions=v1

// FleetVirtualMachineValidator checks what the CRD schema cannot: that
// spec.template decodes strictly into a KubeVirt VirtualMachine and makes a
// VM KubeVirt would accept.
type FleetVirtualMachineValidator struct{}

var _ admission.CustomValidator = &FleetVirtualMachineValidator{}

// SetupWithManager registers the validator with the manager's webhook server.
func (v *FleetVirtualMachineValidator) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr).For(&fleetv1alpha1.FleetVirtualMachine{}).WithValidator(v).Complete()
}

// Register serves the validator on a webhook server without a manager (the
// test environment and the local fleet use this).
func (v *FleetVirtualMachineValidator) Register(server webhook.Server, scheme *runtime.Scheme) {
	server.Register(ValidateFleetVirtualMachinePath,
		admission.WithCustomValidator(scheme, &fleetv1alpha1.FleetVirtualMachine{}, v))
}

// ValidateCreate implements admission.CustomValidator.
func (v *FleetVirtualMachineValidator) ValidateCreate(_ context.Context, obj runtime.Object) (admission.Warnings, error) {
	return v.validate(nil, obj)
}

// ValidateUpdate implements admission.CustomValidator.
func (v *FleetVirtualMachineValidator) ValidateUpdate(_ context.Context, oldObj, newObj runtime.Object) (admission.Warnings, error) {
	return v.validate(oldObj, newObj)
}

// ValidateDelete implements admission.CustomValidator.
func (v *FleetVirtualMachineValidator) ValidateDelete(context.Context, runtime.Object) (admission.Warnings, error) {
	return nil, nil
}

func (v *FleetVirtualMachineValidator) validate(oldObj, obj runtime.Object) (admission.Warnings, error) {
	fvm, ok := obj.(*fleetv1alpha1.FleetVirtualMachine)
	if !ok {
		return nil, fmt.Errorf("expected a FleetVirtualMachine, got %T", obj)
	}
	old, _ := oldObj.(*fleetv1alpha1.FleetVirtualMachine)
	if fvm.DeletionTimestamp != nil {
		// Never block the finalizer's last update.
		return nil, nil
	}
	var warnings admission.Warnings
	var errs field.ErrorList
	tmplPath := field.NewPath("spec", "template")
	if fvm.Spec.Template != nil {
		vm, tmplErrs := vmtemplate.Decode(fvm.Spec.Template.Raw, tmplPath)
		errs = append(errs, tmplErrs...)
		if vm != nil {
			warnings = append(warnings, templateWarnings(vm)...)
			var top map[string]json.RawMessage
			if json.Unmarshal(fvm.Spec.Template.Raw, &top) == nil && top["status"] != nil {
				errs = append(errs, field.Forbidden(tmplPath.Child("status"), "status is reported by the clusters, not set in the template"))
			}
		}
		if old != nil && old.Spec.Template != nil && vm != nil {
			if oldVM, _ := vmtemplate.Decode(old.Spec.Template.Raw, tmplPath); oldVM != nil && oldVM.Namespace != vm.Namespace {
				errs = append(errs, field.Invalid(tmplPath.Child("metadata", "namespace"), vm.Namespace,
					"immutable: moving the VM to another namespace would strand the running copies"))
			}
		}
	}
	if len(errs) > 0 {
		return warnings, apierrors.NewInvalid(fleetv1alpha1.GroupVersion.WithKind("FleetVirtualMachine").GroupKind(), fvm.Name, errs)
	}
	return warnings, nil
}

// templateWarnings tells the user which template fields FleetVM overrides.
func templateWarnings(vm *kubevirtv1.VirtualMachine) admission.Warnings {
	var w admission.Warnings
	if vm.Spec.Running != nil || vm.Spec.RunStrategy != nil {
		w = append(w, "spec.template.spec.running/runStrategy are replaced by spec.runStrategy on every cluster")
	}
	return w
}
