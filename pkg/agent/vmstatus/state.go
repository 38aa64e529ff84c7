// Package vmstatus reports, for every FleetVirtualMachine with VMs on a
// spoke, the state of those VMs as one VMReport in the cluster namespace on
// the hub.
package vmstatus

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/agent/inventory"
	"github.com/fleetvm/fleetvm/pkg/capacity"
	"github.com/fleetvm/fleetvm/pkg/vmtemplate"
)

// Limits of the VMReport API.
const (
	maxVMs         = 64
	maxIPs         = 16
	maxImages      = 32
	maxConditions  = 1024
	maxMessageSize = 80
	maxNetworks    = 16
	maxHold        = 128
)

// FleetVMOf returns the FleetVirtualMachine a VM is labelled with.
func FleetVMOf(labels map[string]string) (fleetv1alpha1.FleetVMReference, bool) {
	ref := fleetv1alpha1.FleetVMReference{
		Namespace: labels[fleetv1alpha1.LabelFleetVMNamespace],
		Name:      labels[fleetv1alpha1.LabelFleetVMName],
	}
	return ref, ref.Namespace != "" && ref.Name != ""
}

// ReportName is the VMReport's name for a FleetVirtualMachine:
// "<namespace>.<name>" (a namespace has no dots, so it is unambiguous).
func ReportName(ref fleetv1alpha1.FleetVMReference) string {
	return ref.Namespace + "." + ref.Name
}

// MissingNetworks are the VM's Multus networks ("namespace/name") that are
// not among the cluster's networks (keys "namespace/name").
func MissingNetworks[V any](vm *kubevirtv1.VirtualMachine, networks map[string]V) []string {
	var out []string
	for _, n := range capacity.Networks(vm.Namespace, vmtemplate.Networks(vm)...) {
		if _, ok := networks[n]; !ok {
			out = append(out, n)
		}
	}
	return out
}

// State is what the report says of one VM and its instance (nil when it
// has none); images are its image IDs (inventory.ImagesOf), missing its
// networks the cluster lacks (MissingNetworks). The hold is the VM's
// AnnotationHold as read with the rest; its DataVolumes are left to
// DataVolumesOf, which needs the cluster's DataVolumes.
func State(vm *kubevirtv1.VirtualMachine, vmi *kubevirtv1.VirtualMachineInstance, images, missing []string) fleetv1alpha1.VMState {
	st := fleetv1alpha1.VMState{
		Namespace:          vm.Namespace,
		Name:               vm.Name,
		PrintableStatus:    string(vm.Status.PrintableStatus),
		Ready:              vm.Status.Ready,
		Conditions:         ConditionSummary(vm.Status.Conditions),
		Generation:         vm.Generation,
		ObservedGeneration: vm.Status.ObservedGeneration,
	}
	// A hold longer than the API allows is none FleetVM set: reporting it
	// cut short could not prove anything, and would make the report
	// invalid.
	if h := vm.Annotations[fleetv1alpha1.AnnotationHold]; len(h) <= maxHold {
		st.Hold = h
	}
	// A revision that is no positive number is none FleetVM delivered.
	if n, err := strconv.ParseInt(vm.Labels[fleetv1alpha1.LabelRevision], 10, 64); err == nil && n > 0 {
		st.Revision = n
	}
	if rs, err := vm.RunStrategy(); err == nil {
		st.RunStrategy = string(rs)
	}
	if len(images) > 0 {
		st.DiskImages = slices.Clone(images[:min(len(images), maxImages)])
	}
	if len(missing) > 0 {
		st.MissingNetworks = slices.Clone(missing[:min(len(missing), maxNetworks)])
	}
	if vmi != nil && vmi.DeletionTimestamp.IsZero() {
		st.Node = vmi.Status.NodeName
		st.IPAddresses = addresses(vmi)
	}
	return st
}

// DataVolumesOf is what CDI says of the DataVolumes of the VM's
// spec.dataVolumeTemplates: Failed when one has phase Failed; NotReady when
// one is missing, being deleted, not the VM's own (controlled by another
// object: KubeVirt adopts only orphans), or not Succeeded yet (Pending,
// WaitForFirstConsumer, ImportScheduled, ImportInProgress...); Ready when
// all are Succeeded; "" when the VM has no templates.
func DataVolumesOf(vm *kubevirtv1.VirtualMachine, lookup inventory.LookupDataVolume) fleetv1alpha1.DataVolumesState {
	if len(vm.Spec.DataVolumeTemplates) == 0 {
		return ""
	}
	out := fleetv1alpha1.DataVolumesReady
	for i := range vm.Spec.DataVolumeTemplates {
		dv, ok := lookup(vm.Namespace, vm.Spec.DataVolumeTemplates[i].Name)
		switch {
		case !ok || !dv.DeletionTimestamp.IsZero() || !ownDataVolume(vm, dv):
			out = fleetv1alpha1.DataVolumesNotReady
		case dv.Status.Phase == cdiv1beta1.Failed:
			return fleetv1alpha1.DataVolumesFailed
		case dv.Status.Phase != cdiv1beta1.Succeeded:
			out = fleetv1alpha1.DataVolumesNotReady
		}
	}
	return out
}

// ownDataVolume tells whether the DataVolume is the VM's: controlled by
// it, or by nothing (KubeVirt adopts an orphan of a template's name).
func ownDataVolume(vm *kubevirtv1.VirtualMachine, dv *cdiv1beta1.DataVolume) bool {
	ref := metav1.GetControllerOf(dv)
	return ref == nil || ref.UID == vm.UID
}

// addresses lists the instance's IP addresses in interface order, without
// duplicates.
func addresses(vmi *kubevirtv1.VirtualMachineInstance) []string {
	var out []string
	add := func(ip string) {
		if ip != "" && !slices.Contains(out, ip) && len(out) < maxIPs {
			out = append(out, ip)
		}
	}
	for _, i := range vmi.Status.Interfaces {
		add(i.IP)
		for _, ip := range i.IPs {
			add(ip)
		}
	}
	return out
}

// ConditionSummary renders conditions as "Ready=True, Paused=False
// (reason: message)", in the VM's order, within the API's length limit.
func ConditionSummary(conds []kubevirtv1.VirtualMachineCondition) string {
	parts := make([]string, 0, len(conds))
	for _, c := range conds {
		p := fmt.Sprintf("%s=%s", c.Type, c.Status)
		detail := c.Reason
		if c.Message != "" {
			msg := c.Message
			if len(msg) > maxMessageSize {
				msg = msg[:maxMessageSize-3] + "..."
			}
			detail = strings.TrimPrefix(detail+": "+msg, ": ")
		}
		if detail != "" {
			p += " (" + detail + ")"
		}
		parts = append(parts, p)
	}
	s := strings.Join(parts, ", ")
	if len(s) > maxConditions {
		s = s[:maxConditions-3] + "..."
	}
	return s
}

// Spec builds a report's spec from its VMs' states, sorted by namespace
// and name, within the API's limit.
func Spec(ref fleetv1alpha1.FleetVMReference, states []fleetv1alpha1.VMState) fleetv1alpha1.VMReportSpec {
	states = slices.Clone(states)
	slices.SortFunc(states, func(a, b fleetv1alpha1.VMState) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	if len(states) > maxVMs {
		states = states[:maxVMs]
	}
	return fleetv1alpha1.VMReportSpec{FleetVM: ref, VMs: states}
}
