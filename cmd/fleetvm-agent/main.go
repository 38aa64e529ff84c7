// Command fleetvm-agent is the fleetvm addon's agent on a managed cluster:
// it publishes the cluster's capacity score, VM reports and image inventory
// into the cluster namespace on the hub.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/fleetvm/fleetvm/pkg/agent"
	"github.com/fleetvm/fleetvm/pkg/agent/capacity"
	"github.com/fleetvm/fleetvm/pkg/memlimit"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		ctrl.Log.WithName("fleetvm-agent").Error(err, "fleetvm-agent failed")
		os.Exit(1)
	}
}

func run(args []string) error {
	// controller-runtime registers its own --kubeconfig on the default
	// flag set: use ours.
	fs := flag.NewFlagSet("fleetvm-agent", flag.ExitOnError)
	var (
		opts            agent.Options
		hubKubeconfig   string
		spokeKubeconfig string
		qps, hubQPS     float64
		burst, hubBurst int
	)
	fs.StringVar(&opts.ClusterName, "cluster-name", "", "name of this managed cluster (its namespace on the hub)")
	fs.StringVar(&hubKubeconfig, "hub-kubeconfig", "", "path of the hub kubeconfig the addon framework provides")
	fs.StringVar(&spokeKubeconfig, "kubeconfig", "", "path of the managed cluster's kubeconfig; in-cluster config when empty")
	fs.StringVar(&opts.HealthProbeBindAddress, "health-probe-bind-address", ":8000", "address of /healthz and /readyz; 0 turns them off")
	fs.StringVar(&opts.MetricsBindAddress, "metrics-bind-address", "0", "address of the metrics endpoint; 0 turns it off")
	fs.DurationVar(&opts.CapacityDebounce, "capacity-debounce", capacity.DefaultDebounce, "delay between a change on the cluster and the capacity recomputation (at most 10s)")
	fs.DurationVar(&opts.CapacityResync, "capacity-resync", capacity.DefaultResync, "longest time between two capacity computations")
	fs.Float64Var(&qps, "kube-api-qps", 20, "queries per second to the managed cluster's API server")
	fs.IntVar(&burst, "kube-api-burst", 40, "burst of queries to the managed cluster's API server")
	fs.Float64Var(&hubQPS, "hub-kube-api-qps", 10, "queries per second to the hub's API server")
	fs.IntVar(&hubBurst, "hub-kube-api-burst", 20, "burst of queries to the hub's API server")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	memlimit.Setup(ctrl.Log.WithName("setup"))

	if opts.ClusterName == "" {
		return fmt.Errorf("--cluster-name is required")
	}
	if hubKubeconfig == "" {
		return fmt.Errorf("--hub-kubeconfig is required")
	}
	if opts.CapacityDebounce > 10*time.Second {
		return fmt.Errorf("--capacity-debounce %s: at most 10s", opts.CapacityDebounce)
	}
	var err error
	if opts.HubConfig, err = clientcmd.BuildConfigFromFlags("", hubKubeconfig); err != nil {
		return fmt.Errorf("load hub kubeconfig %s: %w", hubKubeconfig, err)
	}
	if spokeKubeconfig == "" {
		opts.SpokeConfig, err = rest.InClusterConfig()
	} else {
		opts.SpokeConfig, err = clientcmd.BuildConfigFromFlags("", spokeKubeconfig)
	}
	if err != nil {
		return fmt.Errorf("load managed cluster config: %w", err)
	}
	opts.SpokeConfig.QPS, opts.SpokeConfig.Burst = float32(qps), burst
	opts.HubConfig.QPS, opts.HubConfig.Burst = float32(hubQPS), hubBurst
	opts.SpokeConfig.UserAgent = "fleetvm-agent"
	opts.HubConfig.UserAgent = "fleetvm-agent/" + opts.ClusterName
	opts.Logger = ctrl.Log.WithName("fleetvm-agent")
	return agent.Run(ctrl.SetupSignalHandler(), opts)
}
