package vmstatus

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

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
	held := agenttest.VM("apps", "held", agenttest.RunStrategy(kubevirtv1.RunStrategyHalted))
	held.Annotations = map[string]string{fleetv1alpha1.AnnotationHold: "0b9c6a1e-8a43-4c1f-9d1e-5f7f2b7c4d11.Copying"}
	tooLong := held.DeepCopy()
	tooLong.Annotations[fleetv1alpha1.AnnotationHold] = strings.Repeat("h", 129)
	revised := agenttest.VM("apps", "revised", agenttest.RunStrategy(kubevirtv1.RunStrategyHalted))
	revised.Labels = map[string]string{fleetv1alpha1.LabelRevision: "12"}
	badRevision := revised.DeepCopy()
	badRevision.Labels[fleetv1alpha1.LabelRevision] = "-3"

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
		"revision label reported": {
			vm:   revised,
			want: fleetv1alpha1.VMState{Namespace: "apps", Name: "revised", RunStrategy: "Halted", Revision: 12},
		},
		"revision that is no positive number is none": {
			vm:   badRevision,
			want: fleetv1alpha1.VMState{Namespace: "apps", Name: "revised", RunStrategy: "Halted"},
		},
		"hold annotation reported as seen": {
			vm:   held,
			want: fleetv1alpha1.VMState{Namespace: "apps", Name: "held", RunStrategy: "Halted", Hold: "0b9c6a1e-8a43-4c1f-9d1e-5f7f2b7c4d11.Copying"},
		},
		"hold longer than the API allows is none": {
			vm:   tooLong,
			want: fleetv1alpha1.VMState{Namespace: "apps", Name: "held", RunStrategy: "Halted"},
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

// TestDataVolumesOf: the state of a VM's template DataVolumes as CDI
// reports them; only Succeeded counts as imported, a Failed one wins over
// the rest, and a DataVolume that is not the VM's proves nothing.
func TestDataVolumesOf(t *testing.T) {
	vm := agenttest.VM("apps", "web",
		agenttest.DataVolumeTemplate("root", agenttest.HTTPSource("https://images.example/rhel9.qcow2")),
		agenttest.DataVolumeTemplate("data", cdiv1beta1.DataVolumeSpec{Source: &cdiv1beta1.DataVolumeSource{Blank: &cdiv1beta1.DataVolumeBlankImage{}}}),
		agenttest.DataVolume("shared", "golden"))
	vm.UID = "vm-uid"
	dv := func(name string, phase cdiv1beta1.DataVolumePhase, opts ...func(*cdiv1beta1.DataVolume)) *cdiv1beta1.DataVolume {
		d := &cdiv1beta1.DataVolume{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: name, OwnerReferences: []metav1.OwnerReference{
				*metav1.NewControllerRef(vm, kubevirtv1.VirtualMachineGroupVersionKind),
			}},
			Status: cdiv1beta1.DataVolumeStatus{Phase: phase},
		}
		for _, o := range opts {
			o(d)
		}
		return d
	}
	orphan := func(d *cdiv1beta1.DataVolume) { d.OwnerReferences = nil }
	otherVM := func(d *cdiv1beta1.DataVolume) { d.OwnerReferences[0].UID = "an-earlier-vm" }
	deleting := func(d *cdiv1beta1.DataVolume) { d.DeletionTimestamp = ptrTime(metav1.Now()) }

	cases := map[string]struct {
		vm   *kubevirtv1.VirtualMachine
		dvs  []*cdiv1beta1.DataVolume
		want fleetv1alpha1.DataVolumesState
	}{
		"no templates":              {vm: agenttest.VM("apps", "plain"), want: ""},
		"all succeeded":             {vm: vm, dvs: []*cdiv1beta1.DataVolume{dv("root", cdiv1beta1.Succeeded), dv("data", cdiv1beta1.Succeeded)}, want: fleetv1alpha1.DataVolumesReady},
		"one missing":               {vm: vm, dvs: []*cdiv1beta1.DataVolume{dv("root", cdiv1beta1.Succeeded)}, want: fleetv1alpha1.DataVolumesNotReady},
		"no phase yet":              {vm: vm, dvs: []*cdiv1beta1.DataVolume{dv("root", cdiv1beta1.Succeeded), dv("data", "")}, want: fleetv1alpha1.DataVolumesNotReady},
		"pending":                   {vm: vm, dvs: []*cdiv1beta1.DataVolume{dv("root", cdiv1beta1.Pending), dv("data", cdiv1beta1.Succeeded)}, want: fleetv1alpha1.DataVolumesNotReady},
		"waiting for its consumer":  {vm: vm, dvs: []*cdiv1beta1.DataVolume{dv("root", cdiv1beta1.WaitForFirstConsumer), dv("data", cdiv1beta1.WaitForFirstConsumer)}, want: fleetv1alpha1.DataVolumesNotReady},
		"import scheduled":          {vm: vm, dvs: []*cdiv1beta1.DataVolume{dv("root", cdiv1beta1.ImportScheduled), dv("data", cdiv1beta1.Succeeded)}, want: fleetv1alpha1.DataVolumesNotReady},
		"importing":                 {vm: vm, dvs: []*cdiv1beta1.DataVolume{dv("root", cdiv1beta1.ImportInProgress), dv("data", cdiv1beta1.Succeeded)}, want: fleetv1alpha1.DataVolumesNotReady},
		"failed wins":               {vm: vm, dvs: []*cdiv1beta1.DataVolume{dv("root", cdiv1beta1.ImportInProgress), dv("data", cdiv1beta1.Failed)}, want: fleetv1alpha1.DataVolumesFailed},
		"failed first":              {vm: vm, dvs: []*cdiv1beta1.DataVolume{dv("root", cdiv1beta1.Failed)}, want: fleetv1alpha1.DataVolumesFailed},
		"orphan succeeded is its":   {vm: vm, dvs: []*cdiv1beta1.DataVolume{dv("root", cdiv1beta1.Succeeded, orphan), dv("data", cdiv1beta1.Succeeded)}, want: fleetv1alpha1.DataVolumesReady},
		"another VM's is not its":   {vm: vm, dvs: []*cdiv1beta1.DataVolume{dv("root", cdiv1beta1.Succeeded, otherVM), dv("data", cdiv1beta1.Succeeded)}, want: fleetv1alpha1.DataVolumesNotReady},
		"being deleted is not data": {vm: vm, dvs: []*cdiv1beta1.DataVolume{dv("root", cdiv1beta1.Succeeded, deleting), dv("data", cdiv1beta1.Succeeded)}, want: fleetv1alpha1.DataVolumesNotReady},
		// Only templates count: a DataVolume volume that is not one of
		// them (a shared golden image) is not the VM's to import.
		"non-template volume ignored": {vm: vm, dvs: []*cdiv1beta1.DataVolume{dv("root", cdiv1beta1.Succeeded), dv("data", cdiv1beta1.Succeeded), dv("golden", cdiv1beta1.Failed, orphan)}, want: fleetv1alpha1.DataVolumesReady},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			byName := map[string]*cdiv1beta1.DataVolume{}
			for _, d := range tc.dvs {
				byName[d.Namespace+"/"+d.Name] = d
			}
			got := DataVolumesOf(tc.vm, func(ns, name string) (*cdiv1beta1.DataVolume, bool) {
				d, ok := byName[ns+"/"+name]
				return d, ok
			})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("DataVolumesOf (-want,+got):\n%s", diff)
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
