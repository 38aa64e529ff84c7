// Package kind runs FleetVM's end-to-end specs (test/e2e) on a fleet of
// kind clusters with real Open Cluster Management, Argo CD and KubeVirt,
// set up by run.sh. Without that fleet (FLEETVM_E2E_KIND_HUB unset) it runs
// nothing: `go test ./...` and `make test` pass over it.
package kind

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetvm/fleetvm/test/e2e"
	"github.com/fleetvm/fleetvm/test/fleetenv"
)

// Real KubeVirt in software emulation boots VMs slowly; Argo CD and OCM
// poll. Generous, still bounded.
const timeout = 15 * time.Minute

func TestMain(m *testing.M) {
	if os.Getenv("FLEETVM_E2E_KIND_HUB") == "" {
		fmt.Println("kind e2e: FLEETVM_E2E_KIND_HUB not set, nothing to run (test/e2e/kind/run.sh sets up the fleet)")
		os.Exit(0)
	}
	ctrl.SetLogger(logr.Discard())
	os.Exit(m.Run())
}

// clientFor returns an admin client of the cluster of a kubeconfig file.
func clientFor(t *testing.T, kubeconfig string) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("kubeconfig %s: %v", kubeconfig, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: fleetenv.DefaultScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// spokes reads FLEETVM_E2E_KIND_SPOKES: name=kubeconfig,name=kubeconfig.
func spokes(t *testing.T) map[string]client.Client {
	t.Helper()
	out := map[string]client.Client{}
	for _, entry := range strings.Split(os.Getenv("FLEETVM_E2E_KIND_SPOKES"), ",") {
		name, path, ok := strings.Cut(entry, "=")
		if !ok || name == "" || path == "" {
			t.Fatalf("FLEETVM_E2E_KIND_SPOKES entry %q: want name=kubeconfig", entry)
		}
		out[name] = clientFor(t, path)
	}
	if len(out) < 2 {
		t.Fatalf("FLEETVM_E2E_KIND_SPOKES names %d clusters, want at least 2", len(out))
	}
	return out
}

func TestKindLifecycle(t *testing.T) {
	argo := os.Getenv("FLEETVM_E2E_KIND_ARGOCD_NAMESPACE")
	if argo == "" {
		argo = "argocd"
	}
	s := spokes(t)
	e2e.LifecycleSpec(t, e2e.LifecycleInput{
		Hub:           clientFor(t, os.Getenv("FLEETVM_E2E_KIND_HUB")),
		Spokes:        s,
		ArgoNamespace: argo,
		Namespace:     "e2e",
		Environment:   "prod",
		Clusters:      int32(len(s)),
		Timeout:       timeout,
	})
}
