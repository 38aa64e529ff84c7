package webhook

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetdiskimage"
)

// ValidateFleetDiskImagePath is where the FleetDiskImage webhook is served.
const ValidateFleetDiskImagePath = "/validate-fleetvm-io-v1alpha1-fleetdiskimage"

// +kubebuilder:webhook:path=/validate-fleetvm-io-v1alpha1-fleetdiskimage,mutating=false,failurePolicy=fail,sideEffects=None,groups=fleetvm.io,resources=fleetdiskimages,verbs=delete,versions=v1alpha1,name=vfleetdiskimage.fleetvm.io,admissionReviewVersions=v1

// FleetDiskImageValidator refuses to delete a FleetDiskImage that VMs
// still use, saying how many and which. (Should the object get a deletion
// timestamp anyway, the controller's finalizer holds it until unused.)
type FleetDiskImageValidator struct {
	Reader         client.Reader
	ImageNamespace string
}

var _ admission.CustomValidator = &FleetDiskImageValidator{}

// ValidateCreate implements admission.CustomValidator.
func (v *FleetDiskImageValidator) ValidateCreate(context.Context, runtime.Object) (admission.Warnings, error) {
	return nil, nil
}

// ValidateUpdate implements admission.CustomValidator.
func (v *FleetDiskImageValidator) ValidateUpdate(context.Context, runtime.Object, runtime.Object) (admission.Warnings, error) {
	return nil, nil
}

// ValidateDelete refuses the deletion while the image is in use.
func (v *FleetDiskImageValidator) ValidateDelete(ctx context.Context, obj runtime.Object) (admission.Warnings, error) {
	fdi, ok := obj.(*fleetv1alpha1.FleetDiskImage)
	if !ok {
		return nil, fmt.Errorf("expected a FleetDiskImage, got %T", obj)
	}
	key := types.NamespacedName{Namespace: fdi.Namespace, Name: fdi.Name}
	// Not indexed: the reader may be the API server. A deletion is rare.
	usage, err := fleetdiskimage.ReadUsage(ctx, v.Reader, false, v.ImageNamespace, key)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("cannot tell whether FleetDiskImage %s is in use: %w", key, err))
	}
	if usage.InUse() {
		return nil, apierrors.NewForbidden(fleetv1alpha1.GroupVersion.WithResource("fleetdiskimages").GroupResource(), fdi.Name,
			fmt.Errorf("the image is in use: %s. Remove those references first; an unused image is removed from every cluster when deleted", usage.Summary()))
	}
	return nil, nil
}

func (v *FleetDiskImageValidator) setupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr).For(&fleetv1alpha1.FleetDiskImage{}).WithValidator(v).Complete()
}

func (v *FleetDiskImageValidator) register(server webhook.Server, scheme *runtime.Scheme) {
	server.Register(ValidateFleetDiskImagePath, admission.WithCustomValidator(scheme, &fleetv1alpha1.FleetDiskImage{}, v))
}
