// Package foundation holds the proof tests of the test environment and of
// the fleetvm.io API on a real hub API server.
package foundation

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/fleetvm/fleetvm/test/fleetenv"
)

var shared *fleetenv.Fleet

// TestMain starts one fleet (hub + three spokes) for the package's tests.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	webhooks, err := fleetenv.WebhookOptions()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	f, err := fleetenv.Start(ctx, fleetenv.Options{
		Spokes:     []string{"prod-east", "prod-west", "dev-1"},
		HubWebhook: webhooks,
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
	if err := f.ServeWebhooks(ctx, webhooks); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func fleet(t *testing.T) *fleetenv.Fleet {
	t.Helper()
	if shared == nil {
		t.Fatal("fleet not started")
	}
	return shared
}
