// Package utiltesting builds the objects tests create, in the style of
// Kubernetes' and kueue's wrappers: MakeFleetVM("team-a", "web").
// Clusters(2).VM(4, "16Gi").Obj(). Defaults are what most tests want; a
// test states only what it is about.
package utiltesting

import (
	"encoding/json"
	"fmt"
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// FleetVMWrapper builds a FleetVirtualMachine with an inline VM.
type FleetVMWrapper struct {
	fvm      fleetv1alpha1.FleetVirtualMachine
	vm       vmTemplate
	template *runtime.RawExtension
}

// vmTemplate is the inline KubeVirt VirtualMachine.
type vmTemplate struct {
	metadata      map[string]any
	cores         int
	memory        string
	running       bool
	containerDisk string
	// networks are Multus network names, attached by bridge next to the
	// pod network.
	networks []string
	spec     map[string]any
}

// MakeFleetVM is a FleetVirtualMachine ns/name for env=prod, RunStrategy
// Always, whose VM (labelled app=name, named like the FleetVirtualMachine)
// asks for 1 core and 1Gi, requested as well as given to the guest.
func MakeFleetVM(ns, name string) *FleetVMWrapper {
	return &FleetVMWrapper{
		fvm: fleetv1alpha1.FleetVirtualMachine{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: fleetv1alpha1.FleetVirtualMachineSpec{
				Placement:   fleetv1alpha1.FleetPlacement{Environment: "prod"},
				RunStrategy: fleetv1alpha1.RunStrategyAlways,
			},
		},
		vm: vmTemplate{metadata: map[string]any{"labels": map[string]any{"app": name}}, cores: 1, memory: "1Gi"},
	}
}

// Obj returns the FleetVirtualMachine.
func (w *FleetVMWrapper) Obj() *fleetv1alpha1.FleetVirtualMachine {
	out := w.fvm.DeepCopy()
	out.Spec.Template = w.template
	if out.Spec.Template == nil {
		out.Spec.Template = w.vm.raw()
	}
	return out
}

// Label sets a label of the FleetVirtualMachine.
func (w *FleetVMWrapper) Label(k, v string) *FleetVMWrapper {
	if w.fvm.Labels == nil {
		w.fvm.Labels = map[string]string{}
	}
	w.fvm.Labels[k] = v
	return w
}

// Annotation sets an annotation of the FleetVirtualMachine.
func (w *FleetVMWrapper) Annotation(k, v string) *FleetVMWrapper {
	if w.fvm.Annotations == nil {
		w.fvm.Annotations = map[string]string{}
	}
	w.fvm.Annotations[k] = v
	return w
}

// Env sets spec.placement.environment.
func (w *FleetVMWrapper) Env(env string) *FleetVMWrapper {
	w.fvm.Spec.Placement.Environment = env
	return w
}

// Clusters sets spec.placement.clusters; 0 leaves it unset (every cluster
// that qualifies).
func (w *FleetVMWrapper) Clusters(n int32) *FleetVMWrapper {
	w.fvm.Spec.Placement.Clusters = nil
	if n > 0 {
		w.fvm.Spec.Placement.Clusters = ptr.To(n)
	}
	return w
}

// ClusterSets sets spec.placement.clusterSets.
func (w *FleetVMWrapper) ClusterSets(sets ...string) *FleetVMWrapper {
	w.fvm.Spec.Placement.ClusterSets = sets
	return w
}

// RunStrategy sets spec.runStrategy.
func (w *FleetVMWrapper) RunStrategy(rs fleetv1alpha1.RunStrategy) *FleetVMWrapper {
	w.fvm.Spec.RunStrategy = rs
	return w
}

// DeletionPolicy sets spec.deletionPolicy.
func (w *FleetVMWrapper) DeletionPolicy(p fleetv1alpha1.DeletionPolicy) *FleetVMWrapper {
	w.fvm.Spec.DeletionPolicy = p
	return w
}

// DiskImages lists FleetDiskImages in spec.diskImages.
func (w *FleetVMWrapper) DiskImages(names ...string) *FleetVMWrapper {
	w.fvm.Spec.DiskImages = nil
	for _, n := range names {
		w.fvm.Spec.DiskImages = append(w.fvm.Spec.DiskImages, fleetv1alpha1.DiskImageReference{Name: n})
	}
	return w
}

// Delivery sets spec.delivery.
func (w *FleetVMWrapper) Delivery(d fleetv1alpha1.Delivery) *FleetVMWrapper {
	w.fvm.Spec.Delivery = d
	return w
}

// Project sets spec.delivery.project.
func (w *FleetVMWrapper) Project(p string) *FleetVMWrapper {
	w.fvm.Spec.Delivery.Project = p
	return w
}

// VM sets the cores and memory the VM asks for.
func (w *FleetVMWrapper) VM(cores int, memory string) *FleetVMWrapper {
	w.vm.cores, w.vm.memory = cores, memory
	return w
}

// VMName sets the template's metadata.name, the VM's name on clusters.
func (w *FleetVMWrapper) VMName(name string) *FleetVMWrapper {
	w.vm.metadata["name"] = name
	return w
}

// VMMetadata replaces the template's metadata (nil: none at all).
func (w *FleetVMWrapper) VMMetadata(md map[string]any) *FleetVMWrapper {
	w.vm.metadata = md
	return w
}

// VMRunning sets the template's spec.running, the field KubeVirt's older
// API uses instead of a run strategy.
func (w *FleetVMWrapper) VMRunning() *FleetVMWrapper {
	w.vm.running = true
	return w
}

// ContainerDisk boots the VM from a container disk image.
func (w *FleetVMWrapper) ContainerDisk(image string) *FleetVMWrapper {
	w.vm.containerDisk = image
	return w
}

// Network attaches the VM to a Multus network (a NetworkAttachmentDefinition,
// "name" or "namespace/name") by bridge, next to the pod network.
func (w *FleetVMWrapper) Network(networkName string) *FleetVMWrapper {
	w.vm.networks = append(w.vm.networks, networkName)
	return w
}

// VMSpec sets a field of the template's spec (next to "template"), e.g.
// dataVolumeTemplates.
func (w *FleetVMWrapper) VMSpec(field string, value any) *FleetVMWrapper {
	if w.vm.spec == nil {
		w.vm.spec = map[string]any{}
	}
	w.vm.spec[field] = value
	return w
}

// Rollout sets spec.rollout.
func (w *FleetVMWrapper) Rollout(r clusterv1alpha1.RolloutStrategy) *FleetVMWrapper {
	w.fvm.Spec.Rollout = &r
	return w
}

// Template replaces the inline VM with raw, as is.
func (w *FleetVMWrapper) Template(raw *runtime.RawExtension) *FleetVMWrapper {
	w.template = raw
	return w
}

func (t vmTemplate) raw() *runtime.RawExtension {
	domain := map[string]any{
		"cpu":       map[string]any{"cores": t.cores},
		"memory":    map[string]any{"guest": t.memory},
		"resources": map[string]any{"requests": map[string]any{"memory": t.memory}},
		"devices":   map[string]any{},
	}
	podSpec := map[string]any{"domain": domain}
	if t.containerDisk != "" {
		domain["devices"] = map[string]any{"disks": []any{map[string]any{"name": "root", "disk": map[string]any{"bus": "virtio"}}}}
		podSpec["volumes"] = []any{map[string]any{"name": "root", "containerDisk": map[string]any{"image": t.containerDisk}}}
	}
	if len(t.networks) > 0 {
		ifaces := []any{map[string]any{"name": "default", "masquerade": map[string]any{}}}
		nets := []any{map[string]any{"name": "default", "pod": map[string]any{}}}
		for i, n := range t.networks {
			name := fmt.Sprintf("net%d", i+1)
			ifaces = append(ifaces, map[string]any{"name": name, "bridge": map[string]any{}})
			nets = append(nets, map[string]any{"name": name, "multus": map[string]any{"networkName": n}})
		}
		domain["devices"].(map[string]any)["interfaces"] = ifaces
		podSpec["networks"] = nets
	}
	spec := map[string]any{"template": map[string]any{"spec": podSpec}}
	if t.running {
		spec["running"] = true
	}
	maps.Copy(spec, t.spec)
	vm := map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "spec": spec}
	if t.metadata != nil {
		vm["metadata"] = t.metadata
	}
	raw, err := json.Marshal(vm)
	if err != nil {
		panic(err) // maps of strings, numbers and booleans always encode
	}
	return &runtime.RawExtension{Raw: raw}
}
