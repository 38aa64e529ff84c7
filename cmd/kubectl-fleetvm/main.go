// Command kubectl-fleetvm is the FleetVM kubectl plugin: put it on the PATH
// and run `kubectl fleetvm status|start|stop|restart|images|explain|move|drain|undrain`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/fleetvm/fleetvm/pkg/kubectlfleetvm"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := kubectlfleetvm.NewCommand(kubectlfleetvm.Config{
		IOStreams: genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr},
	}).ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
