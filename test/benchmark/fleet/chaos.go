package fleet

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine"
	"github.com/fleetvm/fleetvm/test/fleetenv"
)

// ChaosConfig configures the chaos run: the fleet benchmark's fleet, with
// fleetvm-hub killed while the FleetVirtualMachines converge.
type ChaosConfig struct {
	Config
	// Kills is how many times fleetvm-hub is killed with SIGKILL (default 5).
	Kills int
	// Seed chooses the kill points; runs with one seed kill at the same
	// points of the convergence.
	Seed uint64
}

// ChaosReport is what a chaos run observed.
type ChaosReport struct {
	FleetVMs  int
	Converged int
	Kills     int
	// KilledAt are the numbers of converged FleetVMs when each kill came.
	KilledAt []int
	// ApplicationsDeleted and VMsDeleted count what the hub removed: the
	// Applications deleted, and the VMs Argo CD (its stand-in) then
	// deleted on the clusters.
	ApplicationsDeleted int
	VMsDeleted          int
	// Moved counts FleetVMs given an Application on more clusters than
	// they ask for: a copy started elsewhere.
	Moved int
	// Copies lists FleetVMs whose VM the clusters ever held on other than
	// the clusters asked for, at the end or at any moment before (more
	// copies at once): counted on the clusters, not read from the hub.
	Copies []string
	// Duplicates lists FleetVMs with other than one Placement (their own
	// or a candidate Placement) and one ApplicationSet, and candidate
	// Placements no FleetVM uses.
	Duplicates []string
	// Observed is how long after convergence the run kept watching (at
	// least twice the grace period).
	Observed time.Duration
}

// Chaos creates cfg.FleetVMs FleetVirtualMachines at once and kills
// fleetvm-hub with SIGKILL cfg.Kills times while they converge: the first
// time right after they are created, then at random numbers of converged
// FleetVMs, each time restarting it at once. Once all converged, it keeps
// watching for twice the grace period, then counts what was deleted and
// moved: a hub that keeps VMs only by intent deletes nothing.
func Chaos(ctx context.Context, cfg ChaosConfig) (*ChaosReport, error) {
	cfg.defaults()
	if cfg.Kills <= 0 {
		cfg.Kills = 5
	}
	// The creates race the kills, and a hub that is down fails its
	// validating webhook closed: they would be refused, as a user's
	// would. The run is about what the controller does, and so it also
	// adds every finalizer itself, the webhook's fallback.
	cfg.DisableWebhooks = true
	if cfg.HubBinary == "" {
		return nil, errors.New("chaos: no fleetvm-hub binary given")
	}
	h := &harness{
		cfg:       cfg.Config,
		fvms:      newWaitSet[*fleetv1alpha1.FleetVirtualMachine](),
		decisions: newWaitSet[*clusterv1beta1.PlacementDecision](),
		appSets:   newWaitSet[*argov1alpha1.ApplicationSet](),
		started:   time.Now(),
		report:    &Report{},
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rep := &ChaosReport{FleetVMs: cfg.FleetVMs}
	err := h.chaos(ctx, cfg, rep)
	if h.hub != nil {
		h.hub.stop()
	}
	cancel()
	if h.fleet != nil {
		if serr := h.fleet.Stop(); serr != nil {
			h.logf("stop the test environment: %v", serr)
		}
	}
	return rep, err
}

const chaosNS = "chaos"

// maxDown bounds how long a killed hub stays down.
const maxDown = 10 * time.Second

func (h *harness) chaos(ctx context.Context, cfg ChaosConfig, rep *ChaosReport) error {
	for _, s := range []struct {
		name string
		fn   func(context.Context) error
	}{
		{"start the hub API server and the OCM scheduler", h.startFleet},
		{"register the managed clusters", h.registerClusters},
		{"start the load generator", h.startLoad},
		{"start fleetvm-hub", h.startHub},
		{"seed the VM shapes", h.seed},
	} {
		h.logf("%s", s.name)
		if err := s.fn(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}

	m := cfg.FleetVMs
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x5eed))
	points := []int{0}
	for range cfg.Kills - 1 {
		points = append(points, rng.IntN(m*9/10+1))
	}
	slices.Sort(points)
	waits := make([]<-chan time.Time, m)
	fvms := make([]*fleetv1alpha1.FleetVirtualMachine, m)
	for i := range fvms {
		fvms[i] = newFleetVM(chaosNS, fmt.Sprintf("vm-%04d", i), i, cfg.ClustersPerVM)
		waits[i] = h.fvms.wait(keyOf(fvms[i]), converged)
	}
	created := make(chan error, 1)
	go func() {
		created <- fleetenv.Parallel(ctx, m, cfg.Concurrency, func(ctx context.Context, i int) error {
			return h.create.Create(ctx, fvms[i])
		})
	}()

	convergedNow := func() int {
		n := 0
		for _, fvm := range h.fvms.snapshot() {
			if fvm.Namespace == chaosNS && converged(fvm) {
				n++
			}
		}
		return n
	}
	for i, at := range points {
		if i > 0 || at > 0 {
			err := poll(ctx, cfg.Timeout, func() bool { return convergedNow() >= at })
			if err != nil {
				return fmt.Errorf("kill %d: waiting for %d converged FleetVMs: %w", i+1, at, err)
			}
		}
		rep.KilledAt = append(rep.KilledAt, convergedNow())
		h.logf("chaos: SIGKILL fleetvm-hub (pid %d) with %d of %d FleetVMs converged", h.hub.pid(), rep.KilledAt[i], m)
		h.hub.kill()
		rep.Kills++
		// A killed hub is down a while (a restarted pod's back-off) and
		// the fleet moves on without it: it comes back once the capacity
		// of a cluster changed under it (the agents rescored after the VMs
		// delivered before the kill started), or after maxDown.
		scores := h.scoreEvents.Load()
		_ = poll(ctx, maxDown, func() bool { return h.scoreEvents.Load() > scores })
		if err := h.startHub(ctx); err != nil {
			return fmt.Errorf("restart fleetvm-hub after kill %d: %w", i+1, err)
		}
	}
	if err := <-created; err != nil {
		return err
	}
	if _, err := awaitAll(ctx, waits, cfg.Timeout); err != nil {
		rep.Converged = convergedNow()
		return fmt.Errorf("after %d kills: %d of %d converged: %w", rep.Kills, rep.Converged, m, err)
	}
	rep.Converged = convergedNow()
	h.logf("chaos: all %d FleetVMs converged after %d kills; watching for %s", m, rep.Kills, 2*cfg.GracePeriod)

	// An observation window, not a synchronization: a removal the hub
	// decided during the kills would happen once the grace period passed.
	start := time.Now()
	window := 2 * cfg.GracePeriod
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for time.Since(start) < window {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if err := h.hub.alive(); err != nil {
			return err
		}
	}
	rep.Observed = time.Since(start).Truncate(time.Second)
	rep.Converged = convergedNow()
	rep.ApplicationsDeleted = h.argo.deletedApplications()
	rep.VMsDeleted = int(h.agents.vmsDeleted.Load())
	now, most := h.agents.copiesOn(chaosNS)
	for i := range m {
		name := fmt.Sprintf("vm-%04d", i)
		if now[name] != cfg.ClustersPerVM || most[name] > cfg.ClustersPerVM {
			rep.Copies = append(rep.Copies, fmt.Sprintf("%s: on %d clusters, at most %d at once; asks for %d", name, now[name], most[name], cfg.ClustersPerVM))
		}
	}
	for appSet, n := range h.argo.createdPerApplicationSet() {
		if n > cfg.ClustersPerVM {
			rep.Moved++
			h.logf("chaos: ApplicationSet %s had Applications on %d clusters (asks for %d)", appSet, n, cfg.ClustersPerVM)
		}
	}
	return h.countChildren(ctx, rep)
}

// countChildren checks every FleetVM uses exactly one Placement (its own,
// or the candidate Placement its status names) and has one ApplicationSet,
// and that no candidate Placement is left without a FleetVM.
func (h *harness) countChildren(ctx context.Context, rep *ChaosReport) error {
	perFVM := map[string][2]int{}
	var placements clusterv1beta1.PlacementList
	var appSets argov1alpha1.ApplicationSetList
	var fvms fleetv1alpha1.FleetVirtualMachineList
	labels := client.MatchingLabels{fleetv1alpha1.LabelFleetVMNamespace: chaosNS}
	if err := h.admin.List(ctx, &placements, client.InNamespace(argoNS)); err != nil {
		return err
	}
	if err := h.admin.List(ctx, &appSets, client.InNamespace(argoNS), labels); err != nil {
		return err
	}
	if err := h.admin.List(ctx, &fvms, client.InNamespace(chaosNS)); err != nil {
		return err
	}
	candidates := map[string]bool{} // name: used
	for _, p := range placements.Items {
		if strings.HasPrefix(p.Name, fleetvirtualmachine.CandidatePlacementPrefix) {
			candidates[p.Name] = false
			continue
		}
		if p.Labels[fleetv1alpha1.LabelFleetVMNamespace] != chaosNS {
			continue
		}
		c := perFVM[p.Labels[fleetv1alpha1.LabelFleetVMName]]
		c[0]++
		perFVM[p.Labels[fleetv1alpha1.LabelFleetVMName]] = c
	}
	for _, f := range fvms.Items {
		if p := f.Status.Placement; p != nil {
			if _, ok := candidates[p.Name]; ok {
				candidates[p.Name] = true
				c := perFVM[f.Name]
				c[0]++
				perFVM[f.Name] = c
			}
		}
	}
	for _, a := range appSets.Items {
		c := perFVM[a.Labels[fleetv1alpha1.LabelFleetVMName]]
		c[1]++
		perFVM[a.Labels[fleetv1alpha1.LabelFleetVMName]] = c
	}
	for i := range rep.FleetVMs {
		name := fmt.Sprintf("vm-%04d", i)
		if c := perFVM[name]; c != [2]int{1, 1} {
			rep.Duplicates = append(rep.Duplicates, fmt.Sprintf("%s: %d Placements, %d ApplicationSets", name, c[0], c[1]))
		}
	}
	for name, used := range candidates {
		if !used {
			rep.Duplicates = append(rep.Duplicates, fmt.Sprintf("candidate Placement %s: no FleetVM uses it", name))
		}
	}
	return nil
}

// poll checks cond every 100 ms until it holds, ctx ends or timeout.
func poll(ctx context.Context, timeout time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}
