package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	agentcapacity "github.com/fleetvm/fleetvm/pkg/agent/capacity"
	"github.com/fleetvm/fleetvm/pkg/agent/inventory"
	"github.com/fleetvm/fleetvm/pkg/agent/vmstatus"
	"github.com/fleetvm/fleetvm/pkg/vmtemplate"
	"github.com/fleetvm/fleetvm/test/agenttest"
)

// Agent stand-ins: one per managed cluster, in the harness process.
//
// Each publishes its cluster's fleetvm-capacity AddOnPlacementScore with
// fleetvm-agent's own capacity reconciler (pkg/agent/capacity): same shape
// names read from the hub's fleetvm-shapes ConfigMap, same fit counting,
// same validUntil (3 minutes) and rewrite rule, same triggers (the shapes
// ConfigMap and the cluster's pods, debounced 5 s; a resync every 60 s).
// Only the spoke is simulated: its nodes and pods live in an in-memory
// client (2-4 nodes of 16 or 32 CPUs, some already busy), and every VM
// delivered to the cluster adds a virt-launcher pod asking for the VM's CPU
// and memory, so capacity is consumed as the fleet fills.
//
// VM reports are built with the agent's own code (pkg/agent/vmstatus.State
// and Spec over a KubeVirt VirtualMachine and instance): the VM is the one
// the Application carries in its Helm values, reported Running and ready
// as soon as the Application exists (no boot time is simulated), with a
// node and an IP address; a flip stops it (Stopped, runStrategy Halted).

// vmOnCluster is one delivered VM as the cluster's agent knows it.
type vmOnCluster struct {
	vm      *kubevirtv1.VirtualMachine
	pod     string
	node    string
	ip      string
	running bool
	report  *fleetv1alpha1.VMReport // as last written
}

// agent is the stand-in of one cluster's fleetvm-agent.
type agent struct {
	name     string
	index    int
	spoke    client.Client
	capacity *agentcapacity.Reconciler

	mu  sync.Mutex
	vms map[types.NamespacedName]*vmOnCluster
}

// agents runs every cluster's stand-in with shared work queues.
type agents struct {
	h      *harness
	byName map[string]*agent
	scores workqueue.TypedRateLimitingInterface[string]
	// reportWrites and scoreWrites count the stand-ins' writes.
	reportWrites atomic.Int64
	scoreWrites  atomic.Int64
	// vmsDeleted counts the VMs deleted from the clusters.
	vmsDeleted atomic.Int64
	// copies counts, per FleetVM, the clusters its VM is on now, and
	// mostCopies the most it was ever on at once: what the clusters hold,
	// not what the hub remembers.
	copiesMu   sync.Mutex
	copies     map[types.NamespacedName]int
	mostCopies map[types.NamespacedName]int
}

// countCopy notes one more (delta 1) or one fewer (-1) copy of the VM of
// the FleetVM key on the clusters.
func (a *agents) countCopy(key types.NamespacedName, delta int) {
	a.copiesMu.Lock()
	defer a.copiesMu.Unlock()
	a.copies[key] += delta
	if n := a.copies[key]; n > a.mostCopies[key] {
		a.mostCopies[key] = n
	}
}

// copiesOn returns, per FleetVM of namespace ns, the clusters its VM is
// on now and the most it was ever on at once.
func (a *agents) copiesOn(ns string) (now, most map[string]int) {
	a.copiesMu.Lock()
	defer a.copiesMu.Unlock()
	now, most = map[string]int{}, map[string]int{}
	for k, n := range a.copies {
		if k.Namespace == ns {
			now[k.Name] = n
		}
	}
	for k, n := range a.mostCopies {
		if k.Namespace == ns {
			most[k.Name] = n
		}
	}
	return now, most
}

func newAgents(h *harness, hubClient client.Client) *agents {
	a := &agents{
		h:          h,
		byName:     map[string]*agent{},
		copies:     map[types.NamespacedName]int{},
		mostCopies: map[types.NamespacedName]int{},
		scores: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "bench-agent-scores"}),
	}
	counting := agenttest.CountWrites(hubClient, func(agenttest.Write) { a.scoreWrites.Add(1) })
	// The agents read NetworkAttachmentDefinitions as metadata. A fake
	// client registers such a kind in its scheme on first use, and the
	// agents' fake clients share one scheme: register it before they run.
	nad := agentcapacity.NetworkAttachmentDefinitionGVK
	if !h.fleet.Scheme.Recognizes(nad) {
		h.fleet.Scheme.AddKnownTypeWithName(nad, &metav1.PartialObjectMetadata{})
		h.fleet.Scheme.AddKnownTypeWithName(nad.GroupVersion().WithKind(nad.Kind+"List"), &metav1.PartialObjectMetadataList{})
	}
	factor := nodeFactor(h.cfg)
	decoder := serializer.NewCodecFactory(h.fleet.Scheme).UniversalDecoder()
	for i, name := range h.clusterNames {
		nodes, pods := spokeCapacity(i, factor)
		objs := make([]client.Object, 0, len(nodes)+len(pods))
		for _, n := range nodes {
			objs = append(objs, n)
		}
		for _, p := range pods {
			objs = append(objs, p)
		}
		// A plain object tracker: the default one builds a REST mapper of
		// the whole scheme on every create (for managed fields, which
		// nothing here reads), work a real spoke does on its own machine
		// and that would be charged to the hub's two cores.
		tracker := clienttesting.NewObjectTracker(h.fleet.Scheme, decoder)
		spoke := fake.NewClientBuilder().WithScheme(h.fleet.Scheme).WithObjectTracker(tracker).WithObjects(objs...).Build()
		a.byName[name] = &agent{
			name: name, index: i, spoke: spoke,
			vms: map[types.NamespacedName]*vmOnCluster{},
			capacity: &agentcapacity.Reconciler{
				Spoke: spoke, Hub: counting, Namespace: name, Clock: clock.RealClock{},
				Validity: agentcapacity.DefaultValidity, Resync: agentcapacity.DefaultResync, Debounce: agentcapacity.DefaultDebounce,
			},
		}
	}
	return a
}

// spokeCapacity makes the nodes and running pods of cluster i: 2-4 nodes
// (times factor) of 16 or 32 CPUs and 64 or 128 GiB, each with system pods
// and a random share already in use, so clusters differ in free capacity
// as real ones do.
func spokeCapacity(i, factor int) ([]*corev1.Node, []*corev1.Pod) {
	rng := rand.New(rand.NewPCG(uint64(i), 42))
	count := (2 + rng.IntN(3)) * factor
	cpus, mem := int64(16), int64(64)
	if rng.IntN(2) == 1 {
		cpus, mem = 32, 128
	}
	var nodes []*corev1.Node
	var pods []*corev1.Pod
	for n := range count {
		name := fmt.Sprintf("node-%d", n+1)
		nodes = append(nodes, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{agentcapacity.LabelKubeVirtSchedulable: "true"}},
			Status: corev1.NodeStatus{
				Allocatable: corev1.ResourceList{
					corev1.ResourceCPU:    *resource.NewMilliQuantity(cpus*1000-500, resource.DecimalSI),
					corev1.ResourceMemory: *resource.NewQuantity((mem-2)<<30, resource.BinarySI),
				},
				Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			},
		})
		busy := 0.1 + 0.5*rng.Float64()
		pods = append(pods, runningPod("kube-system", "workloads-"+name, name,
			*resource.NewMilliQuantity(int64(float64(cpus*1000)*busy), resource.DecimalSI),
			*resource.NewQuantity(int64(float64(mem<<30)*busy), resource.BinarySI)))
	}
	return nodes, pods
}

// nodeFactor multiplies every simulated cluster's nodes so that the burst
// never fills the fleet: the benchmark measures scheduling and delivery,
// and a FleetVM no cluster has room for rightly stays NotEnoughClusters and
// never converges. With 2-4 nodes, the prod clusters ran out of room for
// the 4-CPU shape at about 19 copies each (4,946 of 5,000 FleetVMs placed
// on 1,000 clusters); a burst of more than 15 copies per prod cluster
// gets twice the nodes, more than 30 three times, and so on.
func nodeFactor(cfg Config) int {
	prod := 0
	for i := range cfg.Clusters {
		if clusterLabels(i)["env"] == "prod" {
			prod++
		}
	}
	copies := float64(cfg.FleetVMs * cfg.ClustersPerVM)
	return max(1, int(math.Ceil(copies/float64(max(prod, 1))/15)))
}

func runningPod(namespace, name, node string, cpu, memory resource.Quantity) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{
			Name: "compute", Image: "registry.invalid/compute",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: memory}},
		}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// start publishes every cluster's score now and runs the queue.
func (a *agents) start(ctx context.Context, workers int) {
	for name := range a.byName {
		a.scores.Add(name)
	}
	for range workers {
		go func() {
			for {
				name, shutdown := a.scores.Get()
				if shutdown {
					return
				}
				a.syncScore(ctx, name)
				a.scores.Done(name)
			}
		}()
	}
	go func() {
		<-ctx.Done()
		a.scores.ShutDown()
	}()
}

func (a *agents) syncScore(ctx context.Context, name string) {
	ag := a.byName[name]
	res, err := ag.capacity.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: name, Name: fleetv1alpha1.CapacityScoreName}})
	if err != nil {
		if ctx.Err() == nil {
			a.scores.AddRateLimited(name)
		}
		return
	}
	a.scores.Forget(name)
	if res.RequeueAfter > 0 {
		a.scores.AddAfter(name, res.RequeueAfter)
	}
}

// shapesChanged is the agent's reaction to its shapes ConfigMap: a
// debounced recomputation.
func (a *agents) shapesChanged(cluster string) {
	if _, ok := a.byName[cluster]; ok {
		a.scores.AddAfter(cluster, agentcapacity.DefaultDebounce)
	}
}

// deliver is what happens on the cluster once Argo CD applied an
// Application: the VM starts (its virt-launcher pod takes capacity) and
// the agent reports it Running.
func (a *agents) deliver(ctx context.Context, app *argov1alpha1.Application) error {
	cluster := app.Labels[fleetv1alpha1.LabelCluster]
	ag := a.byName[cluster]
	if ag == nil {
		return fmt.Errorf("application %s names an unknown cluster %q", app.Name, cluster)
	}
	key := types.NamespacedName{Namespace: app.Labels[fleetv1alpha1.LabelFleetVMNamespace], Name: app.Labels[fleetv1alpha1.LabelFleetVMName]}
	vm, err := vmFromApplication(app, cluster)
	if err != nil {
		return err
	}
	ag.mu.Lock()
	defer ag.mu.Unlock()
	if _, ok := ag.vms[key]; ok {
		return nil
	}
	v := &vmOnCluster{vm: vm, ip: fmt.Sprintf("10.%d.%d.%d", 128+ag.index/256%64, ag.index%256, 2+len(ag.vms)%250)}
	if err := ag.startVM(ctx, v); err != nil {
		return err
	}
	ag.vms[key] = v
	a.countCopy(key, 1)
	a.scores.AddAfter(cluster, agentcapacity.DefaultDebounce)
	return a.writeReport(ctx, ag, key, v)
}

// undeliver is what Argo CD's deletion of an Application with its
// resources finalizer does on the cluster: the VM is deleted (its pod
// goes), and the agent deletes its report. It is counted.
func (a *agents) undeliver(ctx context.Context, app *argov1alpha1.Application) error {
	cluster := app.Labels[fleetv1alpha1.LabelCluster]
	ag := a.byName[cluster]
	if ag == nil {
		return fmt.Errorf("application %s names an unknown cluster %q", app.Name, cluster)
	}
	key := types.NamespacedName{Namespace: app.Labels[fleetv1alpha1.LabelFleetVMNamespace], Name: app.Labels[fleetv1alpha1.LabelFleetVMName]}
	ag.mu.Lock()
	defer ag.mu.Unlock()
	v := ag.vms[key]
	if v == nil {
		return nil
	}
	if v.running {
		if err := ag.stopVM(ctx, v); err != nil {
			return err
		}
	}
	if v.report != nil {
		a.reportWrites.Add(1)
		if err := client.IgnoreNotFound(a.h.gen.Delete(ctx, v.report)); err != nil {
			return fmt.Errorf("delete VMReport %s/%s: %w", v.report.Namespace, v.report.Name, err)
		}
	}
	delete(ag.vms, key)
	a.countCopy(key, -1)
	a.vmsDeleted.Add(1)
	a.scores.AddAfter(cluster, agentcapacity.DefaultDebounce)
	return nil
}

// setRunning flips a delivered VM: Running ↔ Stopped, and writes its
// report at once. It returns an error if the VM is not on the cluster.
func (a *agents) setRunning(ctx context.Context, cluster string, key types.NamespacedName, running bool) error {
	ag := a.byName[cluster]
	if ag == nil {
		return fmt.Errorf("unknown cluster %q", cluster)
	}
	ag.mu.Lock()
	defer ag.mu.Unlock()
	v := ag.vms[key]
	if v == nil {
		return fmt.Errorf("no VM of %s on %s", key, cluster)
	}
	if v.running == running {
		return nil
	}
	var err error
	if running {
		err = ag.startVM(ctx, v)
	} else {
		err = ag.stopVM(ctx, v)
	}
	if err != nil {
		return err
	}
	a.scores.AddAfter(cluster, agentcapacity.DefaultDebounce)
	return a.writeReport(ctx, ag, key, v)
}

// vmsByState lists the delivered VMs running (or not) as (cluster,
// FleetVM) pairs.
func (a *agents) vmsByState(running bool) []vmRef {
	var out []vmRef
	for _, ag := range a.byName {
		ag.mu.Lock()
		for key, v := range ag.vms {
			if v.running == running {
				out = append(out, vmRef{Cluster: ag.name, FleetVM: key})
			}
		}
		ag.mu.Unlock()
	}
	return out
}

// vmRef names one FleetVM's VM on one cluster.
type vmRef struct {
	Cluster string
	FleetVM types.NamespacedName
}

// startVM schedules the VM's virt-launcher pod on the node with the most
// free CPU where it fits (the first node when none fits: the cluster is
// overcommitted, as a burst placed before scores caught up can make it).
func (ag *agent) startVM(ctx context.Context, v *vmOnCluster) error {
	var nodes corev1.NodeList
	var pods corev1.PodList
	if err := ag.spoke.List(ctx, &nodes); err != nil {
		return err
	}
	if err := ag.spoke.List(ctx, &pods); err != nil {
		return err
	}
	cpu := vmtemplate.CPU(v.vm)
	memory, _ := vmtemplate.Memory(v.vm)
	free := agentcapacity.FreeByNode(nodes.Items, pods.Items)
	if len(free) == 0 {
		return fmt.Errorf("cluster %s has no schedulable node", ag.name)
	}
	best := free[0]
	for _, f := range free[1:] {
		if f.CPU.Cmp(best.CPU) > 0 {
			best = f
		}
	}
	v.node = best.Node
	v.pod = fmt.Sprintf("virt-launcher-%s-%d", v.vm.Name, rand.IntN(1<<20))
	if err := ag.spoke.Create(ctx, runningPod(v.vm.Namespace, v.pod, v.node, cpu, memory)); err != nil {
		return err
	}
	v.running = true
	v.vm.Spec.RunStrategy = ptr.To(kubevirtv1.RunStrategyAlways)
	v.vm.Status = kubevirtv1.VirtualMachineStatus{
		Created: true, Ready: true, PrintableStatus: kubevirtv1.VirtualMachineStatusRunning,
		ObservedGeneration: v.vm.Generation,
		Conditions: []kubevirtv1.VirtualMachineCondition{
			{Type: kubevirtv1.VirtualMachineReady, Status: corev1.ConditionTrue},
			{Type: kubevirtv1.VirtualMachineConditionType("LiveMigratable"), Status: corev1.ConditionFalse, Reason: "DisksNotLiveMigratable",
				Message: "cannot migrate VMI: PVC rootdisk is not shared, live migration requires that all PVCs must be shared"},
		},
	}
	return nil
}

// stopVM ends the VM's instance: its pod goes, the VM shows Stopped.
func (ag *agent) stopVM(ctx context.Context, v *vmOnCluster) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: v.vm.Namespace, Name: v.pod}}
	if err := client.IgnoreNotFound(ag.spoke.Delete(ctx, pod)); err != nil {
		return err
	}
	v.running = false
	v.vm.Generation++
	v.vm.Spec.RunStrategy = ptr.To(kubevirtv1.RunStrategyHalted)
	v.vm.Status = kubevirtv1.VirtualMachineStatus{
		PrintableStatus:    kubevirtv1.VirtualMachineStatusStopped,
		ObservedGeneration: v.vm.Generation,
		Conditions: []kubevirtv1.VirtualMachineCondition{
			{Type: kubevirtv1.VirtualMachineReady, Status: corev1.ConditionFalse, Reason: "VMINotExists", Message: "VMI does not exist"},
		},
	}
	return nil
}

// writeReport writes the VM's report as the agent does: create, or
// update when it changed. Called with ag.mu held.
func (a *agents) writeReport(ctx context.Context, ag *agent, key types.NamespacedName, v *vmOnCluster) error {
	var vmi *kubevirtv1.VirtualMachineInstance
	if v.running {
		vmi = &kubevirtv1.VirtualMachineInstance{Status: kubevirtv1.VirtualMachineInstanceStatus{
			NodeName:   v.node,
			Interfaces: []kubevirtv1.VirtualMachineInstanceNetworkInterface{{Name: "default", IP: v.ip, IPs: []string{v.ip}}},
		}}
	}
	ref := fleetv1alpha1.FleetVMReference{Namespace: key.Namespace, Name: key.Name}
	spec := vmstatus.Spec(ref, []fleetv1alpha1.VMState{vmstatus.State(v.vm, vmi, inventory.ImagesOf(v.vm, nil), nil)})
	c := a.h.gen
	if v.report == nil {
		r := &fleetv1alpha1.VMReport{
			ObjectMeta: metav1.ObjectMeta{Namespace: ag.name, Name: vmstatus.ReportName(ref), Labels: map[string]string{
				fleetv1alpha1.LabelFleetVMName: ref.Name, fleetv1alpha1.LabelFleetVMNamespace: ref.Namespace,
				fleetv1alpha1.LabelCluster: ag.name, fleetv1alpha1.LabelPartOf: fleetv1alpha1.PartOfValue,
			}},
			Spec: spec,
		}
		a.reportWrites.Add(1)
		if err := c.Create(ctx, r); err != nil {
			return fmt.Errorf("create VMReport %s/%s: %w", r.Namespace, r.Name, err)
		}
		v.report = r
		return nil
	}
	r := v.report.DeepCopy()
	r.Spec = spec
	a.reportWrites.Add(1)
	if err := c.Update(ctx, r); err != nil {
		return fmt.Errorf("update VMReport %s/%s: %w", r.Namespace, r.Name, err)
	}
	v.report = r
	return nil
}

// vmFromApplication is the VirtualMachine the fleetvm-vm chart applies:
// the VM in the Application's Helm values, with the cluster label the chart
// adds.
func vmFromApplication(app *argov1alpha1.Application, cluster string) (*kubevirtv1.VirtualMachine, error) {
	src := app.Spec.Source
	if src == nil || src.Helm == nil || src.Helm.ValuesObject == nil {
		return nil, fmt.Errorf("application %s carries no Helm values", app.Name)
	}
	var values struct {
		VM json.RawMessage `json:"vm"`
	}
	if err := json.Unmarshal(src.Helm.ValuesObject.Raw, &values); err != nil || len(values.VM) == 0 {
		return nil, fmt.Errorf("application %s: no vm in the Helm values (%v)", app.Name, err)
	}
	vm := &kubevirtv1.VirtualMachine{}
	if err := json.Unmarshal(values.VM, vm); err != nil {
		return nil, fmt.Errorf("application %s: decode the VM: %w", app.Name, err)
	}
	if vm.Labels == nil {
		vm.Labels = map[string]string{}
	}
	vm.Labels[fleetv1alpha1.LabelCluster] = cluster
	vm.Generation = 1
	vm.CreationTimestamp = metav1.NewTime(time.Now())
	return vm, nil
}
