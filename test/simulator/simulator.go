// Package simulator is the KubeVirt simulator: it stands in for
// virt-controller, virt-handler and CDI on spokes that have no kubelet (the
// test environment and the local fleet). It is used only by tests and the
// local fleet, never on a real cluster.
//
// For every VirtualMachine it walks the status a real KubeVirt would show:
// DataVolumes from the VM's dataVolumeTemplates are created and "imported"
// (ImportScheduled → ImportInProgress 0.0%…100.0% → Succeeded); a VM that
// should run goes Provisioning → Starting → Running with a
// VirtualMachineInstance and a virt-launcher pod holding the VM's CPU and
// memory requests on the first node with room (so free capacity really
// shrinks), or ErrorUnschedulable when no node has room; a VM that should
// not run goes Stopping → Stopped and loses its instance and pod.
//
// Like KubeVirt, it fills into every VM's spec what the VM definition
// leaves empty: firmware UUID and serial, machine type and architecture.
//
// It also stands in for CDI's DataVolume and DataSource controllers:
// DataVolumes no VM owns (such as those a ManifestWork creates) are
// imported the same way, each import that succeeds leaves a Bound
// PersistentVolumeClaim of the DataVolume's name, an import from a host
// ending in FailingHostSuffix fails, and every DataSource's Ready condition
// follows the DataVolume or claim its spec.source.pvc names.
//
// Storage binds as its StorageClass says (binding.go): on
// WaitForFirstConsumer storage a DataVolume waits, claim Pending and
// nothing imported, until its VM is asked to start or a pod mounts the
// claim, unless it carries CDI's immediate-binding annotation; a halted
// VM over such DataVolumes is Stopped, as KubeVirt shows it.
//
// For moving VMs between clusters it plays KubeVirt's VirtualMachineExport
// (export.go: Pending while the source is in use, then Ready with links
// and a token Secret), CDI imports from an export's volume URL (failed
// while no Ready export serves it), and KubeVirt 1.7's decentralized live
// migration (migration.go: a receiver instance for a VM with runStrategy
// WaitAsReceiver, both clusters' migrations walking their phases, the
// source halted and the target running at the end). A claim's
// DataAnnotation stands for its data, so that a test can check what a
// move carries: an import from an export gets the exported claim's, and a
// live migration that succeeds gives the target VM's claims the source's,
// as the block migration copies the disks (a failed one carries nothing).
// What one cluster cannot see of another goes through stand-ins the test
// fleet wires: Options.Exports and a shared SyncNetwork. Options.Faults
// are the test knobs for the failures of a move.
package simulator

import (
	"context"
	"encoding/binary"
	"hash/fnv"
	"net/netip"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Labels and names the simulator puts on what it creates, as KubeVirt does.
const (
	// LabelVMName names the VM of a virt-launcher pod.
	LabelVMName = kubevirtv1.DeprecatedVirtualMachineNameLabel
	// LauncherPrefix starts virt-launcher pod names.
	LauncherPrefix = "virt-launcher-"
	// PodNetwork is where instance IPs come from.
	PodNetwork = "10.128.0.0/14"
	// DefaultStepDelay is the delay between two status steps used by the local fleet.
	DefaultStepDelay = time.Second
)

// Simulator is the controller. Create it with New.
type Simulator struct {
	client    client.Client
	clock     clock.PassiveClock
	stepDelay time.Duration

	mu sync.Mutex
	// lastStep remembers when each object (VM or DataVolume, by UID) last
	// moved, so that every step waits stepDelay.
	lastStep map[types.UID]time.Time
	// assumed holds virt-launcher pods created but maybe not yet in the
	// cache, so that two VMs started back to back do not both take the
	// last room on a node (what kube-scheduler calls assuming a pod).
	assumed map[types.NamespacedName]assumedPod
	// statusSubresource tells, per resource, whether its CRD has a status
	// subresource (real KubeVirt and CDI CRDs do; some copies do not).
	statusSubresource map[string]bool

	exportProxyHost string
	exports         func(ctx context.Context, url string) (string, bool, error)
	syncAddress     string
	network         *SyncNetwork
	faults          Faults
}

type assumedPod struct {
	pod corev1.Pod
	at  time.Time
}

// Options configure a Simulator.
type Options struct {
	// Client reads (cached) and writes the spoke.
	Client client.Client
	// Clock times the steps; the real clock when nil.
	Clock clock.PassiveClock
	// StepDelay is how long each status step takes: 0 moves as fast as
	// the watches allow (tests), DefaultStepDelay looks lifelike.
	StepDelay time.Duration

	// ExportProxyHost is the host of this cluster's export proxy (KubeVirt's
	// virt-exportproxy behind an Ingress or Route), such as
	// "virt-exportproxy.spoke-a.invalid": Ready exports then carry
	// status.links.external through it. Without it, exports have internal
	// links only, as KubeVirt's on a cluster without that Ingress.
	ExportProxyHost string
	// Exports stands in for the network from this cluster's CDI to the
	// other clusters' export proxies, which the simulator cannot see: an
	// import whose http URL is an external export link of another host
	// asks it whether a Ready export serves that URL (and what: the
	// exported claim's DataAnnotation), and fails when not. The test fleet
	// wires it to the other spokes' ExportedData (Peers does); a URL that
	// none serves then reads as 404 Not Found, whatever its host. Nil:
	// other hosts do not resolve and such imports fail.
	Exports func(ctx context.Context, url string) (data string, served bool, err error)
	// SyncAddress is this cluster's synchronization controller address,
	// which KubeVirt reports in migrations' status.synchronizationAddresses
	// and which a source migration names in spec.sendTo.connectURL.
	SyncAddress string
	// SyncNetwork stands in for the network between the clusters'
	// synchronization controllers; share one across a test fleet's spokes.
	// Nil: a network of this simulator's own, which serves migrations
	// between namespaces of this cluster (with SyncAddress set, and named
	// in connectURL).
	SyncNetwork *SyncNetwork
	// Faults are the failures this simulator plays.
	Faults Faults
}

// Faults are test knobs: each makes the simulator play one failure a real
// cluster can have. A nil field plays none.
type Faults struct {
	// ExportFails tells whether the exporter pod of a VirtualMachineExport
	// fails: the export then stays Pending with Ready=False, reason
	// Unknown (KubeVirt's reason for an exporter pod neither pending nor
	// ready), and issues no links, so imports from it fail.
	ExportFails func(export types.NamespacedName) bool
	// ReceiverNeverReady tells whether a decentralized migration into this
	// VM never gets its receiver's virt-launcher pod, as when the target
	// cluster cannot place it: the target migration stays Pending, the
	// source one Scheduling, and the source VM keeps running.
	ReceiverNeverReady func(vm types.NamespacedName) bool
	// MigrationFailsHalfway tells whether the decentralized migration with
	// this migrationID fails once both sides run it: both migrations go
	// Failed, the source VM keeps running, and the target VM is left not
	// running, its receiver waiting again. Set it on the source cluster's
	// simulator (the source decides; the target follows).
	MigrationFailsHalfway func(migrationID string) bool
	// CrashLoops tells whether the guest of a VM crashes as it boots (a
	// broken image or cloud-init): its instance never runs, and the VM
	// shows printableStatus CrashLoopBackOff, not ready, as KubeVirt shows
	// a VM whose instances keep failing.
	CrashLoops func(vm *kubevirtv1.VirtualMachine) bool
}

// New returns a Simulator.
func New(opts Options) *Simulator {
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	network := opts.SyncNetwork
	if network == nil {
		network = NewSyncNetwork()
	}
	return &Simulator{
		client:            opts.Client,
		clock:             clk,
		stepDelay:         opts.StepDelay,
		lastStep:          map[types.UID]time.Time{},
		assumed:           map[types.NamespacedName]assumedPod{},
		statusSubresource: map[string]bool{},
		exportProxyHost:   opts.ExportProxyHost,
		exports:           opts.Exports,
		syncAddress:       opts.SyncAddress,
		network:           network,
		faults:            opts.Faults,
	}
}

// due tells whether the object may take its next step, or how long to wait.
func (s *Simulator) due(uid types.UID) (bool, time.Duration) {
	if s.stepDelay <= 0 {
		return true, 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	last, ok := s.lastStep[uid]
	if !ok {
		return true, 0
	}
	if wait := s.stepDelay - s.clock.Since(last); wait > 0 {
		return false, wait
	}
	return true, 0
}

// stepped records that the object just moved.
func (s *Simulator) stepped(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastStep[uid] = s.clock.Now()
}

func (s *Simulator) forget(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.lastStep, uid)
}

// RunStrategy is the VM's run strategy, honouring the legacy spec.running
// when runStrategy is unset (Halted when neither is set).
func RunStrategy(vm *kubevirtv1.VirtualMachine) kubevirtv1.VirtualMachineRunStrategy {
	if vm.Spec.RunStrategy != nil {
		return *vm.Spec.RunStrategy
	}
	if vm.Spec.Running != nil && *vm.Spec.Running {
		return kubevirtv1.RunStrategyAlways
	}
	return kubevirtv1.RunStrategyHalted
}

// ShouldRun tells whether the VM should have an instance: Always,
// RerunOnFailure and Once run, Halted stops, Manual keeps the instance it
// has (running when it has one).
func ShouldRun(vm *kubevirtv1.VirtualMachine, hasInstance bool) bool {
	switch RunStrategy(vm) {
	case kubevirtv1.RunStrategyAlways, kubevirtv1.RunStrategyRerunOnFailure, kubevirtv1.RunStrategyOnce:
		return true
	case kubevirtv1.RunStrategyManual:
		return hasInstance
	default:
		return false
	}
}

// InstanceIP derives the instance's IP address from the VM's UID: stable
// for the life of the VM, inside PodNetwork, never its network or
// broadcast address.
func InstanceIP(uid types.UID) string {
	prefix := netip.MustParsePrefix(PodNetwork)
	h := fnv.New32a()
	_, _ = h.Write([]byte(uid))
	size := uint32(1) << (32 - prefix.Bits())
	off := h.Sum32()%(size-2) + 1
	base := prefix.Addr().As4()
	v := binary.BigEndian.Uint32(base[:]) + off
	var out [4]byte
	binary.BigEndian.PutUint32(out[:], v)
	return netip.AddrFrom4(out).String()
}

// launcherSuffixAlphabet is the alphabet Kubernetes uses for generated names.
const launcherSuffixAlphabet = "bcdfghjklmnpqrstvwxz2456789"

// LauncherPodName is the virt-launcher pod's name for an instance:
// "virt-launcher-<vm>-xxxxx", the suffix derived from the instance's UID so
// that a retry never creates a second pod.
func LauncherPodName(vmName string, vmiUID types.UID) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(vmiUID))
	n := h.Sum64()
	suffix := make([]byte, 5)
	for i := range suffix {
		suffix[i] = launcherSuffixAlphabet[n%uint64(len(launcherSuffixAlphabet))]
		n /= uint64(len(launcherSuffixAlphabet))
	}
	const maxVMName = 253 - len(LauncherPrefix) - 6
	if len(vmName) > maxVMName {
		vmName = vmName[:maxVMName]
	}
	return LauncherPrefix + vmName + "-" + string(suffix)
}

// launcherPod builds the virt-launcher pod of an instance on a node.
func launcherPod(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, node string, requests corev1.ResourceList) *corev1.Pod {
	// Extended resources cannot be overcommitted: the API server wants a
	// limit equal to the request, as KubeVirt sets it.
	limits := corev1.ResourceList{}
	for name, q := range requests {
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
			limits[name] = q
		}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: vm.Namespace,
			Name:      LauncherPodName(vm.Name, vmi.UID),
			Labels: map[string]string{
				kubevirtv1.AppLabel:       "virt-launcher",
				kubevirtv1.CreatedByLabel: string(vmi.UID),
				LabelVMName:               vm.Name,
			},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vmi, kubevirtv1.VirtualMachineInstanceGroupVersionKind)},
		},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{
				Name:      "compute",
				Image:     "registry.invalid/kubevirt-simulator/virt-launcher",
				Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits},
			}},
		},
	}
}

// sortedByName sorts free capacities by node name (first fit, by name).
func sortedByName[T any](items []T, name func(T) string) []T {
	out := slices.Clone(items)
	slices.SortFunc(out, func(a, b T) int {
		switch {
		case name(a) < name(b):
			return -1
		case name(a) > name(b):
			return 1
		}
		return 0
	})
	return out
}

func nn(o client.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
}
