// Package kubectlfleetvm is the kubectl plugin kubectl-fleetvm: the fleet
// status of FleetVirtualMachines and the console links of their copies,
// fleet-wide start, stop and restart, disk image usage, moves of a VM's
// copy between clusters and cluster drains, all read from and written to
// the OCM hub.
package kubectlfleetvm

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// FieldManager is the field manager of every write the plugin makes.
const FieldManager = "kubectl-fleetvm"

// Config tunes the command for embedding and tests. The zero value (plus
// streams) is what the binary uses.
type Config struct {
	genericiooptions.IOStreams
	// Now is the clock for ages; time.Now when nil.
	Now func() time.Time
	// PollInterval is how often start, stop, restart and drain read the
	// hub while they wait; one second when zero.
	PollInterval time.Duration
	// Open opens a link in the browser (console --open); xdg-open, or
	// open on macOS, when nil.
	Open func(url string) error
}

// options is what every subcommand works with once the flags are parsed.
type options struct {
	flags         *genericclioptions.ConfigFlags
	client        client.WithWatch
	namespace     string
	allNamespaces bool
	out, errOut   io.Writer
	now           func() time.Time
	pollInterval  time.Duration
	openURL       func(url string) error
}

// NewCommand returns the kubectl-fleetvm command with the standard kubeconfig
// flags (--kubeconfig, --context, -n/--namespace, ...).
func NewCommand(cfg Config) *cobra.Command {
	if cfg.Out == nil {
		cfg.Out = os.Stdout
	}
	if cfg.ErrOut == nil {
		cfg.ErrOut = os.Stderr
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = time.Second
	}
	if cfg.Open == nil {
		cfg.Open = openInBrowser
	}
	o := &options{
		flags: genericclioptions.NewConfigFlags(true),
		out:   cfg.Out, errOut: cfg.ErrOut, now: cfg.Now, pollInterval: cfg.PollInterval, openURL: cfg.Open,
	}

	root := &cobra.Command{
		Use:   "kubectl-fleetvm",
		Short: "Fleet status, power, disk images, moves and drains of FleetVirtualMachines on an OCM hub",
		Long: `kubectl fleetvm reads FleetVirtualMachines and FleetDiskImages on the OCM hub
(the current kubeconfig context) and shows how every copy is doing on every
managed cluster; console links to each copy on its cluster's web console.
start, stop and restart change spec.runStrategy, which the
hub delivers to every cluster. move asks the hub to move one copy to another
cluster; drain and undrain put and take off the taint that has the hub move
every copy off a cluster. rollout follows, pauses, aborts and undoes the rollout
of a change (spec.rollout).`,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl fleetvm"},
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(cfg.Out)
	root.SetErr(cfg.ErrOut)
	o.flags.AddFlags(root.PersistentFlags())

	root.AddCommand(newStatusCommand(o), newImagesCommand(o), newExplainCommand(o), newConsoleCommand(o),
		newMoveCommand(o), newDrainCommand(o), newUndrainCommand(o), newRolloutCommand(o))
	for _, p := range []power{powerStart, powerStop, powerRestart} {
		root.AddCommand(newPowerCommand(o, p))
	}
	return root
}

// Scheme holds the types the plugin reads and writes.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(fleetv1alpha1.AddToScheme(s))
	utilruntime.Must(appsv1.AddToScheme(s))
	utilruntime.Must(clusterv1.Install(s))
	utilruntime.Must(clusterv1alpha1.Install(s))
	utilruntime.Must(clusterv1beta2.Install(s))
	return s
}

// complete connects to the hub named by the kubeconfig flags. Subcommands
// call it first; help and completion never connect.
func (o *options) complete() error {
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.UserAgent = FieldManager
	if cfg.QPS == 0 {
		// kubectl's own limits, not client-go's 5 per second.
		cfg.QPS, cfg.Burst = 50, 300
	}
	if o.client, err = client.NewWithWatch(cfg, client.Options{Scheme: Scheme()}); err != nil {
		return fmt.Errorf("connect to the hub: %w", err)
	}
	if o.namespace, _, err = o.flags.ToRawKubeConfigLoader().Namespace(); err != nil {
		return fmt.Errorf("resolve namespace: %w", err)
	}
	return nil
}

// listNamespace is the namespace to list in: all when -A is set.
func (o *options) listNamespace() string {
	if o.allNamespaces {
		return ""
	}
	return o.namespace
}

// explain turns API errors into messages that name what was asked for.
func explainError(err error, kind, namespace, name string) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsNotFound(err) && name != "":
		return fmt.Errorf("%s %q not found in namespace %q", kind, name, namespace)
	case meta.IsNoMatchError(err) || isCRDMissing(err):
		return fmt.Errorf("the fleetvm.io API (%s) is not installed on this cluster: is the kubeconfig context the OCM hub running FleetVM? (%w)", kind, err)
	case apierrors.IsForbidden(err) && namespace == "":
		return fmt.Errorf("not allowed to read or change %s in all namespaces: %w", kind, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("not allowed to read or change %s in namespace %q: %w", kind, namespace, err)
	}
	if name != "" {
		return fmt.Errorf("%s %s/%s: %w", kind, namespace, name, err)
	}
	return fmt.Errorf("list %s: %w", kind, err)
}

// isCRDMissing reports a NotFound for the resource itself (the CRD is
// absent), as opposed to a named object being absent.
func isCRDMissing(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) || !apierrors.IsNotFound(err) {
		return false
	}
	d := status.Status().Details
	return d != nil && d.Name == ""
}
