package webhook

import (
	"context"
	"encoding/json"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// FinalizerPath is where the FleetVirtualMachine finalizer webhook is
// served.
const FinalizerPath = "/mutate-fleetvm-io-v1alpha1-fleetvirtualmachine"

// FinalizerWebhookName is the finalizer webhook's name in the
// MutatingWebhookConfiguration (the marker's name).
const FinalizerWebhookName = "mfleetvirtualmachine.fleetvm.io"

// The finalizer webhook sees creates only. Its failurePolicy is Ignore:
// the finalizer it adds saves a write, it enforces nothing. When the API
// server cannot reach it, the object is created without the finalizer
// and the controller adds it on its first reconcile, as it does for
// objects created before this webhook existed. Fail would refuse that
// create for something the controller makes up a moment later. (The
// validating webhook fails closed on the same creates, so with fleetvm-hub
// down they are refused anyway; an operator who sets that one to Ignore to
// let FleetVirtualMachines in meanwhile must not find this one refusing
// them still.) reinvocationPolicy Never: no other webhook's change can
// take away a finalizer this one added.
//
// +kubebuilder:webhook:path=/mutate-fleetvm-io-v1alpha1-fleetvirtualmachine,mutating=true,failurePolicy=ignore,sideEffects=None,groups=fleetvm.io,resources=fleetvirtualmachines,verbs=create,versions=v1alpha1,name=mfleetvirtualmachine.fleetvm.io,admissionReviewVersions=v1,reinvocationPolicy=Never

// FinalizerAdder adds fleetvm-hub's finalizer
// (fleetv1alpha1.FleetVirtualMachineFinalizer) to a FleetVirtualMachine
// being created, so that the controller's first reconcile finds it there
// and spends no write on it. It changes nothing else: it works on the
// request's JSON, not on a decoded FleetVirtualMachine, so no field the Go
// types drop or default can slip into the patch. It never refuses: what it
// cannot read it lets through unchanged, and the controller adds the
// finalizer instead.
type FinalizerAdder struct{}

var _ admission.Handler = FinalizerAdder{}

// Handle implements admission.Handler.
func (FinalizerAdder) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	raw := req.Object.Raw
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return admission.Allowed("not a JSON object: the controller adds the finalizer")
	}
	meta, ok := obj["metadata"].(map[string]any)
	if !ok {
		return admission.Allowed("no metadata: the controller adds the finalizer")
	}
	if meta["deletionTimestamp"] != nil {
		return admission.Allowed("being deleted")
	}
	var finalizers []any
	if meta["finalizers"] != nil {
		if finalizers, ok = meta["finalizers"].([]any); !ok {
			return admission.Allowed("metadata.finalizers is not a list: the controller adds the finalizer")
		}
	}
	if slices.Contains(finalizers, any(fleetv1alpha1.FleetVirtualMachineFinalizer)) {
		return admission.Allowed("finalizer present")
	}
	meta["finalizers"] = append(finalizers, fleetv1alpha1.FleetVirtualMachineFinalizer)
	mutated, err := json.Marshal(obj)
	if err != nil {
		return admission.Allowed("cannot encode the object: the controller adds the finalizer")
	}
	if resp := admission.PatchResponseFromRaw(raw, mutated); resp.Allowed {
		return resp
	}
	return admission.Allowed("cannot compute the patch: the controller adds the finalizer")
}

// register serves the finalizer webhook on server.
func (a FinalizerAdder) register(server webhook.Server) {
	server.Register(FinalizerPath, &webhook.Admission{Handler: a})
}
