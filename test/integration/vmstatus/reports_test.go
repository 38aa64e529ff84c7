package vmstatus_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/agent"
	"github.com/fleetvm/fleetvm/test/agenttest"
	"github.com/fleetvm/fleetvm/test/fleetenv"
)

const wait = 30 * time.Second

// writeCounter counts the agent's writes of VMReports by name.
type writeCounter struct {
	mu     sync.Mutex
	writes map[string]int
}

func (w *writeCounter) count(wr agenttest.Write) {
	if _, ok := wr.Object.(*fleetv1alpha1.VMReport); !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes[wr.Object.GetName()]++
}

func (w *writeCounter) get(name string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes[name]
}

func (w *writeCounter) wrap(c client.Client) client.Client { return agenttest.CountWrites(c, w.count) }

// TestReports runs the agent (without the simulator: the test plays
// KubeVirt) against a hub and one spoke: a report appears, follows the
// VM, is not rewritten when nothing it shows changed, and disappears with
// the last VM.
func TestReports(t *testing.T) {
	ctx := t.Context()
	f, err := fleetenv.Start(ctx, fleetenv.Options{Spokes: []string{"east"}, NoPlacementController: true, Scheme: agenttest.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Stop(); err != nil {
			t.Error(err)
		}
	})
	east := f.Spoke("east")
	for _, c := range []*fleetenv.Cluster{f.Hub, east} {
		if err := c.EnsureNamespace(ctx, "east"); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []string{"team", "apps"} {
		if err := east.EnsureNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	counter := &writeCounter{writes: map[string]int{}}
	actx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- agent.Run(actx, agent.Options{
			ClusterName: "east", SpokeConfig: east.Config, HubConfig: f.Hub.Config,
			Logger: agenttest.Logger(), WrapHubClient: counter.wrap, CapacityDebounce: 200 * time.Millisecond,
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})

	report := func(name string) (*fleetv1alpha1.VMReport, error) {
		r := &fleetv1alpha1.VMReport{}
		return r, f.Hub.Client.Get(ctx, client.ObjectKey{Namespace: "east", Name: name}, r)
	}
	waitReport := func(name string, ok func(*fleetv1alpha1.VMReport) bool) *fleetv1alpha1.VMReport {
		t.Helper()
		var r *fleetv1alpha1.VMReport
		if err := fleetenv.Eventually(ctx, wait, func() (bool, error) {
			var err error
			r, err = report(name)
			if err != nil {
				return false, err
			}
			return ok(r), nil
		}); err != nil {
			t.Fatalf("VMReport %s: %v; last: %+v", name, err, r.Spec)
		}
		return r
	}

	// Another namespace's VM that claims FleetVM team/web by its labels
	// is not its VM: FleetVM delivers only into the FleetVM's namespace.
	impostor := agenttest.VM("apps", "impostor", agenttest.FleetVM("team", "web"))
	if err := east.Client.Create(ctx, impostor); err != nil {
		t.Fatal(err)
	}
	vm := agenttest.VM("team", "web-1", agenttest.FleetVM("team", "web"),
		agenttest.DataVolumeTemplate("web-1-root", agenttest.DataSourceRef("os-images", "rhel9")))
	if err := east.Client.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	vm.Status = kubevirtv1.VirtualMachineStatus{PrintableStatus: kubevirtv1.VirtualMachineStatusStopped}
	if err := east.Client.Update(ctx, vm); err != nil { // the test CRD has no status subresource
		t.Fatal(err)
	}
	r := waitReport("team.web", func(r *fleetv1alpha1.VMReport) bool {
		return len(r.Spec.VMs) == 1 && r.Spec.VMs[0].PrintableStatus == "Stopped"
	})
	wantLabels := map[string]string{
		fleetv1alpha1.LabelFleetVMName: "web", fleetv1alpha1.LabelFleetVMNamespace: "team",
		fleetv1alpha1.LabelCluster: "east", fleetv1alpha1.LabelPartOf: fleetv1alpha1.PartOfValue,
	}
	if diff := cmp.Diff(wantLabels, r.Labels); diff != "" {
		t.Errorf("report labels (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"datasource:os-images/rhel9"}, r.Spec.VMs[0].DiskImages); diff != "" {
		t.Errorf("disk images (-want,+got):\n%s", diff)
	}

	// The VM runs: node and IP come from its instance.
	vmi := &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web-1"},
		Spec:       *vm.Spec.Template.Spec.DeepCopy(),
	}
	if err := east.Client.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	vmi.Status = kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running, NodeName: "node-a",
		Interfaces: []kubevirtv1.VirtualMachineInstanceNetworkInterface{{IP: "10.128.3.4", IPs: []string{"10.128.3.4"}}}}
	if err := east.Client.Update(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	vm.Status = kubevirtv1.VirtualMachineStatus{PrintableStatus: kubevirtv1.VirtualMachineStatusRunning, Ready: true,
		Conditions: []kubevirtv1.VirtualMachineCondition{{Type: kubevirtv1.VirtualMachineReady, Status: "True"}}}
	if err := east.Client.Update(ctx, vm); err != nil {
		t.Fatal(err)
	}
	r = waitReport("team.web", func(r *fleetv1alpha1.VMReport) bool {
		return len(r.Spec.VMs) == 1 && r.Spec.VMs[0].Ready && r.Spec.VMs[0].Node == "node-a"
	})
	want := fleetv1alpha1.VMState{
		Namespace: "team", Name: "web-1", PrintableStatus: "Running", Ready: true, RunStrategy: "Always",
		Conditions: "Ready=True", Node: "node-a", IPAddresses: []string{"10.128.3.4"},
		Generation: vm.Generation, DiskImages: []string{"datasource:os-images/rhel9"},
		// No CDI here: the template's DataVolume never appears.
		DataVolumes: fleetv1alpha1.DataVolumesNotReady,
	}
	if diff := cmp.Diff(want, r.Spec.VMs[0]); diff != "" {
		t.Errorf("running VM state (-want,+got):\n%s", diff)
	}

	// Nothing the report shows changes: no write. A later change to another
	// FleetVM's VM is the marker that the agent has processed the first event
	// (one worker, events in order).
	before := counter.get("team.web")
	vm.Annotations = map[string]string{"example.com/touched": "yes"}
	if err := east.Client.Update(ctx, vm); err != nil {
		t.Fatal(err)
	}
	if err := east.Client.Create(ctx, agenttest.VM("team", "marker", agenttest.FleetVM("team", "marker"))); err != nil {
		t.Fatal(err)
	}
	waitReport("team.marker", func(*fleetv1alpha1.VMReport) bool { return true })
	if got := counter.get("team.web"); got != before {
		t.Errorf("writes of team.web after an irrelevant VM change: %d, want %d", got, before)
	}
	if before == 0 {
		t.Error("the write counter saw no writes: it counts nothing")
	}

	// The last VM goes: the report goes (the impostor is still there).
	if err := east.Client.Delete(ctx, vm); err != nil {
		t.Fatal(err)
	}
	if err := fleetenv.Eventually(ctx, wait, func() (bool, error) {
		_, err := report("team.web")
		return apierrors.IsNotFound(err), nil
	}); err != nil {
		t.Errorf("VMReport team.web not deleted with its last VM: %v", err)
	}
}
