package simulator

import (
	"context"
	"sync"
	"time"

	exportv1beta1 "kubevirt.io/api/export/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Peers wires the simulators of one fleet's spokes together, as the
// network between real clusters would: each spoke gets an export proxy
// host and a synchronization address of its own, its CDI reads the other
// spokes' exports through Options.Exports, and all share one SyncNetwork.
// A simulator restarted (its agent stopped and started) replaces the
// spoke's previous one. Safe for concurrent use.
type Peers struct {
	network *SyncNetwork
	faults  Faults

	mu   sync.Mutex
	sims map[string]*Simulator
}

// NewPeers returns the wiring of a fleet whose simulators play faults.
func NewPeers(faults Faults) *Peers {
	return &Peers{network: NewSyncNetwork(), faults: faults, sims: map[string]*Simulator{}}
}

// ProxyHost is the export proxy host of a spoke of the fleet.
func ProxyHost(cluster string) string { return "virt-exportproxy." + cluster + ".invalid" }

// SyncAddress is the synchronization controller address of a spoke of
// the fleet.
func SyncAddress(cluster string) string { return "sync." + cluster + ".invalid:9185" }

// Options are the options of cluster's simulator, writing with the given
// options' Client, Clock and StepDelay.
func (p *Peers) Options(cluster string, o Options) Options {
	o.ExportProxyHost = ProxyHost(cluster)
	o.Exports = p.exportedData
	o.SyncAddress = SyncAddress(cluster)
	o.SyncNetwork = p.network
	o.Faults = p.faults
	return o
}

// Add registers cluster's simulator.
func (p *Peers) Add(cluster string, s *Simulator) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sims[cluster] = s
}

// RunBeside is simulator.RunBeside for cluster, wired to its peers.
func (p *Peers) RunBeside(cluster string, stepDelay time.Duration) func(ctrl.Manager) error {
	return func(mgr ctrl.Manager) error {
		// fleetvm-agent's scheme has no exports; a real KubeVirt serves
		// them beside the agent.
		if err := exportv1beta1.AddToScheme(mgr.GetScheme()); err != nil {
			return err
		}
		s := New(p.Options(cluster, Options{Client: mgr.GetClient(), StepDelay: stepDelay}))
		if err := s.SetupWithManager(mgr); err != nil {
			return err
		}
		p.Add(cluster, s)
		return nil
	}
}

// exportedData asks every spoke's simulator for the export volume URL.
func (p *Peers) exportedData(ctx context.Context, url string) (string, bool, error) {
	p.mu.Lock()
	sims := make([]*Simulator, 0, len(p.sims))
	for _, s := range p.sims {
		sims = append(sims, s)
	}
	p.mu.Unlock()
	for _, s := range sims {
		if data, ok, err := s.ExportedData(ctx, url); ok || err != nil {
			return data, ok, err
		}
	}
	return "", false, nil
}
