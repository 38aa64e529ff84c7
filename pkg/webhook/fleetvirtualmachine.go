// Package webhook holds fleetvm-hub's admission webhooks: what the CRD's
// OpenAPI and CEL rules cannot check, such as decoding a VM template strictly
// into the KubeVirt API types, and the finalizer a FleetVirtualMachine is
// created with.
package webhook

import (
	"context"
	"fmt"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/tenancy"
	"github.com/fleetvm/fleetvm/pkg/validation"
	"github.com/fleetvm/fleetvm/pkg/vmclaim"
)

// ValidateFleetVirtualMachinePath is where the FleetVirtualMachine validator
// is served.
const ValidateFleetVirtualMachinePath = "/validate-fleetvm-io-v1alpha1-fleetvirtualmachine"

// +kubebuilder:webhook:path=/validate-fleetvm-io-v1alpha1-fleetvirtualmachine,mutating=false,failurePolicy=fail,sideEffects=None,groups=fleetvm.io,resources=fleetvirtualmachines,verbs=create;update,versions=v1alpha1,name=vfleetvirtualmachine.fleetvm.io,admissionReviewVersions=v1

// FleetVirtualMachineMatchConditions keep every update that leaves the
// spec alone away from the FleetVirtualMachine webhook: it judges only the
// spec (and the name, on create), and a metadata-only update such as the
// controller removing its finalizer must never wait for it: with the
// webhook down and failurePolicy Fail, every deletion would hang. A spec
// change still fails closed. controller-gen's webhook marker has no field
// for them; `make manifests` writes them into deploy/webhook
// (hack/webhookconditions), which the chart and the test environment
// install.
var FleetVirtualMachineMatchConditions = []admissionregistrationv1.MatchCondition{{
	Name:       "spec-changed",
	Expression: "request.operation != 'UPDATE' || !has(object.spec) || !has(oldObject.spec) || object.spec != oldObject.spec",
}}

// FleetVirtualMachineWebhookName is the webhook's name in the
// configuration (the marker's name).
const FleetVirtualMachineWebhookName = "vfleetvirtualmachine.fleetvm.io"

// FleetVirtualMachineValidator checks what the CRD schema cannot: that
// spec.template decodes strictly into a KubeVirt VirtualMachine and makes a
// VM KubeVirt would accept, that no other FleetVirtualMachine delivers the
// same VM, and that the names and the label selector work where they go.
type FleetVirtualMachineValidator struct {
	// Reader lists FleetVirtualMachines by the VM they deliver (a cache
	// indexed by vmclaim.IndexVM, vmclaim.SetupIndex), and reads
	// ManagedClusterSetBindings and AppProjects.
	Reader client.Reader
	// LiveReader, if set, reads a binding or AppProject from the API
	// server when Reader (a cache) would refuse the object for it: one
	// kubectl apply that creates the binding and then the
	// FleetVirtualMachine may reach the webhook before the cache sees
	// the binding.
	LiveReader client.Reader
	// ArgoNamespace is Argo CD's namespace, where AppProjects are.
	ArgoNamespace string
	// ImageNamespace is where FleetDiskImages are imported on the
	// clusters: a template may use them only through spec.diskImages.
	ImageNamespace string
	// SharedImageNamespaces are the namespaces on the clusters whose
	// disks every team's templates may clone.
	SharedImageNamespaces []string
}

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
func (v *FleetVirtualMachineValidator) ValidateCreate(ctx context.Context, obj runtime.Object) (admission.Warnings, error) {
	warnings, err := v.validate(nil, obj)
	if err != nil {
		return warnings, err
	}
	fvm := obj.(*fleetv1alpha1.FleetVirtualMachine)
	if err := v.checkClusterSets(ctx, nil, fvm); err != nil {
		return warnings, err
	}
	if err := v.checkProject(ctx, nil, fvm); err != nil {
		return warnings, err
	}
	return warnings, v.checkClaim(ctx, fvm)
}

// ValidateUpdate implements admission.CustomValidator.
func (v *FleetVirtualMachineValidator) ValidateUpdate(ctx context.Context, oldObj, newObj runtime.Object) (admission.Warnings, error) {
	// The VM's name and namespace are immutable, so its claim is too.
	warnings, err := v.validate(oldObj, newObj)
	if err != nil {
		return warnings, err
	}
	old, _ := oldObj.(*fleetv1alpha1.FleetVirtualMachine)
	fvm := newObj.(*fleetv1alpha1.FleetVirtualMachine)
	if fvm.DeletionTimestamp != nil {
		return warnings, nil
	}
	if err := v.checkClusterSets(ctx, old, fvm); err != nil {
		return warnings, err
	}
	return warnings, v.checkProject(ctx, old, fvm)
}

// checkProject refuses a spec.delivery.project that does not serve the
// FleetVirtualMachine's namespace: Argo CD lets an Application in its own
// namespace (where FleetVM's are) name any project, so FleetVM applies
// Argo CD's rule for Applications elsewhere: the project must list the
// namespace in spec.sourceNamespaces. Empty is the namespace's own
// project. Checked when the field is set or changed.
func (v *FleetVirtualMachineValidator) checkProject(ctx context.Context, old, fvm *fleetv1alpha1.FleetVirtualMachine) error {
	name := fvm.Spec.Delivery.Project
	if v.Reader == nil || name == "" || name == tenancy.ProjectName(fvm.Namespace) || old != nil && old.Spec.Delivery.Project == name {
		return nil
	}
	path := field.NewPath("spec", "delivery", "project")
	p := tenancy.NewAppProject()
	key := types.NamespacedName{Namespace: v.ArgoNamespace, Name: name}
	err := v.Reader.Get(ctx, key, p)
	if v.LiveReader != nil && (apierrors.IsNotFound(err) || err == nil && !tenancy.ServesNamespace(p, fvm.Namespace)) {
		// The cache may lag a project created or changed just before.
		p = tenancy.NewAppProject()
		err = v.LiveReader.Get(ctx, key, p)
	}
	var msg string
	switch {
	case apierrors.IsNotFound(err):
		msg = fmt.Sprintf("AppProject %s does not exist in %s", name, v.ArgoNamespace)
	case err != nil:
		return apierrors.NewInternalError(err)
	case !tenancy.ServesNamespace(p, fvm.Namespace):
		msg = fmt.Sprintf("AppProject %s does not serve namespace %s: its spec.sourceNamespaces must list it (the hub operator decides); leave the field empty for the namespace's own project", name, fvm.Namespace)
	default:
		return nil
	}
	return apierrors.NewInvalid(fleetv1alpha1.GroupVersion.WithKind("FleetVirtualMachine").GroupKind(), fvm.Name,
		field.ErrorList{field.Forbidden(path, msg)})
}

// checkClusterSets refuses cluster sets the FleetVirtualMachine's
// namespace may not use: OCM lets a namespace use a ManagedClusterSet only
// through a ManagedClusterSetBinding in that namespace (whose creation
// needs managedclustersets/bind on the set), and FleetVM uses no more. On
// an update only sets the change adds are checked: a binding removed later
// takes its clusters away (after the grace period), it does not block the
// object.
func (v *FleetVirtualMachineValidator) checkClusterSets(ctx context.Context, old, fvm *fleetv1alpha1.FleetVirtualMachine) error {
	if v.Reader == nil {
		return nil
	}
	var had []string
	if old != nil {
		had = setsOf(old)
	}
	var errs field.ErrorList
	for i, set := range setsOf(fvm) {
		if slices.Contains(had, set) {
			continue
		}
		key := types.NamespacedName{Namespace: fvm.Namespace, Name: set}
		err := v.Reader.Get(ctx, key, &clusterv1beta2.ManagedClusterSetBinding{})
		if apierrors.IsNotFound(err) && v.LiveReader != nil {
			// The cache may lag a binding created just before.
			err = v.LiveReader.Get(ctx, key, &clusterv1beta2.ManagedClusterSetBinding{})
		}
		switch {
		case apierrors.IsNotFound(err):
			p, which := field.NewPath("spec", "placement", "clusterSets").Index(i), ""
			if len(fvm.Spec.Placement.ClusterSets) == 0 {
				p, which = field.NewPath("spec", "placement", "clusterSets"), " (none listed means the default set)"
			}
			errs = append(errs, field.Forbidden(p, fmt.Sprintf(
				"cluster set %q%s is not bound to namespace %s: a ManagedClusterSetBinding named %s in %s, made by someone allowed to bind the set, lets the namespace use it",
				set, which, fvm.Namespace, set, fvm.Namespace)))
		case err != nil:
			return apierrors.NewInternalError(err)
		}
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(fleetv1alpha1.GroupVersion.WithKind("FleetVirtualMachine").GroupKind(), fvm.Name, errs)
	}
	return nil
}

// setsOf are the cluster sets a FleetVirtualMachine selects from.
func setsOf(fvm *fleetv1alpha1.FleetVirtualMachine) []string {
	if len(fvm.Spec.Placement.ClusterSets) == 0 {
		return []string{"default"}
	}
	return fvm.Spec.Placement.ClusterSets
}

// checkClaim refuses a second FleetVirtualMachine for a VM (name and
// namespace) another one already delivers: Argo CD would fight over it,
// and deleting either would delete it.
func (v *FleetVirtualMachineValidator) checkClaim(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine) error {
	if v.Reader == nil {
		return nil
	}
	claimants, err := vmclaim.Claimants(ctx, v.Reader, fvm)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	for i := range claimants {
		other := &claimants[i]
		if other.Namespace == fvm.Namespace && other.Name == fvm.Name {
			continue
		}
		vm := vmclaim.Identity(fvm)
		p := field.NewPath("spec", "template", "metadata", "name")
		msg := fmt.Sprintf("VM %s is already delivered by FleetVirtualMachine %s/%s: one VM has one FleetVirtualMachine (change that one, or give this VM another name)",
			vm, other.Namespace, other.Name)
		if other.DeletionTimestamp != nil {
			msg = fmt.Sprintf("VM %s is still delivered by FleetVirtualMachine %s/%s, which is being deleted: create this one once it is gone",
				vm, other.Namespace, other.Name)
		}
		return apierrors.NewInvalid(fleetv1alpha1.GroupVersion.WithKind("FleetVirtualMachine").GroupKind(), fvm.Name,
			field.ErrorList{field.Duplicate(p, msg)})
	}
	return nil
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
	if old != nil && fvm.DeletionTimestamp != nil {
		// Metadata may change (the controller's last step removes its
		// finalizer); the spec may not.
		return nil, invalid(fvm, validation.DuringDeletion(old, fvm))
	}
	vm, errs := validation.FleetVirtualMachine(fvm, validation.Options{ImageNamespace: v.ImageNamespace, SharedImageNamespaces: v.SharedImageNamespaces})
	var warnings admission.Warnings
	if vm != nil {
		warnings = templateWarnings(vm)
	}
	if old != nil {
		errs = append(errs, validation.Update(old, fvm)...)
	}
	return warnings, invalid(fvm, errs)
}

// invalid is the API server's Invalid error for errs, nil without errors.
func invalid(fvm *fleetv1alpha1.FleetVirtualMachine, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(fleetv1alpha1.GroupVersion.WithKind("FleetVirtualMachine").GroupKind(), fvm.Name, errs)
}

// templateWarnings tells the user which template fields FleetVM overrides.
func templateWarnings(vm *kubevirtv1.VirtualMachine) admission.Warnings {
	var w admission.Warnings
	if vm.Spec.Running != nil || vm.Spec.RunStrategy != nil {
		w = append(w, "spec.template.spec.running/runStrategy are replaced by spec.runStrategy on every cluster")
	}
	return w
}
