// Package inventory counts, for every VM on a spoke (fleet-managed or
// not), the disk images it references, and publishes the counts to the hub
// as the cluster's ImageInventory.
package inventory

import (
	"slices"

	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// MaxUsers is how many users an ImageUse names.
const MaxUsers = 10

// LookupDataVolume finds a DataVolume on the spoke.
type LookupDataVolume func(namespace, name string) (*cdiv1beta1.DataVolume, bool)

// SourceImage is the image ID of a DataVolume spec, or "" when it imports
// nothing identifiable (blank, upload...). namespace is where a DataSource
// or PVC reference without namespace points.
func SourceImage(spec *cdiv1beta1.DataVolumeSpec, namespace string) string {
	if ref := spec.SourceRef; ref != nil && (ref.Kind == "" || ref.Kind == cdiv1beta1.DataVolumeDataSource) {
		ns := namespace
		if ref.Namespace != nil && *ref.Namespace != "" {
			ns = *ref.Namespace
		}
		return "datasource:" + ns + "/" + ref.Name
	}
	src := spec.Source
	switch {
	case src == nil:
		return ""
	case src.HTTP != nil:
		return "http:" + src.HTTP.URL
	case src.Registry != nil && src.Registry.URL != nil:
		return "registry:" + *src.Registry.URL
	case src.S3 != nil:
		return "s3:" + src.S3.URL
	case src.PVC != nil:
		ns := src.PVC.Namespace
		if ns == "" {
			ns = namespace
		}
		return "pvc:" + ns + "/" + src.PVC.Name
	}
	return ""
}

// ImagesOf returns the image IDs a VM references, sorted and without
// duplicates: its DataVolume templates' sources, its containerDisks, its
// PVCs, and the sources of DataVolumes it uses that are not its own
// templates (looked up on the spoke; "pvc:<ns>/<name>" when not found).
func ImagesOf(vm *kubevirtv1.VirtualMachine, lookup LookupDataVolume) []string {
	var out []string
	own := map[string]bool{}
	for i := range vm.Spec.DataVolumeTemplates {
		t := &vm.Spec.DataVolumeTemplates[i]
		own[t.Name] = true
		if id := SourceImage(&t.Spec, vm.Namespace); id != "" {
			out = append(out, id)
		}
	}
	if vm.Spec.Template != nil {
		for _, v := range vm.Spec.Template.Spec.Volumes {
			switch {
			case v.ContainerDisk != nil && v.ContainerDisk.Image != "":
				out = append(out, "containerdisk:"+v.ContainerDisk.Image)
			case v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName != "":
				out = append(out, "pvc:"+vm.Namespace+"/"+v.PersistentVolumeClaim.ClaimName)
			case v.DataVolume != nil && v.DataVolume.Name != "" && !own[v.DataVolume.Name]:
				out = append(out, dataVolumeImage(vm.Namespace, v.DataVolume.Name, lookup))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func dataVolumeImage(namespace, name string, lookup LookupDataVolume) string {
	if lookup != nil {
		if dv, ok := lookup(namespace, name); ok {
			if id := SourceImage(&dv.Spec, dv.Namespace); id != "" {
				return id
			}
		}
	}
	return "pvc:" + namespace + "/" + name
}

// Count builds the inventory of a spoke's VMs: every image with the
// number of VMs referencing it (a VM counts once per image) and up to
// MaxUsers of them, sorted by image.
func Count(vms []kubevirtv1.VirtualMachine, lookup LookupDataVolume) []fleetv1alpha1.ImageUse {
	users := map[string][]string{}
	for i := range vms {
		vm := &vms[i]
		for _, id := range ImagesOf(vm, lookup) {
			users[id] = append(users[id], vm.Namespace+"/"+vm.Name)
		}
	}
	out := make([]fleetv1alpha1.ImageUse, 0, len(users))
	for id, u := range users {
		slices.Sort(u)
		out = append(out, fleetv1alpha1.ImageUse{Image: id, References: int32(len(u)), Users: u[:min(len(u), MaxUsers)]})
	}
	slices.SortFunc(out, func(a, b fleetv1alpha1.ImageUse) int {
		switch {
		case a.Image < b.Image:
			return -1
		case a.Image > b.Image:
			return 1
		}
		return 0
	})
	return out
}
