// Command fleetvm-localfleet runs the FleetVM local fleet (`make run`): a
// hub and three spokes on real API servers, the real OCM scheduler, real
// Argo CD, fleetvm-hub and the agents (see test/localfleet). It applies the
// examples, prints the fleet's status until every FleetVirtualMachine is
// Ready, then keeps the fleet up until Ctrl-C.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/localfleet"
)

func main() {
	if err := run(); err != nil {
		_, _ = fmt.Fprintln(os.Stderr, "fleetvm-localfleet:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		gitAddr  = flag.String("git-addr", "127.0.0.1:18080", "address of the git server for examples/git (the git example's repoURL names it)")
		examples = flag.String("examples", "", "folder of FleetVirtualMachines to apply; the repository's examples/ when empty")
		timeout  = flag.Duration("ready-timeout", 10*time.Minute, "how long to wait for every FleetVirtualMachine to be Ready")
		verbose  = flag.Bool("v", false, "log fleetvm-hub, the agents and the stand-ins to stderr")
	)
	flag.Parse()

	logger := logr.Discard()
	if *verbose {
		logger = zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.InfoLevel))
	}
	ctrl.SetLogger(logger)
	// client-go and the OCM scheduler log through klog, which writes errors
	// to stderr whatever its output: route it to the same logger, so the
	// table stays readable (conflicts the controllers retry are not news).
	klog.SetLogger(logger)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if *examples == "" {
		root, err := fleetenv.RepoRoot()
		if err != nil {
			return err
		}
		*examples = filepath.Join(root, "examples")
	}
	fvms, err := localfleet.LoadExamples(*examples)
	if err != nil {
		return err
	}

	start := time.Now()
	fmt.Println("== FleetVM local fleet")
	fleet, err := localfleet.Start(ctx, localfleet.Options{GitAddr: *gitAddr, Progress: os.Stdout, Logger: logger})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("== stopping the local fleet")
		if err := fleet.Stop(); err != nil {
			_, _ = fmt.Fprintln(os.Stderr, "stop:", err)
		}
		fmt.Println("== stopped")
	}()

	fmt.Printf("== applying %d FleetVirtualMachines from %s\n", len(fvms), *examples)
	if err := fleet.Apply(ctx, fvms); err != nil {
		return err
	}
	for _, fvm := range fvms {
		fmt.Printf("   %s/%s\n", fvm.Namespace, fvm.Name)
	}

	var last string
	ready, err := watch(ctx, fleet, *timeout, &last)
	if err != nil {
		return err
	}
	if ready {
		fmt.Printf("== all FleetVirtualMachines Ready, %s after start\n", time.Since(start).Round(time.Second))
	}
	fmt.Printf(`
== the local fleet runs until Ctrl-C
   hub kubeconfig:   %s
   try:              kubectl --kubeconfig %s get fvm -A
`, fleet.HubKubeconfig, fleet.HubKubeconfig)
	for _, s := range fleet.Spokes {
		fmt.Printf("   spoke %-7s     %s\n", s.Name+":", s.Kubeconfig)
	}
	fmt.Printf("   Argo CD logs:     %s\n   Helm repository:  %s\n   git repository:   %s\n\n",
		fleet.LogDir, fleet.ChartRepoURL, fleet.GitRepoURL)

	// Keep showing the fleet as it changes (edits from another terminal).
	_, err = watch(ctx, fleet, 0, &last)
	return err
}

// watch prints the status table whenever it differs from *last. With a
// timeout, it returns true once every FleetVirtualMachine is Ready, and an
// error when the timeout passes first; without, it runs until ctx ends.
func watch(ctx context.Context, fleet *localfleet.Fleet, timeout time.Duration, last *string) (bool, error) {
	var deadline <-chan time.Time
	if timeout > 0 {
		deadline = time.After(timeout)
	}
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		if err := fleet.Check(); err != nil {
			return false, err
		}
		fvms, err := fleet.List(ctx)
		if err != nil && ctx.Err() == nil {
			return false, err
		}
		if table := localfleet.StatusTable(fvms); table != *last && ctx.Err() == nil {
			fmt.Printf("-- %s\n%s", time.Now().Format("15:04:05"), table)
			*last = table
		}
		all := len(fvms) > 0
		for i := range fvms {
			all = all && localfleet.Ready(&fvms[i])
		}
		if timeout > 0 && all {
			return true, nil
		}
		select {
		case <-ctx.Done():
			return false, nil
		case <-deadline:
			return false, fmt.Errorf("not every FleetVirtualMachine is Ready after %s (the table above shows where each stands)", timeout)
		case <-tick.C:
		}
	}
}
