package fleetrun

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/fleetvm/fleetvm/test/agenttest"
	"github.com/fleetvm/fleetvm/test/fleetenv"
)

// Suite is what a test package runs on: the fleet it starts for all its
// tests, and what it starts on that fleet.
type Suite struct {
	// Fleet is the test fleet (hub, spokes, scheduler, work agents).
	Fleet fleetenv.Options
	// Webhooks installs fleetvm-hub's admission webhooks into the hub and
	// serves them for the whole run.
	Webhooks bool
	// Logger is controller-runtime's logger (agenttest.Logger when unset:
	// discarded unless FLEETENV_VERBOSE is set).
	Logger logr.Logger
	// Setup runs once the fleet is up, before the tests: it keeps the
	// fleet for the tests and starts what they need. The teardown it
	// returns (nil: none) runs after the tests, once the context Setup
	// was given is cancelled, and before the fleet stops; an error from
	// either fails the package.
	Setup func(ctx context.Context, f *fleetenv.Fleet) (teardown func() error, err error)
}

// Main starts the suite's fleet, runs the package's tests on it, and stops
// everything it started; it returns the exit code for os.Exit. It is the
// body of every integration suite's TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(fleetrun.Main(m, suite)) }
func Main(m *testing.M, s Suite) int {
	logger := s.Logger
	if logger.GetSink() == nil {
		logger = agenttest.Logger()
	}
	ctrl.SetLogger(logger)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	opts := s.Fleet
	if s.Webhooks {
		webhooks, err := fleetenv.WebhookOptions()
		if err != nil {
			return fail(err)
		}
		opts.HubWebhook = webhooks
	}
	f, err := fleetenv.Start(ctx, opts)
	if err != nil {
		return fail(err)
	}
	defer func() {
		cancel()
		if err := f.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}()
	if s.Webhooks {
		if err := f.ServeWebhooks(ctx, opts.HubWebhook); err != nil {
			return fail(err)
		}
	}
	var teardown func() error
	if s.Setup != nil {
		if teardown, err = s.Setup(ctx, f); err != nil {
			return fail(err)
		}
	}
	code := m.Run()
	cancel()
	if teardown != nil {
		if err := teardown(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	return code
}

// Runners are what a suite's Setup starts beside the fleet (managers,
// agents, stand-ins), by name; each returns once Setup's context is
// cancelled.
type Runners map[string]<-chan error

// Go runs fn as the runner name.
func (r Runners) Go(name string, fn func() error) {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	r[name] = done
}

// Wait waits for every runner to return and joins their errors, each
// named (context.Canceled, a runner's way to say it was stopped, apart):
// a suite's teardown.
func (r Runners) Wait() error {
	var errs []error
	for name, done := range r {
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}
