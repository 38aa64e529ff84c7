// Package fleet tests FleetVM end to end on a hub and two spokes, all real
// API servers: the real OCM placement scheduler, fleetvm-hub's reconcilers,
// one fleetvm-agent per spoke with the hub permissions the addon grants it,
// the real OCM work agent and the KubeVirt simulator on each spoke, the
// admission webhooks, and the delivery stand-in in place
// of Argo CD (ApplicationSets rendered by Argo CD's own code, the VM chart
// rendered by Helm's engine and applied to the spokes).
package fleet

import (
	"context"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fleetvm/fleetvm/pkg/agent"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine"
	"github.com/fleetvm/fleetvm/pkg/hub"
	"github.com/fleetvm/fleetvm/test/agenttest"
	"github.com/fleetvm/fleetvm/test/appsetsim"
	"github.com/fleetvm/fleetvm/test/deliverysim"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/fleetrun"
	"github.com/fleetvm/fleetvm/test/simulator"
)

const (
	argoNS = "argocd"
	wait   = 60 * time.Second
	// nodeCPU and nodeMemory size each spoke's one node.
	nodeCPU, nodeMemory = "16", "64Gi"
)

var (
	fleet  *fleetenv.Fleet
	spokes = []string{"prod-a", "prod-b"}
	// imageClock is the clock of disk-image retention; tests move it.
	imageClock = clocktesting.NewFakeClock(time.Now())
	// argo renders ApplicationSets and writes their Applications as Argo
	// CD's ApplicationSet controller does.
	argo *appsetsim.Sim
)

// TestMain starts the fleet (a hub and two spokes with work agents, and
// fleetvm-hub's admission webhooks) and FleetVM on it.
func TestMain(m *testing.M) {
	os.Exit(fleetrun.Main(m, fleetrun.Suite{
		Fleet:    fleetenv.Options{Spokes: spokes, WorkAgents: true},
		Webhooks: true,
		Setup: func(ctx context.Context, f *fleetenv.Fleet) (func() error, error) {
			fleet = f
			runners, err := startFleet(ctx, f)
			if err != nil {
				return nil, err
			}
			return runners.Wait, nil
		},
	}))
}

// startFleet joins the spokes to the hub and starts everything that runs:
// fleetvm-hub, the delivery stand-in, and per spoke the agent (with the
// simulator).
func startFleet(ctx context.Context, f *fleetenv.Fleet) (fleetrun.Runners, error) {
	runners := fleetrun.Runners{}
	var err error
	argo, err = appsetsim.New(ctx, f.Hub.Config, f.Hub.Client, argoNS)
	if err == nil {
		err = argo.Setup(ctx)
	}
	if err != nil {
		return nil, err
	}
	root, err := fleetenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	clusters := map[string]client.Client{}
	for _, s := range f.Spokes {
		labels := map[string]string{"env": "prod"}
		if err := f.RegisterManagedCluster(ctx, fleetenv.ManagedCluster{Name: s.Name, Labels: labels}); err != nil {
			return nil, err
		}
		if err := argo.ClusterSecret(ctx, s.Name, labels); err != nil {
			return nil, err
		}
		if _, err := s.CreateNode(ctx, fleetenv.Node{Name: s.Name + "-node-1", CPU: nodeCPU, Memory: nodeMemory}); err != nil {
			return nil, err
		}
		hubConfig, err := f.AgentHubConfig(ctx, s.Name)
		if err != nil {
			return nil, err
		}
		clusters[s.Name] = s.Client
		spoke := s
		runners.Go("agent "+s.Name, func() error {
			return agent.Run(ctx, agent.Options{
				ClusterName: spoke.Name, SpokeConfig: spoke.Config, HubConfig: hubConfig,
				Logger: agenttest.Logger(), AlsoRun: simulator.RunBeside(0),
				CapacityDebounce: 200 * time.Millisecond,
			})
		})
	}
	mgr, err := ctrl.NewManager(f.Hub.Config, ctrl.Options{
		Scheme: hub.Scheme(),
		Cache:  hub.CacheOptions(f.Hub.Config, argoNS),
		Client: hub.ClientOptions(),
		// fleetvm-hub's writes of FleetVirtualMachines are counted, and a
		// test may act right before any of its writes.
		NewClient: func(cfg *rest.Config, opts client.Options) (client.Client, error) {
			c, err := client.New(cfg, opts)
			if err != nil {
				return nil, err
			}
			return agenttest.CountWrites(c, func(w agenttest.Write) {
				hubWrites.count(w)
				beforeHubWrite.run(w)
			}), nil
		},
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Logger:     agenttest.Logger(),
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, err
	}
	cfg := fleetvirtualmachine.DefaultConfig()
	cfg.ArgoNamespace = argoNS
	cfg.GracePeriod = time.Minute
	if err := hub.SetupReconcilers(ctx, mgr, hub.Options{FleetVM: cfg, Clock: imageClock}); err != nil {
		return nil, err
	}
	runners.Go("fleetvm-hub", func() error { return mgr.Start(ctx) })
	runners.Go("delivery stand-in", func() error {
		return deliverysim.Run(ctx, deliverysim.Options{
			Hub: f.Hub.Config, Scheme: f.Scheme, Namespace: argoNS, ChartRoot: root,
			Clusters: clusters, Logger: agenttest.Logger(),
		})
	})
	return runners, nil
}
