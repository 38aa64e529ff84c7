// Package addon proves the fleetvm addon wiring on real API servers: the
// agent manifests are accepted by a spoke and give the agent read-only access
// there; the agent's hub permissions, checked by the hub's real authorizer,
// reach only its own cluster namespace; and the addon manager deploys the
// agent and grants those permissions by itself.
package addon

import (
	"context"
	"io"
	"os"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/fleetrun"
)

// spokeName is the one spoke; it is also a registered ManagedCluster.
const spokeName = "cluster-a"

var shared *fleetenv.Fleet

// TestMain starts one fleet (hub + one spoke) for the package's tests.
func TestMain(m *testing.M) {
	if os.Getenv("FLEETENV_VERBOSE") == "" {
		// The addon framework logs every sync through klog.
		klog.SetLogger(logr.Discard())
		klog.LogToStderr(false)
		klog.SetOutput(io.Discard)
	}
	os.Exit(fleetrun.Main(m, fleetrun.Suite{
		Fleet: fleetenv.Options{Spokes: []string{spokeName}, NoPlacementController: true},
		Setup: func(_ context.Context, f *fleetenv.Fleet) (func() error, error) {
			shared = f
			return nil, nil
		},
	}))
}

func fleet(t *testing.T) *fleetenv.Fleet {
	t.Helper()
	if shared == nil {
		t.Fatal("fleet not started")
	}
	return shared
}
