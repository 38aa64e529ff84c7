package chart

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// noDryRun are the kinds the test API server cannot check: cert-manager's
// CRDs are not installed in the test environment (this project does not
// vendor them). TestWebhookWiring checks what these objects must say; their
// schema is checked by the API server of a hub with cert-manager, on
// install.
var noDryRun = []schema.GroupKind{
	{Group: "cert-manager.io", Kind: "Issuer"},
	{Group: "cert-manager.io", Kind: "Certificate"},
}

// TestServerSideDryRun sends every object of every release, and the CRDs,
// to the hub's API server as a server-side apply with dry run and strict
// field validation: the API server checks each against its schema
// (built-in types and FleetVM's CRDs), admission included, and stores
// nothing.
func TestServerSideDryRun(t *testing.T) {
	ctx := t.Context()
	hub := fleet(t).Hub.Client
	for name, rel := range releases {
		t.Run(name, func(t *testing.T) {
			r := mustRender(t, rel)
			// The release namespace exists before an install (helm
			// --create-namespace); namespaced objects cannot be checked
			// without it.
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rel.namespace}}
			if err := hub.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
				t.Fatal(err)
			}
			skipped := 0
			for _, o := range append(r.crds, r.objs...) {
				if slices.Contains(noDryRun, o.GroupVersionKind().GroupKind()) {
					skipped++
					continue
				}
				err := hub.Patch(ctx, o.DeepCopy(), client.Apply, client.DryRunAll, client.ForceOwnership,
					client.FieldOwner("fleetvm-chart-test"), client.FieldValidation(metav1.FieldValidationStrict))
				if err != nil {
					t.Errorf("%s %s: %v", o.GetKind(), o.GetName(), err)
				}
			}
			if want := len(r.ofKind("Issuer")) + len(r.ofKind("Certificate")); skipped != want {
				t.Errorf("skipped %d objects, want only the %d cert-manager objects", skipped, want)
			}
		})
	}
}
