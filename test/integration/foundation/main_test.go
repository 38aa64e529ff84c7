// Package foundation holds the proof tests of the test environment and of
// the fleetvm.io API on a real hub API server.
package foundation

import (
	"context"
	"os"
	"testing"

	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/fleetrun"
)

var shared *fleetenv.Fleet

// TestMain starts one fleet (hub + three spokes, with fleetvm-hub's
// admission webhooks) for the package's tests.
func TestMain(m *testing.M) {
	os.Exit(fleetrun.Main(m, fleetrun.Suite{
		Fleet:    fleetenv.Options{Spokes: []string{"prod-east", "prod-west", "dev-1"}},
		Webhooks: true,
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
