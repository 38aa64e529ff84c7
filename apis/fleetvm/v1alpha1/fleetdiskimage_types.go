package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FleetDiskImageSpec is the desired state of a FleetDiskImage.
type FleetDiskImageSpec struct {
	// source is where CDI imports the image from.
	// +required
	Source DiskImageSource `json:"source"`

	// storage is the size and class of the volume the image is imported to
	// on each cluster.
	// +required
	Storage DiskImageStorage `json:"storage"`

	// retention is how long the image may sit unused on a cluster before it
	// is pruned there. Defaults to 168h (one week).
	// +optional
	// +kubebuilder:default="168h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=duration
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="retention must not be negative"
	Retention *metav1.Duration `json:"retention,omitempty"`
}

// DiskImageSource is exactly one of http, registry or s3.
// +kubebuilder:validation:XValidation:rule="(has(self.http) ? 1 : 0) + (has(self.registry) ? 1 : 0) + (has(self.s3) ? 1 : 0) == 1",message="exactly one of http, registry or s3 must be set"
type DiskImageSource struct {
	// http imports the image from an http(s) URL.
	// +optional
	HTTP *HTTPSource `json:"http,omitempty"`

	// registry imports the image from a container registry.
	// +optional
	Registry *RegistrySource `json:"registry,omitempty"`

	// s3 imports the image from an S3 bucket.
	// +optional
	S3 *S3Source `json:"s3,omitempty"`
}

// HTTPSource is an image at an http(s) URL.
type HTTPSource struct {
	// url of the image.
	// +required
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') || self.startsWith('http://')",message="url must start with http:// or https://"
	URL string `json:"url"`

	// secretRef names a Secret with accessKeyId and secretKey for basic
	// auth. On each cluster it is the Secret "<namespace>.<secretRef>" in
	// the images namespace: a namespace's images use that namespace's
	// credentials only.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	SecretRef string `json:"secretRef,omitempty"`

	// certConfigMap names a ConfigMap with the CA bundle of the server; on
	// each cluster, "<namespace>.<certConfigMap>" in the images namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	CertConfigMap string `json:"certConfigMap,omitempty"`
}

// RegistrySource is an image in a container registry.
type RegistrySource struct {
	// url of the image, docker://registry/repo:tag.
	// +required
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('docker://') || self.startsWith('oci-archive://')",message="url must start with docker:// or oci-archive://"
	URL string `json:"url"`

	// secretRef names a pull Secret; on each cluster,
	// "<namespace>.<secretRef>" in the images namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	SecretRef string `json:"secretRef,omitempty"`
}

// S3Source is an image in an S3 bucket.
type S3Source struct {
	// url of the object, s3://bucket/key or https://endpoint/bucket/key.
	// +required
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('s3://') || self.startsWith('https://') || self.startsWith('http://')",message="url must start with s3://, http:// or https://"
	URL string `json:"url"`

	// secretRef names the Secret with accessKeyId and secretKey; on each
	// cluster, "<namespace>.<secretRef>" in the images namespace. Required.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretRef string `json:"secretRef"`
}

// DiskImageStorage is the volume an image is imported to.
type DiskImageStorage struct {
	// size of the volume, such as 30Gi.
	// +required
	// +kubebuilder:validation:XValidation:rule="quantity(self).isGreaterThan(quantity('0'))",message="size must be greater than zero"
	Size resource.Quantity `json:"size"`

	// storageClassName of the volume; the cluster default when unset.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	StorageClassName *string `json:"storageClassName,omitempty"`
}

// ImagePhase is the state of an image on one cluster.
// +kubebuilder:validation:Enum=Pending;Importing;Ready;Failed;Pruning
type ImagePhase string

const (
	ImagePhasePending   ImagePhase = "Pending"
	ImagePhaseImporting ImagePhase = "Importing"
	ImagePhaseReady     ImagePhase = "Ready"
	ImagePhaseFailed    ImagePhase = "Failed"
	ImagePhasePruning   ImagePhase = "Pruning"
)

// ImageClusterStatus is the state of an image on one managed cluster.
type ImageClusterStatus struct {
	// cluster is the ManagedCluster name.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster"`

	// phase of the image there.
	// +optional
	Phase ImagePhase `json:"phase,omitempty"`

	// progress of the import, such as "45.5%".
	// +optional
	// +kubebuilder:validation:MaxLength=16
	Progress string `json:"progress,omitempty"`

	// references is the number of VMs on the cluster that use the image,
	// fleet-managed or not.
	// +optional
	References int32 `json:"references,omitempty"`

	// users names some of those VMs, namespace/name.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=317
	// +listType=atomic
	Users []string `json:"users,omitempty"`

	// lastReferencedTime is when the image was first seen unused there after
	// its last use; unset while a VM uses it. Retention counts from it.
	// +optional
	LastReferencedTime *metav1.Time `json:"lastReferencedTime,omitempty"`

	// message explains the phase.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// DiskImageTotals sums the image over the fleet.
type DiskImageTotals struct {
	// clusters is the number of clusters the image is on.
	Clusters int32 `json:"clusters"`
	// ready is the number of clusters where it is Ready.
	Ready int32 `json:"ready"`
	// references is the number of VMs using it across the fleet.
	References int32 `json:"references"`
}

// FleetDiskImageStatus is the observed state of a FleetDiskImage.
type FleetDiskImageStatus struct {
	// observedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready, InUse.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// clusters has one entry per cluster the image is on or going to.
	// +optional
	// +listType=map
	// +listMapKey=cluster
	// +kubebuilder:validation:MaxItems=10000
	Clusters []ImageClusterStatus `json:"clusters,omitempty"`

	// totals sums the image over the fleet.
	// +optional
	Totals DiskImageTotals `json:"totals,omitempty"`
}

// FleetDiskImage is a golden disk image distributed, through CDI, to the
// managed clusters whose VMs boot from it, with reference counts per cluster.
// It is never deleted while a VM references it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=fdi,categories=fleetvm
// +kubebuilder:printcolumn:name="Clusters",type=integer,JSONPath=`.status.totals.clusters`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.totals.ready`
// +kubebuilder:printcolumn:name="References",type=integer,JSONPath=`.status.totals.references`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type FleetDiskImage struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state.
	// +required
	Spec FleetDiskImageSpec `json:"spec"`

	// status is the observed state.
	// +optional
	Status FleetDiskImageStatus `json:"status,omitempty"`
}

// FleetDiskImageList is a list of FleetDiskImages.
//
// +kubebuilder:object:root=true
type FleetDiskImageList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FleetDiskImage `json:"items"`
}
