package webhook

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// TestFinalizerAdder: the finalizer is added to a FleetVirtualMachine being
// created, by one patch operation on metadata.finalizers and nothing else;
// one that has it, one being deleted, an update and what cannot be read
// pass unchanged; nothing is ever refused.
func TestFinalizerAdder(t *testing.T) {
	// As the API server sends it: the whole object, with a template whose
	// numbers and nesting a round trip through the Go types could change.
	object := func(change func(meta map[string]any)) []byte {
		t.Helper()
		fvm := inlineFVM("web", `{"name":"web","labels":{"tier":"front"}}`,
			`{"template":{"spec":{"domain":{"cpu":{"cores":2,"sockets":1},"memory":{"guest":"4Gi"},"devices":{"disks":[]}}}},"dataVolumeTemplates":[]}`)
		fvm.Labels = map[string]string{"team": "a"}
		fvm.Annotations = map[string]string{"note": "kept"}
		fvm.Spec.Placement.Clusters = ptr.To(int32(2))
		fvm.TypeMeta = metav1.TypeMeta{APIVersion: fleetv1alpha1.GroupVersion.String(), Kind: "FleetVirtualMachine"}
		b, err := json.Marshal(fvm)
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := json.Unmarshal(b, &obj); err != nil {
			t.Fatal(err)
		}
		change(obj["metadata"].(map[string]any))
		if b, err = json.Marshal(obj); err != nil {
			t.Fatal(err)
		}
		return b
	}
	same := func(map[string]any) {}
	cases := map[string]struct {
		op     admissionv1.Operation
		object []byte
		want   []jsonpatch.JsonPatchOperation
	}{
		"created without finalizers: added": {
			op:     admissionv1.Create,
			object: object(same),
			want:   []jsonpatch.JsonPatchOperation{{Operation: "add", Path: "/metadata/finalizers", Value: []any{fleetv1alpha1.FleetVirtualMachineFinalizer}}},
		},
		"created with another finalizer: added after it": {
			op:     admissionv1.Create,
			object: object(func(m map[string]any) { m["finalizers"] = []any{"example.com/hold"} }),
			want:   []jsonpatch.JsonPatchOperation{{Operation: "add", Path: "/metadata/finalizers/1", Value: fleetv1alpha1.FleetVirtualMachineFinalizer}},
		},
		"created with finalizers null: added": {
			op:     admissionv1.Create,
			object: object(func(m map[string]any) { m["finalizers"] = nil }),
			want:   []jsonpatch.JsonPatchOperation{{Operation: "replace", Path: "/metadata/finalizers", Value: []any{fleetv1alpha1.FleetVirtualMachineFinalizer}}},
		},
		"created with the finalizer: unchanged": {
			op: admissionv1.Create,
			object: object(func(m map[string]any) {
				m["finalizers"] = []any{"example.com/hold", fleetv1alpha1.FleetVirtualMachineFinalizer}
			}),
		},
		"being deleted: unchanged": {
			op:     admissionv1.Create,
			object: object(func(m map[string]any) { m["deletionTimestamp"] = "2026-01-02T03:04:05Z" }),
		},
		"an update: unchanged": {
			op:     admissionv1.Update,
			object: object(same),
		},
		"not a JSON object: let through": {
			op:     admissionv1.Create,
			object: []byte(`[1,2`),
		},
		"finalizers not a list: let through": {
			op:     admissionv1.Create,
			object: object(func(m map[string]any) { m["finalizers"] = "fleetvm.io/other" }),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resp := FinalizerAdder{}.Handle(t.Context(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: tc.op,
				Object:    runtime.RawExtension{Raw: tc.object},
			}})
			if !resp.Allowed {
				t.Fatalf("refused: %+v; the finalizer webhook never refuses", resp.Result)
			}
			if diff := cmp.Diff(tc.want, resp.Patches); diff != "" {
				t.Errorf("patch (-want,+got):\n%s", diff)
			}
		})
	}
}
