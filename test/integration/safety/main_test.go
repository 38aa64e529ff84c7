// Package safety is FleetVM's VM-safety suite: one test per way a running
// VM could be lost, each counting the VM deletions seen on the clusters (0,
// or exactly the one intended). Everything runs for real but Argo CD and
// KubeVirt: a hub and three spokes on real API servers, the real OCM
// placement scheduler, fleetvm-hub's reconcilers and admission webhooks,
// one fleetvm-agent per spoke with the KubeVirt simulator (its VMs take
// node capacity, so the agent's fit scores fall), and the delivery
// stand-in for Argo CD (Argo CD's own ApplicationSet code; Helm's engine;
// Argo CD's deletion rules, including leaving the VM when the destination
// has no cluster secret). fleetvm-hub runs on a fake clock with a 5-minute
// grace period: tests step it past every grace period.
package safety

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/vmclaim"
	"github.com/fleetvm/fleetvm/test/agenttest"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/fleetrun"
	"github.com/fleetvm/fleetvm/test/simulator"
)

const (
	argoNS = "argocd"
	// grace is fleetvm-hub's removal grace period, on the fake clock.
	grace = 5 * time.Minute
	// wait bounds every wait for the fleet to act.
	wait = 60 * time.Second
	// nsExportFails prefixes the namespaces whose exports fail on every
	// spoke (the simulator's fault).
	nsExportFails = "export-fails"
	// nsReceiverNeverReady prefixes the namespaces whose live migration
	// receivers never get a pod (the simulator's fault).
	nsReceiverNeverReady = "receiver-never-ready"
	// annotationCrash on a VM's template makes its guest crash as it
	// boots (the simulator's CrashLoops): a bad change.
	annotationCrash = "test.fleetvm.io/crash"
	// Each spoke has one node of 16 CPUs: a 12-CPU VM leaves room for no
	// second one, so its cluster's fit score for its shape falls to 0.
	nodeCPU, nodeMemory = "16", "64Gi"
)

var (
	fleet  *fleetenv.Fleet
	spokes = []string{"prod-a", "prod-b", "prod-c"}
	// clock is fleetvm-hub's clock.
	clock = clocktesting.NewFakeClock(time.Now())
	// vms records every VM deleted on a spoke, and checks how many
	// clusters each VM runs on.
	vms = &deletions{}
	// failingMigrations are the migration IDs whose live migration fails
	// halfway (the simulator's fault).
	failingMigrations sync.Map
	// fleetVM is FleetVM on the fleet: its agents can be stopped and
	// started, its Argo CD cluster secrets made again.
	fleetVM *fleetrun.FleetVM
)

// TestMain starts the fleet (a hub and three spokes with work agents,
// and fleetvm-hub's admission webhooks) and FleetVM on it, on the fake
// clock.
func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(fleetrun.Main(m, fleetrun.Suite{
		Fleet:    fleetenv.Options{Spokes: spokes, WorkAgents: true},
		Webhooks: true,
		Setup: func(ctx context.Context, f *fleetenv.Fleet) (func() error, error) {
			fleet = f
			if err := startFleet(ctx, f); err != nil {
				return nil, err
			}
			return func() error { fleetVM.Wait(); return nil }, nil
		},
	}))
}

// startFleet joins the spokes (one 16-CPU node each) and starts FleetVM
// on them: fleetvm-hub on the fake clock, the delivery stand-in, and the
// agents with a score valid for 20 s refreshed every 5 s (so a stopped
// agent's score expires within a test); and the deletion recorders.
func startFleet(ctx context.Context, f *fleetenv.Fleet) error {
	for _, s := range f.Spokes {
		if err := f.RegisterManagedCluster(ctx, fleetenv.ManagedCluster{Name: s.Name, Labels: map[string]string{"env": "prod"}}); err != nil {
			return err
		}
		if _, err := s.CreateNode(ctx, fleetenv.Node{Name: s.Name + "-node-1", CPU: nodeCPU, Memory: nodeMemory}); err != nil {
			return err
		}
		if err := vms.record(ctx, s); err != nil {
			return err
		}
	}
	var err error
	fleetVM, err = fleetrun.Run(ctx, f, fleetrun.Options{
		ArgoNamespace: argoNS, GracePeriod: grace, Clock: clock, Logger: agenttest.Logger(),
		CapacityDebounce: 200 * time.Millisecond, CapacityResync: 5 * time.Second, ScoreValidity: 20 * time.Second,
		Faults: simulator.Faults{
			ExportFails:           func(ex types.NamespacedName) bool { return strings.HasPrefix(ex.Namespace, nsExportFails) },
			MigrationFailsHalfway: func(id string) bool { _, ok := failingMigrations.Load(id); return ok },
			ReceiverNeverReady:    func(vm types.NamespacedName) bool { return strings.HasPrefix(vm.Namespace, nsReceiverNeverReady) },
			CrashLoops: func(vm *kubevirtv1.VirtualMachine) bool {
				return vm.Spec.Template != nil && vm.Spec.Template.ObjectMeta.Annotations[annotationCrash] == "true"
			},
		},
	})
	return err
}

// deletion is one VM deleted on a spoke.
type deletion struct {
	Cluster string
	VM      types.NamespacedName
}

// deletions records every VirtualMachine a spoke deletes, from a watch on
// the spoke: the moment it gets a deletion timestamp, or is gone. The same
// watch is the fleet-wide invariant checker: it knows on which clusters
// each VM runs (exists, not being deleted), and records a violation the
// moment a VM runs on more clusters than its FleetVirtualMachine allows
// (limit); create registers the limit and fails the test on a violation.
type deletions struct {
	mu   sync.Mutex
	seen map[types.UID]bool
	all  []deletion
	// on: the clusters each VM runs on; limits: how many it may.
	on         map[types.NamespacedName]map[string]bool
	limits     map[types.NamespacedName]int
	violations map[types.NamespacedName][]string
	// down: for the VMs watched for it (watchDown), the clusters whose VM
	// is not ready now, and the most at any moment since.
	down     map[types.NamespacedName]map[string]bool
	mostDown map[types.NamespacedName]int
}

// watchDown starts counting on how many clusters at once the VM is not
// ready (exists, ready false), from now; it returns the most so far.
func (d *deletions) watchDown(vm types.NamespacedName) func() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.down == nil {
		d.down, d.mostDown = map[types.NamespacedName]map[string]bool{}, map[types.NamespacedName]int{}
	}
	d.down[vm], d.mostDown[vm] = map[string]bool{}, 0
	return func() int {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.mostDown[vm]
	}
}

// ready notes whether a watched VM is ready on a cluster.
func (d *deletions) ready(cluster string, vm *kubevirtv1.VirtualMachine) {
	d.mu.Lock()
	defer d.mu.Unlock()
	key := client.ObjectKeyFromObject(vm)
	down, ok := d.down[key]
	if !ok {
		return
	}
	if vm.DeletionTimestamp == nil && !vm.Status.Ready {
		down[cluster] = true
	} else {
		delete(down, cluster)
	}
	d.mostDown[key] = max(d.mostDown[key], len(down))
}

// running notes a VM on a cluster, or gone from it, and checks its limit.
func (d *deletions) running(cluster string, vm types.NamespacedName, runs bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.on == nil {
		d.on = map[types.NamespacedName]map[string]bool{}
		d.violations = map[types.NamespacedName][]string{}
	}
	if d.on[vm] == nil {
		d.on[vm] = map[string]bool{}
	}
	if !runs {
		delete(d.on[vm], cluster)
		return
	}
	d.on[vm][cluster] = true
	if limit, ok := d.limits[vm]; ok && len(d.on[vm]) > limit {
		clusters := slices.Sorted(maps.Keys(d.on[vm]))
		d.violations[vm] = append(d.violations[vm], fmt.Sprintf("%s runs on %d clusters %v, its FleetVirtualMachine allows %d",
			vm, len(clusters), clusters, limit))
	}
}

// limit sets how many clusters a VM may run on, and returns a check that
// reports every time it ran on more.
func (d *deletions) limit(vm types.NamespacedName, n int) func() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.limits == nil {
		d.limits = map[types.NamespacedName]int{}
	}
	d.limits[vm] = n
	return func() []string {
		d.mu.Lock()
		defer d.mu.Unlock()
		return slices.Clone(d.violations[vm])
	}
}

// copies lists the clusters a VM runs on, sorted.
func (d *deletions) copies(vm types.NamespacedName) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Sorted(maps.Keys(d.on[vm]))
}

func (d *deletions) record(ctx context.Context, spoke *fleetenv.Cluster) error {
	c, err := cache.New(spoke.Config, cache.Options{Scheme: fleet.Scheme})
	if err != nil {
		return err
	}
	inf, err := c.GetInformer(ctx, &kubevirtv1.VirtualMachine{})
	if err != nil {
		return err
	}
	add := func(o any) {
		if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = tomb.Obj
		}
		vm, ok := o.(*kubevirtv1.VirtualMachine)
		if !ok {
			return
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.seen == nil {
			d.seen = map[types.UID]bool{}
		}
		if d.seen[vm.UID] {
			return
		}
		d.seen[vm.UID] = true
		d.all = append(d.all, deletion{Cluster: spoke.Name, VM: client.ObjectKeyFromObject(vm)})
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if vm, ok := o.(*kubevirtv1.VirtualMachine); ok {
				d.running(spoke.Name, client.ObjectKeyFromObject(vm), vm.DeletionTimestamp == nil)
			}
		},
		UpdateFunc: func(_, cur any) {
			if vm, ok := cur.(*kubevirtv1.VirtualMachine); ok {
				d.running(spoke.Name, client.ObjectKeyFromObject(vm), vm.DeletionTimestamp == nil)
				d.ready(spoke.Name, vm)
				if vm.DeletionTimestamp != nil {
					add(vm)
				}
			}
		},
		DeleteFunc: func(o any) {
			add(o)
			if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = tomb.Obj
			}
			if vm, ok := o.(*kubevirtv1.VirtualMachine); ok {
				d.running(spoke.Name, client.ObjectKeyFromObject(vm), false)
			}
		},
	}); err != nil {
		return err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return errors.New("the deletion recorder's cache did not sync")
	}
	return nil
}

// mark is a point in the record.
func (d *deletions) mark() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.all)
}

// since returns the deletions after mark of VMs in namespace ns.
func (d *deletions) since(mark int, ns string) []deletion {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []deletion
	for _, x := range d.all[mark:] {
		if x.VM.Namespace == ns {
			out = append(out, x)
		}
	}
	return out
}

// create creates the FleetVirtualMachine; when the test ends it is deleted
// (its VMs with it), so tests do not share capacity. Its VM may run on no
// more clusters than it asks for (every spoke when it asks for every
// cluster that qualifies): the test fails if it ever does.
func create(t *testing.T, fvm *fleetv1alpha1.FleetVirtualMachine) {
	t.Helper()
	limit := len(spokes)
	if n := fvm.Spec.Placement.Clusters; n != nil {
		limit = int(*n)
	}
	createLimited(t, fvm, limit)
}

// createLimited is create with the number of clusters the VM may run on.
func createLimited(t *testing.T, fvm *fleetv1alpha1.FleetVirtualMachine, limit int) {
	t.Helper()
	check := vms.limit(vmclaim.Identity(fvm), limit)
	t.Cleanup(func() {
		for _, v := range check() {
			t.Errorf("invariant: %s", v)
		}
	})
	if err := fleet.Hub.Tenant(t.Context(), fvm.Namespace); err != nil {
		t.Fatal(err)
	}
	if err := fleet.Hub.Client.Create(t.Context(), fvm); err != nil {
		t.Fatalf("create FleetVirtualMachine %s: %v", client.ObjectKeyFromObject(fvm), err)
	}
	t.Cleanup(func() { remove(t, client.ObjectKeyFromObject(fvm)) })
}

// remove deletes a FleetVirtualMachine and waits until it and its VMs are
// gone.
func remove(t *testing.T, key client.ObjectKey) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	err := fleet.Hub.Client.Delete(ctx, &fleetv1alpha1.FleetVirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
		return
	}
	err = fleetenv.Eventually(ctx, wait, func() (bool, error) {
		err := fleet.Hub.Client.Get(ctx, key, &fleetv1alpha1.FleetVirtualMachine{})
		if !apierrors.IsNotFound(err) {
			return false, client.IgnoreNotFound(err)
		}
		for _, s := range fleet.Spokes {
			var list kubevirtv1.VirtualMachineList
			if err := s.Client.List(ctx, &list, client.MatchingLabels{
				fleetv1alpha1.LabelFleetVMNamespace: key.Namespace, fleetv1alpha1.LabelFleetVMName: key.Name,
			}); err != nil {
				return false, err
			}
			if len(list.Items) > 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("FleetVirtualMachine %s and its VMs not gone: %v", key, err)
	}
}

// waitFVM polls the FleetVirtualMachine (as the admin) until cond holds.
func waitFVM(t *testing.T, key client.ObjectKey, what string, cond func(*fleetv1alpha1.FleetVirtualMachine) bool) *fleetv1alpha1.FleetVirtualMachine {
	t.Helper()
	return fleetrun.WaitFVM(t, fleet.Hub.Client, key, wait, what, cond)
}

// running tells whether the VM runs, ready, on exactly n placed clusters
// and nothing else is listed.
func running(n int) func(*fleetv1alpha1.FleetVirtualMachine) bool {
	return func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		if f.Status.ObservedGeneration != f.Generation || len(f.Status.Clusters) != n {
			return false
		}
		for _, c := range f.Status.Clusters {
			if c.Phase != fleetv1alpha1.ClusterPhaseRunning || !c.Ready {
				return false
			}
		}
		return true
	}
}

// clustersOf lists the clusters the status lists, with their phases.
func clustersOf(f *fleetv1alpha1.FleetVirtualMachine) map[string]fleetv1alpha1.ClusterPhase {
	out := map[string]fleetv1alpha1.ClusterPhase{}
	for _, c := range f.Status.Clusters {
		out[c.Cluster] = c.Phase
	}
	return out
}

// names lists the clusters the status lists, sorted.
func names(f *fleetv1alpha1.FleetVirtualMachine) []string {
	var out []string
	for _, c := range f.Status.Clusters {
		out = append(out, c.Cluster)
	}
	slices.Sort(out)
	return out
}

// passGrace steps fleetvm-hub's clock past the grace period n times,
// letting the hub act after each step (settle).
func passGrace(t *testing.T, n int, keys ...client.ObjectKey) {
	t.Helper()
	for range n {
		clock.Step(grace + time.Second)
		for _, k := range keys {
			settle(t, k)
		}
	}
}

// settle makes the hub reconcile the FleetVirtualMachine at the clock's
// current time and waits until it did: a harmless spec change (Argo CD's
// selfHeal toggled) bumps the generation, and the status's
// observedGeneration reaching it proves a whole reconcile ran after it.
// The status is written before the hub acts (it records every removal
// first), so what it shows then is what the hub decided.
func settle(t *testing.T, key client.ObjectKey) *fleetv1alpha1.FleetVirtualMachine {
	t.Helper()
	fvm := &fleetv1alpha1.FleetVirtualMachine{}
	if err := fleet.Hub.Client.Get(t.Context(), key, fvm); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(fvm.DeepCopy())
	fvm.Spec.Delivery.SelfHeal = ptr.To(fvm.Spec.Delivery.SelfHeal != nil && !*fvm.Spec.Delivery.SelfHeal)
	if err := fleet.Hub.Client.Patch(t.Context(), fvm, patch); err != nil {
		t.Fatal(err)
	}
	gen := fvm.Generation
	return waitFVM(t, key, fmt.Sprintf("the hub reconciled generation %d", gen), func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return f.Status.ObservedGeneration >= gen
	})
}

// setLabel sets (or, with value "", removes) a label of a ManagedCluster.
func setLabel(t *testing.T, cluster, key, value string) {
	t.Helper()
	ctx := context.Background() // also from t.Cleanup
	raw := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
	if value == "" {
		raw = fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, key)
	}
	mc := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: cluster}}
	if err := fleet.Hub.Client.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(raw))); err != nil {
		t.Fatal(err)
	}
}

// vmOn tells whether the VM exists, not being deleted, on the cluster.
func vmOn(t *testing.T, cluster string, vm types.NamespacedName) bool {
	t.Helper()
	got := &kubevirtv1.VirtualMachine{}
	err := fleet.Spoke(cluster).Client.Get(t.Context(), vm, got)
	if apierrors.IsNotFound(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return got.DeletionTimestamp == nil
}

// applications lists a FleetVirtualMachine's Applications by cluster.
func applications(t *testing.T, key client.ObjectKey) map[string]argov1alpha1.Application {
	t.Helper()
	return fleetrun.Applications(t, fleet.Hub.Client, argoNS, key)
}

// expectDeletions fails unless exactly want VMs of namespace ns were
// deleted on the spokes since mark.
func expectDeletions(t *testing.T, mark int, ns string, want ...deletion) {
	t.Helper()
	// The recorders' watches may trail the read that saw a VM gone: wait
	// until they hold as many deletions as wanted (more fail below).
	var got []deletion
	_ = fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		got = vms.since(mark, ns)
		return len(got) >= len(want), nil
	})
	if want == nil {
		want = []deletion{}
	}
	if got == nil {
		got = []deletion{}
	}
	if len(got) != len(want) || !slices.Equal(got, want) {
		t.Errorf("VMs deleted on the clusters: %+v, want %+v", got, want)
	}
	t.Logf("VM deletions on the clusters: %d", len(got))
}

// logScores logs each spoke's capacity score against the hub's clock, and
// each node's CPU: allocatable, and requested by the pods on it (those
// being deleted apart).
func logScores(t *testing.T) {
	ctx := context.Background()
	for _, s := range fleet.Spokes {
		score := &clusterv1alpha1.AddOnPlacementScore{}
		if err := fleet.Hub.Client.Get(ctx, client.ObjectKey{Namespace: s.Name, Name: fleetv1alpha1.CapacityScoreName}, score); err != nil {
			t.Logf("score of %s: %v", s.Name, err)
		} else {
			t.Logf("score of %s (hub clock %s, valid until %v): %+v", s.Name, clock.Now().Format(time.RFC3339), score.Status.ValidUntil, score.Status.Scores)
		}
		var nodes corev1.NodeList
		var pods corev1.PodList
		if err := s.Client.List(ctx, &nodes); err != nil {
			t.Logf("nodes of %s: %v", s.Name, err)
			continue
		}
		if err := s.Client.List(ctx, &pods); err != nil {
			t.Logf("pods of %s: %v", s.Name, err)
			continue
		}
		for _, n := range nodes.Items {
			var used, deleting resource.Quantity
			count := 0
			for _, p := range pods.Items {
				if p.Spec.NodeName != n.Name {
					continue
				}
				for _, c := range p.Spec.Containers {
					if p.DeletionTimestamp != nil {
						deleting.Add(c.Resources.Requests[corev1.ResourceCPU])
					} else {
						used.Add(c.Resources.Requests[corev1.ResourceCPU])
					}
				}
				count++
			}
			t.Logf("node %s/%s: cpu %s allocatable, %s requested by %d pods (%s by pods being deleted)",
				s.Name, n.Name, n.Status.Allocatable.Cpu(), used.String(), count, deleting.String())
		}
	}
}

// placementOf is the name of the Placement the FleetVirtualMachine's
// status names: its own, or the candidate Placement it shares.
func placementOf(t *testing.T, key client.ObjectKey) string {
	t.Helper()
	return fleetrun.PlacementName(t, fleet.Hub.Client, key, wait)
}
