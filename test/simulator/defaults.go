package simulator

import (
	"context"
	"crypto/sha256"
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// What KubeVirt fills into a VM's spec on an x86 cluster when the VM
// definition leaves it empty.
const (
	// DefaultMachineType is virt-api's default machine type.
	DefaultMachineType = "q35"
	// DefaultArchitecture is virt-api's default architecture.
	DefaultArchitecture = "amd64"
)

// fillSpec writes into the VM's spec what real KubeVirt writes there, so
// that whoever delivers the VM (Argo CD) meets the same live object as on
// a real cluster: virt-api's mutating webhook sets the firmware UUID and
// serial (KubeVirt 1.7 and later, both random), the machine type and the
// architecture when the VM is created, and virt-controller's firmware
// controller writes a UUID into any VM still without one. The simulator
// has no webhook, so it does it all the way virt-controller does: one patch
// right after the VM appears, refused if the VM changed since it was read.
// It tells whether it patched (the VM then comes back through the watch).
func (s *Simulator) fillSpec(ctx context.Context, vm *kubevirtv1.VirtualMachine) (bool, error) {
	if vm.Spec.Template == nil {
		return false, nil
	}
	filled := vm.DeepCopy()
	domain := &filled.Spec.Template.Spec.Domain
	if domain.Firmware == nil {
		domain.Firmware = &kubevirtv1.Firmware{}
	}
	uuid, serial := firmwareIDs(vm.UID)
	if domain.Firmware.UUID == "" {
		domain.Firmware.UUID = uuid
	}
	if domain.Firmware.Serial == "" {
		domain.Firmware.Serial = serial
	}
	if domain.Machine == nil {
		domain.Machine = &kubevirtv1.Machine{}
	}
	if domain.Machine.Type == "" {
		domain.Machine.Type = DefaultMachineType
	}
	if filled.Spec.Template.Spec.Architecture == "" {
		filled.Spec.Template.Spec.Architecture = DefaultArchitecture
	}
	if apiequality.Semantic.DeepEqual(vm.Spec, filled.Spec) {
		return false, nil
	}
	// A merge patch of exactly the fields filled in, refused if the VM
	// changed since it was read (as KubeVirt guards its patch with a test).
	patch := client.MergeFromWithOptions(vm, client.MergeFromWithOptimisticLock{})
	if err := s.client.Patch(ctx, filled, patch); err != nil {
		return false, fmt.Errorf("fill in the spec of VirtualMachine %s: %w", klog.KObj(vm), err)
	}
	return true, nil
}

// firmwareIDs are the firmware UUID and serial the simulator gives a VM:
// new for every VM (KubeVirt's are random), derived from its UID so a
// retried patch writes the same.
func firmwareIDs(uid types.UID) (types.UID, string) {
	asUUID := func(b []byte) string {
		return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
	}
	u := sha256.Sum256([]byte("firmware-uuid/" + uid))
	sn := sha256.Sum256([]byte("firmware-serial/" + uid))
	return types.UID(asUUID(u[:])), asUUID(sn[:])
}
