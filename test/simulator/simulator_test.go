package simulator_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fleetvm/fleetvm/test/agenttest"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/fleetrun"
	"github.com/fleetvm/fleetvm/test/simulator"
)

const wait = 30 * time.Second

var fleet *fleetenv.Fleet

// TestMain starts two spokes, each with a simulator; the two are joined
// by the stand-ins for the network between clusters (exports, migration
// sync).
func TestMain(m *testing.M) {
	os.Exit(fleetrun.Main(m, fleetrun.Suite{
		Fleet: fleetenv.Options{Spokes: []string{"spoke", "target"}, NoPlacementController: true, Scheme: agenttest.Scheme()},
		Setup: func(ctx context.Context, f *fleetenv.Fleet) (func() error, error) {
			fleet = f
			stopped, err := startSimulators(ctx, f)
			return stopped.Wait, err
		},
	}))
}

// runs counts, per name, the runs of the tests that use it (go test
// -count=N runs each test N times against the same API servers).
var runs = struct {
	sync.Mutex
	n map[string]int
}{n: map[string]int{}}

// fresh returns base on a test's first run and base-2, base-3, ... on the
// next ones, so that a test run again meets nothing of its last run: its
// namespaces, nodes and migration IDs are its own.
func fresh(base string) string {
	runs.Lock()
	defer runs.Unlock()
	runs.n[base]++
	if n := runs.n[base]; n > 1 {
		return fmt.Sprintf("%s-%d", base, n)
	}
	return base
}

// createNode creates a node for the test alone: it goes when the test
// ends, so that no later test's VM lands on it (nodes are cluster-wide,
// picked first fit by name).
func createNode(t *testing.T, c *fleetenv.Cluster, n fleetenv.Node) *corev1.Node {
	t.Helper()
	node, err := c.CreateNode(t.Context(), n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Client.Delete(context.Background(), node); client.IgnoreNotFound(err) != nil {
			t.Error(err)
		}
	})
	return node
}

// spoke returns the spoke with a namespace of the test's own (a test run
// again takes new names: see fresh). Nodes are cluster-wide: tests create
// them with createNode.
func spoke(t *testing.T, ns string) *fleetenv.Cluster {
	t.Helper()
	return cluster(t, "spoke", ns)
}

// cluster returns the named spoke ("spoke" or "target") with a namespace
// of the test's own.
func cluster(t *testing.T, name, ns string) *fleetenv.Cluster {
	t.Helper()
	s := fleet.Spoke(name)
	if err := s.EnsureNamespace(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return s
}

// proxyHost is the host of a spoke's export proxy, syncAddress the
// address of its synchronization controller: what the simulators' stand-ins
// for the network between the spokes route by.
func proxyHost(spoke string) string   { return simulator.ProxyHost(spoke) }
func syncAddress(spoke string) string { return simulator.SyncAddress(spoke) }

// Prefixes of the namespaces (and migration IDs) where the simulators play
// the failures of a move: an exporter that fails, a receiver that never
// gets a pod, a migration that fails once both sides run it.
const (
	nsExportFails        = "export-fails"
	nsReceiverNeverReady = "never-ready"
	idFailsHalfway       = "fails-halfway"
)

var faults = simulator.Faults{
	ExportFails:           func(ex types.NamespacedName) bool { return strings.HasPrefix(ex.Namespace, nsExportFails) },
	ReceiverNeverReady:    func(vm types.NamespacedName) bool { return strings.HasPrefix(vm.Namespace, nsReceiverNeverReady) },
	MigrationFailsHalfway: func(id string) bool { return strings.HasPrefix(id, idFailsHalfway) },
}

// startSimulators runs a simulator on each spoke for the whole package,
// wired together as a fleet: one SyncNetwork, and each one's Exports asking
// the others.
func startSimulators(ctx context.Context, f *fleetenv.Fleet) (fleetrun.Runners, error) {
	peers := simulator.NewPeers(faults)
	var managers []ctrl.Manager
	for _, spoke := range f.Spokes {
		// One simulator per spoke in one process: the controllers' names repeat.
		mgr, err := ctrl.NewManager(spoke.Config, ctrl.Options{Scheme: f.Scheme, Logger: agenttest.Logger(),
			Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
			Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
		if err != nil {
			return nil, err
		}
		sim := simulator.New(peers.Options(spoke.Name, simulator.Options{Client: mgr.GetClient()}))
		if err := sim.SetupWithManager(mgr); err != nil {
			return nil, err
		}
		peers.Add(spoke.Name, sim)
		managers = append(managers, mgr)
	}
	stopped := fleetrun.Runners{}
	for i, mgr := range managers {
		stopped.Go("simulator "+f.Spokes[i].Name, func() error { return mgr.Start(ctx) })
	}
	return stopped, nil
}

func get(ctx context.Context, c client.Client, ns, name string, obj client.Object) error {
	return c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj)
}

func vmStatus(ctx context.Context, c client.Client, ns, name string) (*kubevirtv1.VirtualMachine, error) {
	vm := &kubevirtv1.VirtualMachine{}
	return vm, get(ctx, c, ns, name, vm)
}

func waitPrintable(t *testing.T, c client.Client, ns, name string, want kubevirtv1.VirtualMachinePrintableStatus, ready bool) *kubevirtv1.VirtualMachine {
	t.Helper()
	var vm *kubevirtv1.VirtualMachine
	err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		var err error
		vm, err = vmStatus(t.Context(), c, ns, name)
		if err != nil {
			return false, err
		}
		return vm.Status.PrintableStatus == want && vm.Status.Ready == ready, nil
	})
	if err != nil {
		t.Fatalf("VM %s/%s: want %s ready=%v, have %s ready=%v: %v", ns, name, want, ready, vm.Status.PrintableStatus, vm.Status.Ready, err)
	}
	return vm
}

func launcherPods(t *testing.T, c client.Client, ns, vm string) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := c.List(t.Context(), &pods, client.InNamespace(ns), client.MatchingLabels{simulator.LabelVMName: vm}); err != nil {
		t.Fatal(err)
	}
	return pods.Items
}

func TestRunAndHalt(t *testing.T) {
	ctx := t.Context()
	ns := fresh("run-halt")
	s := spoke(t, ns)
	createNode(t, s, fleetenv.Node{Name: "n-" + ns, CPU: "8", Memory: "16Gi"})
	vm := agenttest.VM(ns, "web", agenttest.Resources("2", "4Gi"))
	if err := s.Client.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	got := waitPrintable(t, s.Client, ns, "web", kubevirtv1.VirtualMachineStatusRunning, true)
	if !got.Status.Created || got.Status.ObservedGeneration != got.Generation {
		t.Errorf("status created=%v observedGeneration=%d generation=%d, want created and observedGeneration = generation",
			got.Status.Created, got.Status.ObservedGeneration, got.Generation)
	}
	if !slicesContain(got.Finalizers, kubevirtv1.VirtualMachineControllerFinalizer) {
		t.Errorf("finalizers = %v, want %s", got.Finalizers, kubevirtv1.VirtualMachineControllerFinalizer)
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := get(ctx, s.Client, ns, "web", vmi); err != nil {
		t.Fatal(err)
	}
	ip := simulator.InstanceIP(got.UID)
	if vmi.Status.Phase != kubevirtv1.Running || vmi.Status.NodeName != "n-"+ns ||
		len(vmi.Status.Interfaces) != 1 || vmi.Status.Interfaces[0].IP != ip {
		t.Errorf("VMI status = phase %s node %s interfaces %+v, want Running on n-%s with %s", vmi.Status.Phase, vmi.Status.NodeName, vmi.Status.Interfaces, ns, ip)
	}
	pods := launcherPods(t, s.Client, ns, "web")
	if len(pods) != 1 {
		t.Fatalf("launcher pods = %d, want 1", len(pods))
	}
	p := pods[0]
	if !strings.HasPrefix(p.Name, "virt-launcher-web-") || len(p.Name) != len("virt-launcher-web-")+5 ||
		p.Spec.NodeName != "n-"+ns || p.Status.Phase != corev1.PodRunning ||
		p.Spec.Containers[0].Resources.Requests.Cpu().String() != "2" || p.Spec.Containers[0].Resources.Requests.Memory().String() != "4Gi" {
		t.Errorf("launcher pod %s on %s phase %s requests %v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Spec.Containers[0].Resources.Requests)
	}

	// Halted: Stopped, instance and pod gone.
	got.Spec.RunStrategy = ptr.To(kubevirtv1.RunStrategyHalted)
	if err := s.Client.Update(ctx, got); err != nil {
		t.Fatal(err)
	}
	got = waitPrintable(t, s.Client, ns, "web", kubevirtv1.VirtualMachineStatusStopped, false)
	if got.Status.Created {
		t.Error("stopped VM still created")
	}
	if err := get(ctx, s.Client, ns, "web", &kubevirtv1.VirtualMachineInstance{}); !apierrors.IsNotFound(err) {
		t.Errorf("VMI after stop: %v, want NotFound", err)
	}
	if err := fleetenv.Eventually(ctx, wait, func() (bool, error) { return len(launcherPods(t, s.Client, ns, "web")) == 0, nil }); err != nil {
		t.Errorf("launcher pod not deleted: %v", err)
	}

	// Deleted: the finalizer is removed, the VM goes away.
	if err := s.Client.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	if err := fleetenv.Eventually(ctx, wait, func() (bool, error) {
		_, err := vmStatus(ctx, s.Client, ns, "web")
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Errorf("VM not deleted: %v", err)
	}
}

func TestRunStrategies(t *testing.T) {
	ctx := t.Context()
	ns := fresh("strategies")
	s := spoke(t, ns)
	createNode(t, s, fleetenv.Node{Name: "n-" + ns, CPU: "64", Memory: "256Gi"})
	cases := map[string]struct {
		opt       agenttest.VMOption
		want      kubevirtv1.VirtualMachinePrintableStatus
		wantReady bool
	}{
		"rerun-on-failure": {agenttest.RunStrategy(kubevirtv1.RunStrategyRerunOnFailure), kubevirtv1.VirtualMachineStatusRunning, true},
		"legacy-running":   {agenttest.Running(true), kubevirtv1.VirtualMachineStatusRunning, true},
		"legacy-stopped":   {agenttest.Running(false), kubevirtv1.VirtualMachineStatusStopped, false},
		"manual":           {agenttest.RunStrategy(kubevirtv1.RunStrategyManual), kubevirtv1.VirtualMachineStatusStopped, false},
		"halted":           {agenttest.RunStrategy(kubevirtv1.RunStrategyHalted), kubevirtv1.VirtualMachineStatusStopped, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if err := s.Client.Create(ctx, agenttest.VM(ns, name, tc.opt)); err != nil {
				t.Fatal(err)
			}
			waitPrintable(t, s.Client, ns, name, tc.want, tc.wantReady)
		})
	}
}

// TestUnschedulableUntilRoom: a VM larger than any node's free capacity is
// ErrorUnschedulable, and starts once a node with room appears.
func TestUnschedulableUntilRoom(t *testing.T) {
	ctx := t.Context()
	ns := fresh("room")
	s := spoke(t, ns)
	vm := agenttest.VM(ns, "huge", agenttest.Resources("500", "1Ti"))
	if err := s.Client.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	waitPrintable(t, s.Client, ns, "huge", kubevirtv1.VirtualMachineStatusUnschedulable, false)
	if pods := launcherPods(t, s.Client, ns, "huge"); len(pods) != 0 {
		t.Errorf("unschedulable VM has %d launcher pods", len(pods))
	}
	createNode(t, s, fleetenv.Node{Name: "n-" + ns + "-cordoned", CPU: "1000", Memory: "4Ti", Unschedulable: true})
	createNode(t, s, fleetenv.Node{Name: "n-" + ns + "-huge", CPU: "1000", Memory: "4Ti"})
	waitPrintable(t, s.Client, ns, "huge", kubevirtv1.VirtualMachineStatusRunning, true)
	pods := launcherPods(t, s.Client, ns, "huge")
	if len(pods) != 1 || pods[0].Spec.NodeName != "n-"+ns+"-huge" {
		t.Errorf("launcher pods = %v, want one on n-%s-huge", podNodes(pods), ns)
	}
}

func podNodes(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name+"@"+p.Spec.NodeName)
	}
	return out
}

// TestDataVolumes: the VM waits in Provisioning until its DataVolumes are
// imported; one cloning a missing DataSource stays Pending until the
// DataSource exists and is Ready.
func TestDataVolumes(t *testing.T) {
	ctx := t.Context()
	ns, golden := fresh("disks"), fresh("golden")
	s := spoke(t, ns)
	createNode(t, s, fleetenv.Node{Name: "n-" + ns, CPU: "8", Memory: "16Gi"})
	vm := agenttest.VM(ns, "db",
		agenttest.DataVolumeTemplate("db-root", agenttest.HTTPSource("https://images.example/rhel9.qcow2")),
		agenttest.DataVolumeTemplate("db-data", agenttest.DataSourceRef(golden, "data")))
	if err := s.Client.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	dvPhase := func(name string) (cdiv1beta1.DataVolumePhase, cdiv1beta1.DataVolumeProgress, error) {
		dv := &cdiv1beta1.DataVolume{}
		err := get(ctx, s.Client, ns, name, dv)
		return dv.Status.Phase, dv.Status.Progress, err
	}
	if err := fleetenv.Eventually(ctx, wait, func() (bool, error) {
		p1, pr1, err := dvPhase("db-root")
		if err != nil {
			return false, err
		}
		p2, _, err := dvPhase("db-data")
		if err != nil {
			return false, err
		}
		return p1 == cdiv1beta1.Succeeded && pr1 == "100.0%" && p2 == cdiv1beta1.Pending, nil
	}); err != nil {
		t.Fatalf("DataVolumes: want db-root Succeeded 100.0%% and db-data Pending: %v", err)
	}
	got, err := vmStatus(ctx, s.Client, ns, "db")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(kubevirtv1.VirtualMachineStatusProvisioning, got.Status.PrintableStatus); diff != "" || got.Status.Ready {
		t.Errorf("VM waiting for disks: ready=%v printableStatus (-want,+got):\n%s", got.Status.Ready, diff)
	}
	if err := s.EnsureNamespace(ctx, golden); err != nil {
		t.Fatal(err)
	}
	if err := s.Client.Create(ctx, agenttest.ReadyDataSource(golden, "data")); err != nil {
		t.Fatal(err)
	}
	waitPrintable(t, s.Client, ns, "db", kubevirtv1.VirtualMachineStatusRunning, true)
	if p, _, err := dvPhase("db-data"); err != nil || p != cdiv1beta1.Succeeded {
		t.Errorf("db-data phase = %s (%v), want Succeeded", p, err)
	}

	// Deleting the VM deletes its DataVolumes (no garbage collector here).
	if err := s.Client.Delete(ctx, got); err != nil {
		t.Fatal(err)
	}
	if err := fleetenv.Eventually(ctx, wait, func() (bool, error) {
		_, _, err := dvPhase("db-root")
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Errorf("DataVolume db-root not deleted with its VM: %v", err)
	}
}

func slicesContain(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestNetworks: as KubeVirt does, a VM on a Multus network whose
// NetworkAttachmentDefinition is missing fails to start (the launcher pod
// cannot be rendered); once it exists, its pod asks for one of the node
// resource the NAD names, so the VM is unschedulable until a node offers
// it, and then runs there.
func TestNetworks(t *testing.T) {
	ctx := t.Context()
	ns := fresh("nets")
	s := spoke(t, ns)
	net := fresh("simtest")
	res := corev1.ResourceName("bridge.network.kubevirt.io/" + net)
	vm := agenttest.VM(ns, "bridged", agenttest.Resources("2", "2Gi"), agenttest.Multus("vlan", "default/"+net))
	if err := s.Client.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	err := fleetenv.Eventually(ctx, wait, func() (bool, error) {
		got, err := vmStatus(ctx, s.Client, ns, "bridged")
		if err != nil {
			return false, err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == kubevirtv1.VirtualMachineFailure && c.Reason == "FailedCreate" &&
				strings.Contains(c.Message, "failed to locate network attachment definition default/"+net) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no FailedCreate naming the missing network: %v", err)
	}
	if pods := launcherPods(t, s.Client, ns, "bridged"); len(pods) != 0 {
		t.Errorf("VM without its network has %d launcher pods", len(pods))
	}

	nad := &unstructured.Unstructured{}
	nad.SetAPIVersion("k8s.cni.cncf.io/v1")
	nad.SetKind("NetworkAttachmentDefinition")
	nad.SetNamespace("default")
	nad.SetName(net)
	nad.SetAnnotations(map[string]string{"k8s.v1.cni.cncf.io/resourceName": string(res)})
	if err := s.Client.Create(ctx, nad); err != nil {
		t.Fatal(err)
	}
	waitPrintable(t, s.Client, ns, "bridged", kubevirtv1.VirtualMachineStatusUnschedulable, false)

	createNode(t, s, fleetenv.Node{Name: "n-" + ns + "-bridge", CPU: "4", Memory: "8Gi",
		Extended: map[corev1.ResourceName]string{res: "10"}})
	waitPrintable(t, s.Client, ns, "bridged", kubevirtv1.VirtualMachineStatusRunning, true)
	pods := launcherPods(t, s.Client, ns, "bridged")
	if len(pods) != 1 || pods[0].Spec.NodeName != "n-"+ns+"-bridge" {
		t.Fatalf("launcher pods = %v, want one on n-%s-bridge", podNodes(pods), ns)
	}
	if q := pods[0].Spec.Containers[0].Resources.Requests[res]; q.Value() != 1 {
		t.Errorf("launcher pod asks for %s of %s, want 1", q.String(), res)
	}
}

// TestFillsSpecLikeKubeVirt: as KubeVirt does, every VM gets a firmware
// UUID and serial of its own, a machine type and an architecture written
// into its spec, and what the VM sets itself stays as it is.
func TestFillsSpecLikeKubeVirt(t *testing.T) {
	ctx := t.Context()
	ns := fresh("fill")
	s := spoke(t, ns)
	createNode(t, s, fleetenv.Node{Name: "n-" + ns, CPU: "8", Memory: "16Gi"})
	setsOwn := agenttest.VM(ns, "own", agenttest.RunStrategy(kubevirtv1.RunStrategyHalted))
	setsOwn.Spec.Template.Spec.Domain.Firmware = &kubevirtv1.Firmware{Serial: "S-1", Bootloader: &kubevirtv1.Bootloader{EFI: &kubevirtv1.EFI{}}}
	setsOwn.Spec.Template.Spec.Domain.Machine = &kubevirtv1.Machine{Type: "pc-q35-rhel9.6.0"}
	for _, vm := range []*kubevirtv1.VirtualMachine{
		agenttest.VM(ns, "a", agenttest.RunStrategy(kubevirtv1.RunStrategyHalted)),
		agenttest.VM(ns, "b", agenttest.RunStrategy(kubevirtv1.RunStrategyHalted)),
		setsOwn,
	} {
		if err := s.Client.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
	}
	filled := func(name string) *kubevirtv1.VirtualMachine {
		t.Helper()
		var vm *kubevirtv1.VirtualMachine
		err := fleetenv.Eventually(ctx, wait, func() (bool, error) {
			var err error
			if vm, err = vmStatus(ctx, s.Client, ns, name); err != nil {
				return false, err
			}
			fw := vm.Spec.Template.Spec.Domain.Firmware
			return fw != nil && fw.UUID != "" && fw.Serial != "", nil
		})
		if err != nil {
			t.Fatalf("VM fill/%s: no firmware UUID and serial: %v", name, err)
		}
		return vm
	}
	a, b, own := filled("a"), filled("b"), filled("own")

	for _, vm := range []*kubevirtv1.VirtualMachine{a, b} {
		d := vm.Spec.Template.Spec
		if d.Domain.Machine == nil || d.Domain.Machine.Type != simulator.DefaultMachineType || d.Architecture != simulator.DefaultArchitecture {
			t.Errorf("VM %s: machine %+v architecture %q, want %s and %s", vm.Name, d.Domain.Machine, d.Architecture, simulator.DefaultMachineType, simulator.DefaultArchitecture)
		}
	}
	fa, fb := a.Spec.Template.Spec.Domain.Firmware, b.Spec.Template.Spec.Domain.Firmware
	if fa.UUID == fb.UUID || fa.Serial == fb.Serial {
		t.Errorf("two VMs share firmware IDs: %+v and %+v", fa, fb)
	}
	fo := own.Spec.Template.Spec.Domain.Firmware
	if fo.Serial != "S-1" || fo.Bootloader == nil || fo.Bootloader.EFI == nil {
		t.Errorf("firmware the VM sets was changed: %+v", fo)
	}
	if m := own.Spec.Template.Spec.Domain.Machine; m == nil || m.Type != "pc-q35-rhel9.6.0" {
		t.Errorf("machine type the VM sets was changed: %+v", m)
	}
}
