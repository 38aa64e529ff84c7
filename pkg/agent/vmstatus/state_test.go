package vmstatus

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/test/agenttest"
)

func TestState(t *testing.T) {
	running := agenttest.VM("apps", "web", agenttest.FleetVM("team", "web"))
	running.Generation = 3
	running.Status = kubevirtv1.VirtualMachineStatus{
		PrintableStatus: kubevirtv1.VirtualMachineStatusRunning, Ready: true, ObservedGeneration: 3,
		Conditions: []kubevirtv1.VirtualMachineCondition{
			{Type: kubevirtv1.VirtualMachineReady, Status: corev1.ConditionTrue},
			{Type: "DataVolumesReady", Status: corev1.ConditionFalse, Reason: "Importing", Message: strings.Repeat("x", 100)},
		},
	}
	vmi := &kubevirtv1.VirtualMachineInstance{Status: kubevirtv1.VirtualMachineInstanceStatus{
		NodeName: "node-1",
		Interfaces: []kubevirtv1.VirtualMachineInstanceNetworkInterface{
			{IP: "10.128.0.5", IPs: []string{"10.128.0.5", "fd00::5"}},
			{IPs: []string{"192.168.1.10"}},
			{},
		},
	}}
	deleting := vmi.DeepCopy()
	deleting.DeletionTimestamp = ptrTime(metav1.Now())
	legacy := agenttest.VM("apps", "old", agenttest.Running(false))

	cases := map[string]struct {
		vm     *kubevirtv1.VirtualMachine
		vmi    *kubevirtv1.VirtualMachineInstance
		images []string
		want   fleetv1alpha1.VMState
	}{
		"running with instance": {
			vm: running, vmi: vmi, images: []string{"datasource:os/rhel9"},
			want: fleetv1alpha1.VMState{
				Namespace: "apps", Name: "web", PrintableStatus: "Running", Ready: true, RunStrategy: "Always",
				Conditions: "Ready=True, DataVolumesReady=False (Importing: " + strings.Repeat("x", 77) + "...)",
				Node:       "node-1", IPAddresses: []string{"10.128.0.5", "fd00::5", "192.168.1.10"},
				Generation: 3, ObservedGeneration: 3, DiskImages: []string{"datasource:os/rhel9"},
			},
		},
		"instance being deleted shows no node": {
			vm: running, vmi: deleting,
			want: fleetv1alpha1.VMState{
				Namespace: "apps", Name: "web", PrintableStatus: "Running", Ready: true, RunStrategy: "Always",
				Conditions: "Ready=True, DataVolumesReady=False (Importing: " + strings.Repeat("x", 77) + "...)",
				Generation: 3, ObservedGeneration: 3,
			},
		},
		"legacy running=false, no instance": {
			vm:   legacy,
			want: fleetv1alpha1.VMState{Namespace: "apps", Name: "old", RunStrategy: "Halted"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, State(tc.vm, tc.vmi, tc.images, nil)); diff != "" {
				t.Errorf("State (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestSpecAndNames(t *testing.T) {
	ref, ok := FleetVMOf(map[string]string{fleetv1alpha1.LabelFleetVMNamespace: "team", fleetv1alpha1.LabelFleetVMName: "web"})
	if !ok || ReportName(ref) != "team.web" {
		t.Errorf("FleetVMOf = %+v %v, name %q; want team/web, team.web", ref, ok, ReportName(ref))
	}
	if _, ok := FleetVMOf(map[string]string{fleetv1alpha1.LabelFleetVMName: "web"}); ok {
		t.Error("FleetVMOf without namespace label = ok")
	}
	got := Spec(ref, []fleetv1alpha1.VMState{{Namespace: "b", Name: "a"}, {Namespace: "a", Name: "z"}, {Namespace: "a", Name: "b"}})
	want := fleetv1alpha1.VMReportSpec{FleetVM: ref, VMs: []fleetv1alpha1.VMState{{Namespace: "a", Name: "b"}, {Namespace: "a", Name: "z"}, {Namespace: "b", Name: "a"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Spec (-want,+got):\n%s", diff)
	}
}

func ptrTime(t metav1.Time) *metav1.Time { return &t }

// TestMissingNetworks: a Multus network without a namespace is the VM's
// namespace's; the pod network needs nothing; what the cluster has is not
// missing.
func TestMissingNetworks(t *testing.T) {
	vm := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "win10"},
		Spec: kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
			Spec: kubevirtv1.VirtualMachineInstanceSpec{Networks: []kubevirtv1.Network{
				{Name: "default", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}},
				{Name: "vlan", NetworkSource: kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: "default/vlan2003"}}},
				{Name: "storage", NetworkSource: kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: "storage"}}},
			}},
		}},
	}
	for name, tc := range map[string]struct {
		cluster map[string]bool
		want    []string
	}{
		"none there":          {nil, []string{"default/vlan2003", "team-a/storage"}},
		"all there":           {map[string]bool{"default/vlan2003": true, "team-a/storage": true}, nil},
		"another namespace's": {map[string]bool{"default/vlan2003": true, "default/storage": true}, []string{"team-a/storage"}},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, MissingNetworks(vm, tc.cluster)); diff != "" {
				t.Errorf("MissingNetworks (-want,+got):\n%s", diff)
			}
		})
	}
}
