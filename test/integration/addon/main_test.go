// Package addon proves the fleetvm addon wiring on real API servers: the
// agent manifests are accepted by a spoke and give the agent read-only access
// there; the agent's hub permissions, checked by the hub's real authorizer,
// reach only its own cluster namespace; and the addon manager deploys the
// agent and grants those permissions by itself.
package addon

import (
	"context"
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	"github.com/fleetvm/fleetvm/test/fleetenv"
)

// spokeName is the one spoke; it is also a registered ManagedCluster.
const spokeName = "cluster-a"

var shared *fleetenv.Fleet

// TestMain starts one fleet (hub + one spoke) for the package's tests.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv("FLEETENV_VERBOSE") == "" {
		// The addon framework logs every sync through klog.
		klog.SetLogger(logr.Discard())
		klog.LogToStderr(false)
		klog.SetOutput(io.Discard)
	}
	f, err := fleetenv.Start(context.Background(), fleetenv.Options{
		Spokes:                []string{spokeName},
		NoPlacementController: true,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		if err := f.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	shared = f
	return m.Run()
}

func fleet(t *testing.T) *fleetenv.Fleet {
	t.Helper()
	if shared == nil {
		t.Fatal("fleet not started")
	}
	return shared
}
