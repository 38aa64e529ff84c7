// Package v1alpha1 contains the fleetvm.io/v1alpha1 API: FleetVirtualMachine,
// one KubeVirt VirtualMachine delivered to the OCM managed clusters a
// Placement picks, and FleetDiskImage, a golden disk image distributed to the
// clusters whose VMs boot from it.
//
// +kubebuilder:object:generate=true
// +groupName=fleetvm.io
package v1alpha1
