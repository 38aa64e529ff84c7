// Package drain benchmarks the drain of a cluster holding many
// FleetVirtualMachine copies: how long until every copy moved or was found
// unable to, whether the moves under way ever passed the drain's limits (at
// once in the cluster, and off one node), and whether any VM ever had two
// servers.
//
// A drain needs what the fleet benchmark's stand-ins do not play: VMs
// halted and held on their clusters, delivered and reported. So it runs on
// real spokes: a hub and three spokes on real API servers with the real OCM
// scheduler, fleetvm-hub's reconcilers in this process (test/fleetrun), a
// fleetvm-agent per spoke with the KubeVirt simulator, and the delivery
// stand-in for Argo CD, as the VM-safety suite does. Every copy boots from
// a container disk, so each moves by Restart.
package drain

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/drain"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/fleetrun"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

const (
	ns      = "drain"
	argoNS  = "argocd"
	drained = "drain-a"
	// Each node holds perNode copies of 1 CPU and 1 GiB, with room left.
	perNode             = 20
	nodeCPU, nodeMemory = "32", "128Gi"
)

var targets = []string{"drain-b", "drain-c"}

// Config is what the benchmark runs.
type Config struct {
	// Copies is how many FleetVM copies the drained cluster holds (one
	// FleetVM each).
	Copies int
	// Timeout bounds each wait: the copies running, the drain ending.
	Timeout time.Duration
	// GracePeriod is fleetvm-hub's removal grace period.
	GracePeriod time.Duration
	// Logf reports progress.
	Logf func(format string, args ...any)
}

// Result is what one drain showed.
type Result struct {
	Copies int `json:"copies"`
	// Nodes is how many nodes of the drained cluster held them.
	Nodes int `json:"nodes"`
	// Limits are the drain's: moves at once in the cluster, off one node.
	Limits drain.Limits `json:"limits"`
	// Placed is how long the copies took to run on the drained cluster,
	// from the first create.
	Placed time.Duration `json:"placed"`
	// Took is from the drain taint to the last move ended.
	Took time.Duration `json:"took"`
	// Moved ended Succeeded; Unable ended otherwise, by message.
	Moved  int            `json:"moved"`
	Unable map[string]int `json:"unable"`
	// MostAtOnce and MostOffOneNode are the most moves seen under way.
	MostAtOnce     int `json:"mostAtOnce"`
	MostOffOneNode int `json:"mostOffOneNode"`
	// SecondServers lists the VMs that ever had a server on two clusters
	// at once.
	SecondServers []string `json:"secondServers"`
	// LeftRunning lists the copies not running, ready, where their move
	// says they are (the target when moved, the drained cluster when not).
	LeftRunning []string `json:"leftRunning"`
	// StatusWrites are the FleetVM status writes the hub API server
	// answered from the taint to the last move ended, all FleetVMs
	// together.
	StatusWrites int `json:"statusWrites"`
}

// Run starts the fleet, places cfg.Copies copies on one cluster, drains it,
// and stops the fleet.
func Run(ctx context.Context, cfg Config) (res *Result, err error) {
	if cfg.Copies < 1 {
		return nil, errors.New("drain: no copies")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Minute
	}
	if cfg.GracePeriod == 0 {
		cfg.GracePeriod = 30 * time.Second
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	f, err := fleetenv.Start(ctx, fleetenv.Options{Spokes: append([]string{drained}, targets...), WorkAgents: true})
	if err != nil {
		return nil, err
	}
	b := &bench{cfg: cfg, f: f, nodeOf: map[string]string{}, active: map[string]bool{},
		servers: map[string]map[string]bool{}, second: map[string]bool{}}
	defer func() {
		cancel()
		if b.fleetVM != nil {
			b.fleetVM.Wait()
		}
		err = errors.Join(err, f.Stop())
	}()
	return b.run(ctx)
}

type bench struct {
	cfg     Config
	f       *fleetenv.Fleet
	fleetVM *fleetrun.FleetVM
	// hub is a cache of the namespace's FleetVMs and moves: the waits read
	// it, not the API server, which a List of hundreds every 100 ms would
	// keep busy.
	hub cache.Cache

	mu sync.Mutex
	// nodeOf is each copy's node on the drained cluster, by FleetVM.
	nodeOf map[string]string
	// active: each FleetVM's move is under way.
	active              map[string]bool
	mostActive, mostOff int
	// servers: the clusters each VM has a server on; second: the VMs that
	// ever had two.
	servers map[string]map[string]bool
	second  map[string]bool
}

func (b *bench) run(ctx context.Context) (*Result, error) {
	res := &Result{Copies: b.cfg.Copies, Limits: drain.DefaultLimits, Nodes: (b.cfg.Copies + perNode - 1) / perNode}
	// Each cluster has room for every copy.
	for _, s := range b.f.Spokes {
		if err := b.f.RegisterManagedCluster(ctx, fleetenv.ManagedCluster{Name: s.Name, Labels: map[string]string{"env": "prod"}}); err != nil {
			return nil, err
		}
		for i := range res.Nodes {
			if _, err := s.CreateNode(ctx, fleetenv.Node{Name: fmt.Sprintf("%s-node-%d", s.Name, i+1), CPU: nodeCPU, Memory: nodeMemory}); err != nil {
				return nil, err
			}
		}
		if err := b.watchServers(ctx, s); err != nil {
			return nil, err
		}
	}
	var err error
	if b.fleetVM, err = fleetrun.Run(ctx, b.f, fleetrun.Options{ArgoNamespace: argoNS, GracePeriod: b.cfg.GracePeriod}); err != nil {
		return nil, err
	}
	if err := b.f.Hub.Tenant(ctx, ns); err != nil {
		return nil, err
	}
	if err := b.watchHub(ctx); err != nil {
		return nil, err
	}

	// New copies never go to a draining cluster: with the others
	// draining, every copy lands on the one to drain.
	for _, c := range targets {
		if err := b.setDrain(ctx, c, true); err != nil {
			return nil, err
		}
	}
	b.cfg.Logf("create %d FleetVMs, one copy each", b.cfg.Copies)
	start := time.Now()
	keys := make([]client.ObjectKey, b.cfg.Copies)
	if err := fleetenv.Parallel(ctx, b.cfg.Copies, 8, func(ctx context.Context, i int) error {
		fvm := utiltesting.MakeFleetVM(ns, fmt.Sprintf("vm-%04d", i)).Clusters(1).VM(1, "1Gi").
			ContainerDisk("quay.io/containerdisks/fedora:41").Obj()
		keys[i] = client.ObjectKeyFromObject(fvm)
		return b.f.Hub.Client.Create(ctx, fvm)
	}); err != nil {
		return nil, err
	}
	if err := b.waitRunning(ctx, keys); err != nil {
		return nil, err
	}
	res.Placed = time.Since(start)
	b.cfg.Logf("%d copies running on %s in %s", b.cfg.Copies, drained, res.Placed.Truncate(time.Millisecond))
	for _, c := range targets {
		if err := b.setDrain(ctx, c, false); err != nil {
			return nil, err
		}
	}

	b.cfg.Logf("drain %s", drained)
	writesBefore, err := b.statusWrites(ctx)
	if err != nil {
		return nil, err
	}
	start = time.Now()
	if err := b.setDrain(ctx, drained, true); err != nil {
		return nil, err
	}
	var moves fleetv1alpha1.FleetVirtualMachineMoveList
	last := time.Now()
	if err := fleetenv.Eventually(ctx, b.cfg.Timeout, func() (bool, error) {
		if err := b.hub.List(ctx, &moves, client.InNamespace(ns), client.MatchingLabels{fleetv1alpha1.LabelDrain: drained}); err != nil {
			return false, err
		}
		ended := 0
		for i := range moves.Items {
			if moves.Items[i].Status.Phase.Terminal() {
				ended++
			}
		}
		if time.Since(last) > 15*time.Second {
			last = time.Now()
			b.cfg.Logf("drain: %d of %d moves ended", ended, b.cfg.Copies)
		}
		return len(moves.Items) == b.cfg.Copies && ended == b.cfg.Copies, nil
	}); err != nil {
		return nil, fmt.Errorf("the drain's %d moves did not all end: %w", len(moves.Items), err)
	}
	res.Took = time.Since(start)
	writesAfter, err := b.statusWrites(ctx)
	if err != nil {
		return nil, err
	}
	res.StatusWrites = writesAfter - writesBefore

	res.Unable = map[string]int{}
	where := map[string]string{}
	for _, m := range moves.Items {
		if m.Status.Phase == fleetv1alpha1.MoveSucceeded {
			res.Moved++
			where[m.Spec.FleetVirtualMachine] = m.Status.To
			continue
		}
		res.Unable[m.Status.Message]++
		where[m.Spec.FleetVirtualMachine] = drained
	}
	// Each copy runs where its move says, or is listed.
	left := func() ([]string, error) {
		var list fleetv1alpha1.FleetVirtualMachineList
		if err := b.hub.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		var out []string
		for i := range list.Items {
			if f := &list.Items[i]; !runningOn(f, where[f.Name]) {
				out = append(out, f.Name)
			}
		}
		return out, nil
	}
	if err := fleetenv.Eventually(ctx, b.cfg.Timeout/10, func() (bool, error) {
		var err error
		res.LeftRunning, err = left()
		return len(res.LeftRunning) == 0, err
	}); err != nil && len(res.LeftRunning) == 0 {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	res.MostAtOnce, res.MostOffOneNode = b.mostActive, b.mostOff
	res.SecondServers = slices.Sorted(maps.Keys(b.second))
	return res, nil
}

// waitRunning waits until every copy runs, ready, on the drained cluster,
// and notes its node.
func (b *bench) waitRunning(ctx context.Context, keys []client.ObjectKey) error {
	last := time.Now()
	return fleetenv.Eventually(ctx, b.cfg.Timeout, func() (bool, error) {
		var list fleetv1alpha1.FleetVirtualMachineList
		if err := b.hub.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		n := 0
		b.mu.Lock()
		for i := range list.Items {
			if f := &list.Items[i]; runningOn(f, drained) {
				n++
				b.nodeOf[f.Name] = f.Status.Clusters[0].Node
			}
		}
		b.mu.Unlock()
		if time.Since(last) > 15*time.Second {
			last = time.Now()
			b.cfg.Logf("%d of %d copies running", n, len(keys))
		}
		return n == len(keys), nil
	})
}

// runningOn tells whether the FleetVM's one copy runs, ready, on cluster.
func runningOn(f *fleetv1alpha1.FleetVirtualMachine, cluster string) bool {
	if f.Status.ObservedGeneration != f.Generation || len(f.Status.Clusters) != 1 {
		return false
	}
	c := f.Status.Clusters[0]
	return c.Cluster == cluster && c.Phase == fleetv1alpha1.ClusterPhaseRunning && c.Ready
}

// setDrain taints the cluster for a drain, or takes the taint off.
func (b *bench) setDrain(ctx context.Context, cluster string, on bool) error {
	mc := &clusterv1.ManagedCluster{}
	if err := b.f.Hub.Client.Get(ctx, types.NamespacedName{Name: cluster}, mc); err != nil {
		return err
	}
	before := mc.DeepCopy()
	mc.Spec.Taints = slices.DeleteFunc(mc.Spec.Taints, func(x clusterv1.Taint) bool { return x.Key == fleetv1alpha1.DrainTaintKey })
	if on {
		mc.Spec.Taints = append(mc.Spec.Taints, clusterv1.Taint{Key: fleetv1alpha1.DrainTaintKey, Effect: clusterv1.TaintEffectNoSelectIfNew, TimeAdded: metav1.Now()})
	}
	return b.f.Hub.Client.Patch(ctx, mc, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

// watchHub starts the cache of the namespace's FleetVMs and moves, and
// counts, from its watch, the moves under way: in all, and off each node
// of the drained cluster.
func (b *bench) watchHub(ctx context.Context) error {
	c, err := cache.New(b.f.Hub.Config, cache.Options{Scheme: b.f.Scheme, DefaultNamespaces: map[string]cache.Config{ns: {}},
		DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		return err
	}
	b.hub = c
	if _, err := c.GetInformer(ctx, &fleetv1alpha1.FleetVirtualMachine{}); err != nil {
		return err
	}
	inf, err := c.GetInformer(ctx, &fleetv1alpha1.FleetVirtualMachineMove{})
	if err != nil {
		return err
	}
	note := func(o any) {
		m, ok := o.(*fleetv1alpha1.FleetVirtualMachineMove)
		if !ok || m.Labels[fleetv1alpha1.LabelDrain] != drained {
			return
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		b.active[m.Spec.FleetVirtualMachine] = !m.Status.Phase.Terminal()
		perNode := map[string]int{}
		n := 0
		for fvm, a := range b.active {
			if a {
				n++
				perNode[b.nodeOf[fvm]]++
			}
		}
		b.mostActive = max(b.mostActive, n)
		for _, k := range perNode {
			b.mostOff = max(b.mostOff, k)
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: note, UpdateFunc: func(_, o any) { note(o) }}); err != nil {
		return err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return errors.New("the hub's cache did not sync")
	}
	return nil
}

// watchServers notes, from a watch on the spoke, on which clusters each VM
// has a server.
func (b *bench) watchServers(ctx context.Context, spoke *fleetenv.Cluster) error {
	cluster := spoke.Name
	return fleetrun.WatchServers(ctx, spoke, b.f.Scheme, ns, func(vmi *kubevirtv1.VirtualMachineInstance, serves bool) {
		b.mu.Lock()
		defer b.mu.Unlock()
		on := b.servers[vmi.Name]
		if on == nil {
			on = map[string]bool{}
			b.servers[vmi.Name] = on
		}
		if !serves {
			delete(on, cluster)
			return
		}
		on[cluster] = true
		if len(on) > 1 {
			b.second[vmi.Name] = true
		}
	})
}

// statusWrites is how many FleetVM status writes the hub API server has
// answered (apiserver_request_total).
func (b *bench) statusWrites(ctx context.Context) (int, error) {
	kube, err := kubernetes.NewForConfig(b.f.Hub.Config)
	if err != nil {
		return 0, err
	}
	raw, err := kube.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the hub API server's metrics: %w", err)
	}
	n := 0.0
	for line := range strings.Lines(string(raw)) {
		write := strings.Contains(line, `verb="PUT"`) || strings.Contains(line, `verb="PATCH"`) || strings.Contains(line, `verb="APPLY"`)
		if !write || !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `resource="fleetvirtualmachines"`) ||
			!strings.Contains(line, `subresource="status"`) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("hub API server metric %q: %w", line, err)
		}
		n += v
	}
	return int(n), nil
}

// Rows are the result as a report's rows: name, value, unit.
func (r *Result) Rows() [][3]string {
	rows := [][3]string{
		{"drain: copies on the drained cluster", fmt.Sprint(r.Copies), "copies"},
		{"drain: nodes holding them", fmt.Sprint(r.Nodes), "nodes"},
		{"drain: copies placed and running", fmt.Sprintf("%.1f", r.Placed.Seconds()), "s"},
		{"drain: taint to the last move ended", fmt.Sprintf("%.1f", r.Took.Seconds()), "s"},
		{"drain: moved", fmt.Sprint(r.Moved), "copies"},
		{"drain: unable to move", fmt.Sprint(r.Copies - r.Moved), "copies"},
		{"drain: most moves at once (limit)", fmt.Sprintf("%d (%d)", r.MostAtOnce, r.Limits.PerCluster), "moves"},
		{"drain: most moves off one node (limit)", fmt.Sprintf("%d (%d)", r.MostOffOneNode, r.Limits.PerNode), "moves"},
		{"drain: VMs that had two servers", fmt.Sprint(len(r.SecondServers)), "VMs"},
		{"drain: copies not running where their move says", fmt.Sprint(len(r.LeftRunning)), "copies"},
		{"drain: FleetVM status writes, all FleetVMs", fmt.Sprint(r.StatusWrites), "writes"},
		{"drain: FleetVM status writes per move", fmt.Sprintf("%.1f", float64(r.StatusWrites)/float64(max(r.Copies, 1))), "writes/move"},
	}
	msgs := slices.Collect(maps.Keys(r.Unable))
	sort.Strings(msgs)
	for _, m := range msgs {
		rows = append(rows, [3]string{"drain: unable: " + m, fmt.Sprint(r.Unable[m]), "copies"})
	}
	return rows
}

// Check is an error naming each way the drain was not safe or not
// complete: a limit passed, a second server, a copy not running where its
// move says, a copy not moved (every target had room).
func (r *Result) Check() error {
	var errs []error
	if r.MostAtOnce > r.Limits.PerCluster {
		errs = append(errs, fmt.Errorf("%d moves at once, over the limit of %d", r.MostAtOnce, r.Limits.PerCluster))
	}
	if r.MostOffOneNode > r.Limits.PerNode {
		errs = append(errs, fmt.Errorf("%d moves off one node, over the limit of %d", r.MostOffOneNode, r.Limits.PerNode))
	}
	if len(r.SecondServers) > 0 {
		errs = append(errs, fmt.Errorf("%d VMs had two servers: %v", len(r.SecondServers), r.SecondServers))
	}
	if len(r.LeftRunning) > 0 {
		errs = append(errs, fmt.Errorf("%d copies not running where their move says: %v", len(r.LeftRunning), r.LeftRunning))
	}
	if r.Moved != r.Copies {
		errs = append(errs, fmt.Errorf("%d of %d copies moved: %v", r.Moved, r.Copies, r.Unable))
	}
	return errors.Join(errs...)
}
