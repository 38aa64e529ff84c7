package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels FleetVM puts on what it creates, on the hub and on the clusters.
const (
	// LabelFleetVMName names the FleetVirtualMachine a VM, an Argo CD
	// object or a report belongs to.
	LabelFleetVMName = "fleetvm.io/name"
	// LabelFleetVMNamespace is the FleetVirtualMachine's namespace.
	LabelFleetVMNamespace = "fleetvm.io/namespace"
	// LabelCluster names the managed cluster a VM runs on.
	LabelCluster = "fleetvm.io/cluster"
	// LabelPartOf marks every object FleetVM manages.
	LabelPartOf = "app.kubernetes.io/part-of"
	// PartOfValue is the value of LabelPartOf.
	PartOfValue = "fleetvm"
)

// Names of the per-cluster objects on the hub.
const (
	// CapacityScoreName is the AddOnPlacementScore the agent publishes.
	CapacityScoreName = "fleetvm-capacity"
	// ShapesConfigMapName is the ConfigMap, in each cluster namespace on
	// the hub, where the hub lists the VM shapes the fleet asks for.
	ShapesConfigMapName = "fleetvm-shapes"
	// ShapesConfigMapKey holds the shapes as JSON.
	ShapesConfigMapKey = "shapes.json"
	// ImageInventoryName is the name of a cluster's ImageInventory.
	ImageInventoryName = "images"
)

// FleetVMReference names a FleetVirtualMachine.
type FleetVMReference struct {
	// namespace of the FleetVirtualMachine.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// name of the FleetVirtualMachine.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
}

// VMState is what the agent saw of one VirtualMachine on its cluster.
type VMState struct {
	// namespace of the VirtualMachine on the cluster.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// name of the VirtualMachine.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// printableStatus is KubeVirt's status.printableStatus.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	PrintableStatus string `json:"printableStatus,omitempty"`
	// ready is KubeVirt's status.ready.
	// +optional
	Ready bool `json:"ready,omitempty"`
	// runStrategy the VM has on the cluster.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	RunStrategy string `json:"runStrategy,omitempty"`
	// conditions summarizes the VM's conditions, such as
	// "Ready=True, DataVolumesReady=False (importing)".
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Conditions string `json:"conditions,omitempty"`
	// node the VM's instance runs on.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node,omitempty"`
	// ipAddresses of the instance's interfaces.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=64
	// +listType=atomic
	IPAddresses []string `json:"ipAddresses,omitempty"`
	// missingNetworks are the Multus networks the VM attaches to
	// ("namespace/name") that the cluster does not have: no such
	// NetworkAttachmentDefinition. A running VM keeps running, but could
	// not start again here.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=317
	// +listType=atomic
	MissingNetworks []string `json:"missingNetworks,omitempty"`
	// generation is the VM's metadata.generation.
	// +optional
	Generation int64 `json:"generation,omitempty"`
	// observedGeneration is the VM's status.observedGeneration.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// diskImages the VM references, as image IDs (see ImageUse.image).
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=2100
	// +listType=atomic
	DiskImages []string `json:"diskImages,omitempty"`
	// hold is the value of the VM's AnnotationHold as the agent saw it
	// with the rest of this state: a move's proof that the state was
	// observed after the hold it asked for reached the cluster.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Hold string `json:"hold,omitempty"`
	// dataVolumes is the state of the DataVolumes of the VM's
	// spec.dataVolumeTemplates, as CDI reports them ("" when it has none).
	// +optional
	DataVolumes DataVolumesState `json:"dataVolumes,omitempty"`
	// revision is the value of the VM's LabelRevision: the FleetVM
	// revision it was delivered with (0 none).
	// +optional
	// +kubebuilder:validation:Minimum=0
	Revision int64 `json:"revision,omitempty"`
}

// LabelRevision on a VirtualMachine FleetVM delivers with spec.rollout
// set is the FleetVM revision its spec is (a decimal number); the agent
// reports it back (VMState.revision).
const LabelRevision = "fleetvm.io/revision"

// AnnotationHold on a VirtualMachine FleetVM delivers names the move hold
// the VM is delivered under ("<move UID>.<phase>"); the agent reports it
// back (VMState.hold), so that a report proves a state only once it was
// observed under that hold.
const AnnotationHold = "fleetvm.io/hold"

// DataVolumesState is what CDI says of a VM's DataVolumes.
// +kubebuilder:validation:Enum=Ready;NotReady;Failed
type DataVolumesState string

const (
	// DataVolumesReady: every DataVolume of the VM's templates has phase
	// Succeeded: its data is imported.
	DataVolumesReady DataVolumesState = "Ready"
	// DataVolumesNotReady: some DataVolume is missing or not Succeeded yet
	// (pending, waiting for its first consumer, importing).
	DataVolumesNotReady DataVolumesState = "NotReady"
	// DataVolumesFailed: some DataVolume has phase Failed.
	DataVolumesFailed DataVolumesState = "Failed"
)

// VMReportSpec is the state of a FleetVirtualMachine's VMs on one cluster.
type VMReportSpec struct {
	// fleetVM is the FleetVirtualMachine the VMs belong to, from their labels.
	// +required
	FleetVM FleetVMReference `json:"fleetVM"`
	// vms are the VMs labelled with that FleetVirtualMachine: one for an
	// inline template, possibly more for a git source.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	VMs []VMState `json:"vms,omitempty"`
}

// VMReport is written by the fleetvm agent of a managed cluster into that
// cluster's namespace on the hub: the state of one FleetVirtualMachine's VMs
// there. It is rewritten only when that state changes.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=fleetvm
// +kubebuilder:printcolumn:name="FleetVM",type=string,JSONPath=`.spec.fleetVM.name`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.spec.vms[0].printableStatus`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VMReport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the report.
	// +required
	Spec VMReportSpec `json:"spec"`
}

// VMReportList is a list of VMReports.
//
// +kubebuilder:object:root=true
type VMReportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VMReport `json:"items"`
}

// ImageUse is one disk image and the VMs on the cluster that reference it.
type ImageUse struct {
	// image identifies the image: "datasource:<namespace>/<name>",
	// "pvc:<namespace>/<name>", "http:<url>", "registry:<url>", "s3:<url>"
	// or "containerdisk:<image>".
	// +required
	// +kubebuilder:validation:MaxLength=2100
	Image string `json:"image"`
	// references is the number of VMs using the image, fleet-managed or not.
	// +required
	References int32 `json:"references"`
	// users names up to ten of those VMs, namespace/name, sorted.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=317
	// +listType=atomic
	Users []string `json:"users,omitempty"`
}

// ImageInventorySpec lists the disk images the VMs on a cluster use.
type ImageInventorySpec struct {
	// images, sorted by image.
	// +optional
	// +kubebuilder:validation:MaxItems=10000
	// +listType=map
	// +listMapKey=image
	Images []ImageUse `json:"images,omitempty"`
	// observedTime is when the agent last confirmed the inventory. It is
	// refreshed at least every few minutes even when nothing changed, so
	// the hub can tell a quiet cluster from a silent one and never prunes
	// an image on the word of a stale inventory.
	// +optional
	ObservedTime *metav1.Time `json:"observedTime,omitempty"`
}

// ImageInventory is written by the fleetvm agent of a managed cluster into
// that cluster's namespace on the hub, named "images": every disk image the
// cluster's VMs reference, counted over all VMs, fleet-managed or not.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=fleetvm
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ImageInventory struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the inventory.
	// +required
	Spec ImageInventorySpec `json:"spec"`
}

// ImageInventoryList is a list of ImageInventories.
//
// +kubebuilder:object:root=true
type ImageInventoryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ImageInventory `json:"items"`
}
