package webhook

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"

	"gomodules.xyz/jsonpatch/v2"

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

// Handle implements admission.Handler. It reads only the object's
// metadata.deletionTimestamp and metadata.finalizers, and writes the one
// patch operation itself: not the whole object decoded, changed, encoded
// and compared, twice, on every create of a burst.
func (FinalizerAdder) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	var obj struct {
		Metadata *struct {
			DeletionTimestamp json.RawMessage `json:"deletionTimestamp"`
			Finalizers        json.RawMessage `json:"finalizers"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return admission.Allowed("not a JSON object with an object as metadata: the controller adds the finalizer")
	}
	meta := obj.Metadata
	if meta == nil {
		return admission.Allowed("no metadata: the controller adds the finalizer")
	}
	if isSet(meta.DeletionTimestamp) {
		return admission.Allowed("being deleted")
	}
	patch := jsonpatch.JsonPatchOperation{Operation: "add", Path: "/metadata/finalizers", Value: []any{fleetv1alpha1.FleetVirtualMachineFinalizer}}
	switch {
	case len(meta.Finalizers) == 0: // absent: add the list
	case !isSet(meta.Finalizers): // null: replace it with the list
		patch.Operation = "replace"
	default:
		var finalizers []any
		if err := json.Unmarshal(meta.Finalizers, &finalizers); err != nil {
			return admission.Allowed("metadata.finalizers is not a list: the controller adds the finalizer")
		}
		if slices.Contains(finalizers, any(fleetv1alpha1.FleetVirtualMachineFinalizer)) {
			return admission.Allowed("finalizer present")
		}
		patch.Path, patch.Value = "/metadata/finalizers/"+strconv.Itoa(len(finalizers)), fleetv1alpha1.FleetVirtualMachineFinalizer
	}
	return admission.Patched("", patch)
}

// isSet tells whether a field read as raw JSON is there and not null.
func isSet(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}

// register serves the finalizer webhook on server.
func (a FinalizerAdder) register(server webhook.Server) {
	server.Register(FinalizerPath, &webhook.Admission{Handler: a})
}
