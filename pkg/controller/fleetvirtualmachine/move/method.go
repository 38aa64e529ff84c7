package move

import (
	"encoding/json"
	"fmt"

	kubevirtv1 "kubevirt.io/api/core/v1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// MethodFor says how a FleetVirtualMachine's VM can move, or why it
// cannot.
//
//   - Restart when every disk is made anew from an image (a FleetDiskImage
//     of spec.diskImages, a container disk) or holds nothing to keep
//     (cloud-init, config maps, secrets, empty or ephemeral disks).
//   - Cold when its disks of its own are all DataVolumes of its
//     spec.dataVolumeTemplates: KubeVirt exports a stopped VM's volumes,
//     and the target's VM imports them into the same templates.
//   - Live only when asked (Step upgrades Cold to Live when both clusters
//     offer it): every disk of its own must be a DataVolume of its
//     templates, which the target makes blank for the migration to fill.
//   - None when a disk of its own is anything else (a PersistentVolumeClaim
//     or DataVolume the VM does not own, a host disk): the target could
//     not make it.
//
// A VM from git names its method, since the hub cannot read its disks
// (asked): only Restart.
func MethodFor(fvm *fleetv1alpha1.FleetVirtualMachine, asked fleetv1alpha1.MoveMethod) (fleetv1alpha1.MoveMethod, string) {
	if fvm.Spec.Template == nil {
		if asked == fleetv1alpha1.MoveMethodRestart {
			return fleetv1alpha1.MoveMethodRestart, ""
		}
		return "", "spec.method must be Restart for a VM from git: the hub cannot read its disks to choose"
	}
	var vm kubevirtv1.VirtualMachine
	if err := json.Unmarshal(fvm.Spec.Template.Raw, &vm); err != nil {
		return "", "spec.template does not decode: " + err.Error()
	}
	own := OwnData(&vm, fvm.Spec.DiskImages)
	if asked == fleetv1alpha1.MoveMethodLive {
		// The target receives every disk: each must be one it can make.
		if why := notCopyable(&vm); why != "" {
			return "", "the VM has a disk a live migration cannot fill on the target: " + why
		}
		return fleetv1alpha1.MoveMethodLive, ""
	}
	if own == "" {
		if asked == fleetv1alpha1.MoveMethodCold && len(vm.Spec.DataVolumeTemplates) > 0 {
			// Cold copies what its disks (images written since) hold now.
			return fleetv1alpha1.MoveMethodCold, ""
		}
		return fleetv1alpha1.MoveMethodRestart, ""
	}
	if why := notCopyable(&vm); why != "" {
		return "", "the VM keeps data of its own that no method can move: " + why
	}
	return fleetv1alpha1.MoveMethodCold, ""
}

// Resolve is the method a move asking for asked runs by, or why it
// cannot run: what the hub decides when the move starts.
func Resolve(fvm *fleetv1alpha1.FleetVirtualMachine, asked fleetv1alpha1.MoveMethod) (fleetv1alpha1.MoveMethod, string) {
	allowed, refused := MethodFor(fvm, asked)
	return chooseMethod(asked, allowed, refused)
}

// notCopyable names the first disk of its own a Cold move cannot copy
// ("": none): one that is not a DataVolume of spec.dataVolumeTemplates.
func notCopyable(vm *kubevirtv1.VirtualMachine) string {
	templates := map[string]bool{}
	for _, t := range vm.Spec.DataVolumeTemplates {
		templates[t.Name] = true
	}
	for _, v := range vm.Spec.Template.Spec.Volumes {
		s := v.VolumeSource
		switch {
		case s.DataVolume != nil && !templates[s.DataVolume.Name]:
			return fmt.Sprintf("volume %s: DataVolume %s is not one of spec.dataVolumeTemplates, so the target cannot make it", v.Name, s.DataVolume.Name)
		case s.PersistentVolumeClaim != nil:
			return fmt.Sprintf("volume %s: PersistentVolumeClaim %s is not made by the VM, so the target cannot make it", v.Name, s.PersistentVolumeClaim.ClaimName)
		case s.HostDisk != nil:
			return fmt.Sprintf("volume %s: host disk %s stays on its node", v.Name, s.HostDisk.Path)
		}
	}
	return ""
}

// OwnData names the first disk of the VM that holds data of its own ("":
// none).
func OwnData(vm *kubevirtv1.VirtualMachine, images []fleetv1alpha1.DiskImageReference) string {
	if vm.Spec.Template == nil {
		return ""
	}
	listed := map[string]bool{}
	for _, d := range images {
		listed[d.Name] = true
	}
	fromImage := map[string]bool{}
	for _, t := range vm.Spec.DataVolumeTemplates {
		ref := t.Spec.SourceRef
		if ref != nil && ref.Kind == "DataSource" && (ref.Namespace == nil || *ref.Namespace == "") && listed[ref.Name] {
			fromImage[t.Name] = true
		}
	}
	for _, v := range vm.Spec.Template.Spec.Volumes {
		s := v.VolumeSource
		switch {
		case s.DataVolume != nil && !fromImage[s.DataVolume.Name]:
			return fmt.Sprintf("volume %s: DataVolume %s, not from a FleetDiskImage of spec.diskImages", v.Name, s.DataVolume.Name)
		case s.PersistentVolumeClaim != nil:
			return fmt.Sprintf("volume %s: PersistentVolumeClaim %s", v.Name, s.PersistentVolumeClaim.ClaimName)
		case s.HostDisk != nil:
			return fmt.Sprintf("volume %s: host disk %s", v.Name, s.HostDisk.Path)
		}
	}
	return ""
}
