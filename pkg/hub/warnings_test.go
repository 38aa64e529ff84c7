package hub

import (
	"context"
	"testing"

	"github.com/go-logr/logr/funcr"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// TestWarningHandlerDropsArgoCDFinalizerName: the API server's warning
// about Argo CD's finalizer name is not logged; every other warning is.
func TestWarningHandlerDropsArgoCDFinalizerName(t *testing.T) {
	var logged []string
	ctx := log.IntoContext(context.Background(), funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{}))
	h := WarningHandler()
	h.HandleWarningHeaderWithContext(ctx, 299, "-", `metadata.finalizers: "resources-finalizer.argocd.argoproj.io": prefer a domain-qualified finalizer name including a path (/) to avoid accidental conflicts with other finalizer writers`)
	if len(logged) != 0 {
		t.Errorf("Argo CD's finalizer name warning logged: %v", logged)
	}
	h.HandleWarningHeaderWithContext(ctx, 299, "-", `metadata.finalizers: "example.com": prefer a domain-qualified finalizer name including a path (/) to avoid accidental conflicts with other finalizer writers`)
	h.HandleWarningHeaderWithContext(ctx, 299, "-", "kubevirt.io/v1alpha3 is deprecated")
	if len(logged) != 2 {
		t.Errorf("other warnings: %d logged, want 2: %v", len(logged), logged)
	}
}
