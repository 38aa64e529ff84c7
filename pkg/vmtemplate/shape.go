package vmtemplate

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Memory is the memory the VM asks a node for: resources.requests.memory if
// set, else memory.guest.
func Memory(vm *kubevirtv1.VirtualMachine) (resource.Quantity, bool) {
	if vm.Spec.Template == nil {
		return resource.Quantity{}, false
	}
	d := &vm.Spec.Template.Spec.Domain
	if q, ok := d.Resources.Requests[corev1.ResourceMemory]; ok && !q.IsZero() {
		return q, true
	}
	if d.Memory != nil && d.Memory.Guest != nil && !d.Memory.Guest.IsZero() {
		return *d.Memory.Guest, true
	}
	if q, ok := d.Resources.Limits[corev1.ResourceMemory]; ok && !q.IsZero() {
		return q, true
	}
	return resource.Quantity{}, false
}

// CPU is the CPU the VM asks a node for: resources.requests.cpu if set,
// else its vCPUs (sockets × cores × threads, 1 when unset). FleetVM counts a
// vCPU as one CPU: a VM placed this way never relies on overcommit.
func CPU(vm *kubevirtv1.VirtualMachine) resource.Quantity {
	if vm.Spec.Template == nil {
		return *resource.NewQuantity(1, resource.DecimalSI)
	}
	d := &vm.Spec.Template.Spec.Domain
	if q, ok := d.Resources.Requests[corev1.ResourceCPU]; ok && !q.IsZero() {
		return q
	}
	vcpus := int64(1)
	if d.CPU != nil {
		vcpus = int64(max(d.CPU.Sockets, 1)) * int64(max(d.CPU.Cores, 1)) * int64(max(d.CPU.Threads, 1))
	}
	return *resource.NewQuantity(vcpus, resource.DecimalSI)
}

// Networks are the Multus networks the VM attaches to, as written
// ("name" or "namespace/name"); the pod network needs nothing.
func Networks(vm *kubevirtv1.VirtualMachine) []string {
	if vm.Spec.Template == nil {
		return nil
	}
	var out []string
	for _, n := range vm.Spec.Template.Spec.Networks {
		if n.Multus != nil && n.Multus.NetworkName != "" {
			out = append(out, n.Multus.NetworkName)
		}
	}
	return out
}
