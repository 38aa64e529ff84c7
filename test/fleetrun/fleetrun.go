// Package fleetrun runs FleetVM on a test fleet (test/fleetenv): fleetvm-hub's
// reconcilers, the delivery stand-in in place of Argo CD, and one
// fleetvm-agent per spoke with the KubeVirt simulator. It is apart from
// fleetenv because it imports the agent, whose own tests use fleetenv.
package fleetrun

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fleetvm/fleetvm/pkg/agent"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine"
	"github.com/fleetvm/fleetvm/pkg/hub"
	"github.com/fleetvm/fleetvm/test/appsetsim"
	"github.com/fleetvm/fleetvm/test/deliverysim"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/simulator"
)

// Options configure Run.
type Options struct {
	// ArgoNamespace is the Argo CD namespace ("argocd" when empty).
	ArgoNamespace string
	// GracePeriod is fleetvm-hub's removal grace period (its default when 0).
	GracePeriod time.Duration
	// Clock is fleetvm-hub's clock (the real one when nil), and the
	// agents' for their capacity scores' validUntil.
	Clock clock.WithDelayedExecution
	// Logger receives every component's logs (discarded when unset).
	Logger logr.Logger
	// CapacityDebounce, CapacityResync and ScoreValidity tune the agents'
	// capacity scores (the agent's defaults when 0).
	CapacityDebounce, CapacityResync, ScoreValidity time.Duration
	// Faults are the failures the spokes' KubeVirt simulators play.
	Faults simulator.Faults
}

// FleetVM is FleetVM running on a fleet, as Run started it.
type FleetVM struct {
	// Argo renders ApplicationSets with Argo CD's code and makes Argo CD
	// cluster secrets.
	Argo *appsetsim.Sim

	f    *fleetenv.Fleet
	opts Options
	ctx  context.Context

	mu     sync.Mutex
	agents map[string]func() // each stops an agent and waits for it
	hubCfg map[string]*rest.Config
	// peers wires the spokes' simulators together: exports read across
	// clusters, one migration network.
	peers *simulator.Peers
	wg    sync.WaitGroup
	// stopHub stops fleetvm-hub's manager and returns once it stopped.
	stopHub func()
}

// Run starts FleetVM on the fleet until ctx ends: fleetvm-hub's
// reconcilers (not its webhooks: ServeWebhooks), the delivery stand-in in
// place of Argo CD, and on every spoke fleetvm-agent, with the identity and
// hub permissions the addon grants it and the KubeVirt simulator. Every
// spoke must be registered (RegisterManagedCluster); its Argo CD cluster
// secret is created here with the ManagedCluster's labels. Wait returns
// once the agents stopped.
func Run(ctx context.Context, f *fleetenv.Fleet, opts Options) (*FleetVM, error) {
	if opts.ArgoNamespace == "" {
		opts.ArgoNamespace = "argocd"
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	r := &FleetVM{f: f, opts: opts, ctx: ctx, agents: map[string]func(){}, hubCfg: map[string]*rest.Config{},
		peers: simulator.NewPeers(opts.Faults)}
	var err error
	if r.Argo, err = appsetsim.New(ctx, f.Hub.Config, f.Hub.Client, opts.ArgoNamespace); err == nil {
		err = r.Argo.Setup(ctx)
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
		if err := r.ClusterSecret(ctx, s.Name); err != nil {
			return nil, err
		}
		clusters[s.Name] = s.Client
		if err := r.StartAgent(s.Name); err != nil {
			return nil, err
		}
	}
	if err := r.StartHub(); err != nil {
		return nil, err
	}
	go func() {
		_ = deliverysim.Run(ctx, deliverysim.Options{
			Hub: f.Hub.Config, Scheme: f.Scheme, Namespace: opts.ArgoNamespace, ChartRoot: root,
			Clusters: clusters, Logger: opts.Logger,
		})
	}()
	return r, nil
}

// StartHub starts fleetvm-hub's reconcilers (Run does), with an empty
// cache: a restarted or restored hub.
func (r *FleetVM) StartHub() error {
	mgr, err := ctrl.NewManager(r.f.Hub.Config, ctrl.Options{
		Scheme:         hub.Scheme(),
		Cache:          hub.CacheOptions(r.f.Hub.Config, r.opts.ArgoNamespace),
		MapperProvider: hub.MapperProvider,
		Client:         hub.ClientOptions(),
		Metrics:        metricsserver.Options{BindAddress: "0"},
		Logger:         r.opts.Logger,
		Controller:     config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return err
	}
	cfg := fleetvirtualmachine.DefaultConfig()
	cfg.ArgoNamespace = r.opts.ArgoNamespace
	if r.opts.GracePeriod > 0 {
		cfg.GracePeriod = r.opts.GracePeriod
	}
	ctx, cancel := context.WithCancel(r.ctx)
	if err := hub.SetupReconcilers(ctx, mgr, hub.Options{FleetVM: cfg, Clock: r.opts.Clock}); err != nil {
		cancel()
		return err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = mgr.Start(ctx)
	}()
	r.mu.Lock()
	r.stopHub = func() { cancel(); <-done }
	r.mu.Unlock()
	return nil
}

// StopHub stops fleetvm-hub's reconcilers and returns once they stopped.
func (r *FleetVM) StopHub() {
	r.mu.Lock()
	stop := r.stopHub
	r.stopHub = nil
	r.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// ClusterSecret creates the Argo CD cluster secret of a registered
// cluster, labelled with its ManagedCluster's labels, as GitOpsCluster does.
func (r *FleetVM) ClusterSecret(ctx context.Context, cluster string) error {
	mc := &clusterv1.ManagedCluster{}
	if err := r.f.Hub.Client.Get(ctx, client.ObjectKey{Name: cluster}, mc); err != nil {
		return fmt.Errorf("cluster secret of %s: %w", cluster, err)
	}
	return r.Argo.ClusterSecret(ctx, cluster, mc.Labels)
}

// StartAgent runs the cluster's agent (and simulator) until the context of
// Run ends or StopAgent.
func (r *FleetVM) StartAgent(cluster string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.agents[cluster] != nil {
		return nil
	}
	spoke := r.f.Spoke(cluster)
	if spoke == nil {
		return fmt.Errorf("no spoke %s", cluster)
	}
	hubCfg, ok := r.hubCfg[cluster]
	if !ok {
		var err error
		if hubCfg, err = r.f.AgentHubConfig(r.ctx, cluster); err != nil {
			return err
		}
		r.hubCfg[cluster] = hubCfg
	}
	ctx, cancel := context.WithCancel(r.ctx)
	done := make(chan struct{})
	r.agents[cluster] = func() { cancel(); <-done }
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(done)
		_ = agent.Run(ctx, agent.Options{
			ClusterName: cluster, SpokeConfig: spoke.Config, HubConfig: hubCfg,
			Logger: r.opts.Logger, AlsoRun: r.peers.RunBeside(cluster, 0),
			CapacityDebounce: r.opts.CapacityDebounce, CapacityResync: r.opts.CapacityResync, ScoreValidity: r.opts.ScoreValidity,
			Clock: r.agentClock(),
		})
	}()
	return nil
}

// agentClock is the agents' clock: the hub's, so that a score's validUntil
// and the hub's judgement of it read the same time, as on a real fleet
// whose clocks agree (the real clock when Options.Clock is nil).
func (r *FleetVM) agentClock() clock.PassiveClock {
	if r.opts.Clock == nil {
		return clock.RealClock{}
	}
	return r.opts.Clock
}

// AgentHubConfig is the hub credentials of the cluster's agent (after
// StartAgent): its registration identity, with the addon's permissions.
func (r *FleetVM) AgentHubConfig(cluster string) *rest.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hubCfg[cluster]
}

// StopAgent stops the cluster's agent (its simulator with it) and returns
// once it stopped: nothing it had in flight writes after.
func (r *FleetVM) StopAgent(cluster string) {
	r.mu.Lock()
	stop := r.agents[cluster]
	delete(r.agents, cluster)
	r.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// Wait returns once every agent has stopped.
func (r *FleetVM) Wait() { r.wg.Wait() }
