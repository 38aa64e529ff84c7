package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
)

// FleetVirtualMachineFinalizer holds a FleetVirtualMachine until
// fleetvm-hub has removed its VMs (deletionPolicy Delete) or detached them
// (Orphan) and deleted its hub objects. fleetvm-hub's mutating webhook
// adds it when the object is created; the controller adds it on its first
// reconcile to one created without it (webhook off or down, objects older
// than the webhook).
const FleetVirtualMachineFinalizer = "fleetvm.io/cleanup"

// RunStrategy is the fleet-wide power state of a FleetVirtualMachine. It is
// written into every copy of the VM and wins over the template or git.
// +kubebuilder:validation:Enum=Always;Halted;Manual;RerunOnFailure
type RunStrategy string

const (
	RunStrategyAlways         RunStrategy = "Always"
	RunStrategyHalted         RunStrategy = "Halted"
	RunStrategyManual         RunStrategy = "Manual"
	RunStrategyRerunOnFailure RunStrategy = "RerunOnFailure"
)

// DeletionPolicy says what happens to the VMs on the managed clusters when
// the FleetVirtualMachine is deleted.
// +kubebuilder:validation:Enum=Delete;Orphan
type DeletionPolicy string

const (
	// DeletionPolicyDelete removes the VMs from every cluster.
	DeletionPolicyDelete DeletionPolicy = "Delete"
	// DeletionPolicyOrphan removes the hub objects and leaves the VMs running.
	DeletionPolicyOrphan DeletionPolicy = "Orphan"
)

// Prioritizer chooses how the placement ranks the clusters that qualify.
// +kubebuilder:validation:Enum=FreeCapacity;Balance;Steady
type Prioritizer string

const (
	// PrioritizerFreeCapacity prefers clusters with the most free CPU and
	// memory, from the fleetvm-capacity AddOnPlacementScore: fleetvm-hub
	// ranks the clusters of the shared candidate Placement by it.
	PrioritizerFreeCapacity Prioritizer = "FreeCapacity"
	// PrioritizerBalance spreads VMs over the clusters that fit them:
	// fleetvm-hub picks from the shared candidate Placement the clusters
	// with the fewest FleetVirtualMachines first.
	PrioritizerBalance Prioritizer = "Balance"
	// PrioritizerSteady picks new clusters as Balance does; the clusters a
	// VM runs on are kept whatever the prioritizer.
	PrioritizerSteady Prioritizer = "Steady"
)

// SyncMode says whether Argo CD syncs the VMs by itself.
// +kubebuilder:validation:Enum=Automated;Manual
type SyncMode string

const (
	SyncModeAutomated SyncMode = "Automated"
	SyncModeManual    SyncMode = "Manual"
)

// FleetVirtualMachineSpec is the desired state of a FleetVirtualMachine.
// +kubebuilder:validation:XValidation:rule="has(self.template) != has(self.source)",message="exactly one of template or source must be set"
// +kubebuilder:validation:XValidation:rule="has(self.template) == has(oldSelf.template)",message="template and source cannot be swapped: create a new FleetVirtualMachine"
type FleetVirtualMachineSpec struct {
	// template is the KubeVirt VirtualMachine (apiVersion kubevirt.io/v1,
	// kind VirtualMachine, metadata, spec) delivered to every selected
	// cluster. It is decoded strictly into the kubevirt.io/api types at
	// admission. metadata.name defaults to the FleetVirtualMachine's name
	// and is immutable. The VM always lands in the FleetVirtualMachine's own
	// namespace: metadata.namespace may be left out or set to it, nothing
	// else.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:EmbeddedResource
	// +kubebuilder:validation:XValidation:rule="self.apiVersion == 'kubevirt.io/v1' && self.kind == 'VirtualMachine'",message="template must be a kubevirt.io/v1 VirtualMachine"
	// +kubebuilder:validation:XValidation:rule="(has(self.metadata) && has(self.metadata.name) ? self.metadata.name : '') == (has(oldSelf.metadata) && has(oldSelf.metadata.name) ? oldSelf.metadata.name : '')",message="template.metadata.name is immutable: renaming would strand the running VMs"
	Template *runtime.RawExtension `json:"template,omitempty"`

	// source delivers the VM from a git repository instead of an inline
	// template.
	// +optional
	// +kubebuilder:validation:XValidation:rule="(has(self.kustomize) && has(self.kustomize.namePrefix) ? self.kustomize.namePrefix : '') == (has(oldSelf.kustomize) && has(oldSelf.kustomize.namePrefix) ? oldSelf.kustomize.namePrefix : '')",message="kustomize.namePrefix is immutable: it renames the VMs, and Argo CD would prune the running ones on every cluster at once; create a new FleetVirtualMachine",fieldPath=".kustomize.namePrefix",reason=FieldValueForbidden
	// +kubebuilder:validation:XValidation:rule="has(self.helm) == has(oldSelf.helm)",message="helm cannot be added or removed: the path would be rendered by another tool under other names, and Argo CD would prune the running VMs on every cluster at once; create a new FleetVirtualMachine",fieldPath=".helm",reason=FieldValueForbidden
	Source *GitSource `json:"source,omitempty"`

	// placement selects the managed clusters the VM runs on. Omitted, the
	// VM runs on every cluster of the "default" cluster set that qualifies.
	// +optional
	Placement FleetPlacement `json:"placement,omitempty"`

	// runStrategy is the power state of every copy of the VM. It wins over
	// the template or git.
	// +optional
	// +kubebuilder:default=Always
	RunStrategy RunStrategy `json:"runStrategy,omitempty"`

	// diskImages are the FleetDiskImages, in this namespace, that the VM
	// boots from. The VM on a cluster starts only once they are Ready there.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=name
	DiskImages []DiskImageReference `json:"diskImages,omitempty"`

	// deletionPolicy says what happens to the VMs on the clusters when this
	// object is deleted: Delete removes them, Orphan leaves them running.
	// +optional
	// +kubebuilder:default=Delete
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// delivery tunes the Argo CD Applications that carry the VM.
	// +optional
	Delivery Delivery `json:"delivery,omitempty"`

	// rollout is how a change of the VM (template, diskImages, or a git
	// source's targetRevision and options) reaches its clusters: OCM's RolloutStrategy
	// (cluster.open-cluster-management.io/v1alpha1), with its field names
	// and meanings. Set, every change is a revision (a ControllerRevision
	// beside this object), each cluster is given the new revision in its
	// turn and succeeds once its VM runs it ready for minSuccessTime;
	// status.rollout says where the rollout stands. Omitted, a change
	// reaches every cluster at once and no revision is kept. A git
	// source's Helm chart must label its VMs fleetvm.io/revision from the
	// parameter fleetvm.revision. docs/user-guide/rollouts.md has the rules
	// where FleetVM differs from OCM's helper.
	// +optional
	Rollout *clusterv1alpha1.RolloutStrategy `json:"rollout,omitempty"`
}

// GitSource is a git repository path holding the VM manifests.
//
// What names the VMs on the clusters is immutable, as an inline
// template's VM name is: path, kustomize.namePrefix, and whether Helm or
// kustomize renders the path. Changing any would make every
// Application render other names at once, and Argo CD would prune the
// running VMs on every cluster together. repoURL and targetRevision may
// change: a new commit, tag or mirror is how a git source rolls out.
type GitSource struct {
	// repoURL is the git repository URL.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('https://') || self.startsWith('http://') || self.startsWith('ssh://') || self.startsWith('git@')",message="repoURL must be an http(s), ssh or git@ URL"
	RepoURL string `json:"repoURL"`

	// path is the directory in the repository. The placeholder
	// "{{environment}}" is replaced, per cluster, by the value of the
	// cluster's environment label, to pick a per-environment overlay such as
	// "vms/overlays/{{environment}}". A cluster whose label changes keeps
	// its overlay until the new value has held for the grace period.
	// Immutable: another path can name other VMs.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.contains('..')",message="path must be relative and must not contain '..'"
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="path is immutable: another path can name other VMs, and Argo CD would prune the running ones on every cluster at once; create a new FleetVirtualMachine",reason=FieldValueForbidden
	Path string `json:"path"`

	// targetRevision is the branch, tag or commit. Defaults to HEAD.
	// +optional
	// +kubebuilder:default=HEAD
	// +kubebuilder:validation:MaxLength=255
	TargetRevision string `json:"targetRevision,omitempty"`

	// kustomize options, passed to Argo CD.
	// +optional
	Kustomize *KustomizeOptions `json:"kustomize,omitempty"`

	// helm options, passed to Argo CD.
	// +optional
	Helm *HelmOptions `json:"helm,omitempty"`
}

// KustomizeOptions are the kustomize settings passed to Argo CD.
type KustomizeOptions struct {
	// namePrefix is prepended to the names of the resources. Immutable: it
	// renames the VMs.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	NamePrefix string `json:"namePrefix,omitempty"`

	// commonLabels are added to every resource.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	CommonLabels map[string]string `json:"commonLabels,omitempty"`
}

// HelmOptions are the Helm settings passed to Argo CD.
type HelmOptions struct {
	// valueFiles are values files in the repository, relative to path.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=1024
	ValueFiles []string `json:"valueFiles,omitempty"`

	// values are inline Helm values, as YAML.
	// +optional
	// +kubebuilder:validation:MaxLength=65536
	Values string `json:"values,omitempty"`
}

// FleetPlacement selects the managed clusters. It becomes an OCM Placement
// decided by the OCM scheduler.
type FleetPlacement struct {
	// clusterSets are the ManagedClusterSets to choose from. FleetVM binds
	// them to the Argo CD namespace. Empty means the "default" set.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +listType=set
	ClusterSets []string `json:"clusterSets,omitempty"`

	// environment is the value the cluster's environment label (a hub
	// setting, "env" by default) must have, such as "prod" or "dev".
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	Environment string `json:"environment,omitempty"`

	// clusterSelector further restricts the clusters by label.
	// +optional
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`

	// clusters is how many clusters run a copy of the VM. Unset means every
	// cluster that qualifies.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	Clusters *int32 `json:"clusters,omitempty"`

	// requiredNetworks are the Multus networks the VM attaches to, as
	// "namespace/name" of a NetworkAttachmentDefinition or "name" in the
	// FleetVirtualMachine's namespace. FleetVM places the VM only on
	// clusters with a node that has room for it and offers every one of
	// them (the NetworkAttachmentDefinition exists; its node resource, such
	// as a bridge's, is on that node). For an inline template FleetVM reads
	// them from spec.template.spec.networks and adds these; for a VM from
	// git (spec.source), which the hub cannot read, list them here.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=317
	// +kubebuilder:validation:items:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?/)?[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +listType=set
	RequiredNetworks []string `json:"requiredNetworks,omitempty"`

	// tolerations let the VM go to clusters with matching taints.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	Tolerations []clusterv1beta1.Toleration `json:"tolerations,omitempty"`

	// prioritizer ranks the clusters that qualify (fit is a predicate,
	// whatever the prioritizer). Balance (default) spreads VMs over them;
	// FreeCapacity prefers the most free CPU and memory, at the cost of a
	// scheduler run for every capacity score change; Steady keeps the
	// clusters chosen before.
	// +optional
	// +kubebuilder:default=Balance
	Prioritizer Prioritizer `json:"prioritizer,omitempty"`

	// decisionStrategy divides the clusters the VM runs on into decision
	// groups, as an OCM Placement's spec.decisionStrategy divides its
	// decision, with the same fields and rules: each of decisionGroups
	// takes the clusters its groupClusterSelector matches that no group
	// before it took, the rest make groups with no name, and a group
	// larger than clustersPerDecisionGroup is split in name order. A
	// rollout's mandatoryDecisionGroups and type ProgressivePerGroup read
	// these groups. Unset, every cluster is in one group (index 0).
	// +optional
	DecisionStrategy *clusterv1beta1.DecisionStrategy `json:"decisionStrategy,omitempty"`
}

// DiskImageReference names a FleetDiskImage in the same namespace.
type DiskImageReference struct {
	// name of the FleetDiskImage.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// Delivery tunes the Argo CD Applications that carry the VM.
type Delivery struct {
	// project is the Argo CD AppProject of the Applications. Empty (the
	// default) means the namespace's own project, fleetvm-<namespace>, which
	// FleetVM makes: it lets the Applications deploy only into this
	// namespace, only the kinds the hub operator allows, nothing
	// cluster-scoped. Another project must serve this namespace (list it in
	// its spec.sourceNamespaces, as Argo CD does for Applications outside its
	// own namespace).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Project string `json:"project,omitempty"`

	// syncMode is Automated (default): Argo CD applies changes by itself;
	// or Manual: someone syncs in Argo CD.
	// +optional
	// +kubebuilder:default=Automated
	SyncMode SyncMode `json:"syncMode,omitempty"`

	// prune lets an automated sync remove objects no longer in the source.
	// +optional
	// +kubebuilder:default=true
	Prune *bool `json:"prune,omitempty"`

	// selfHeal lets an automated sync undo changes made on the cluster.
	// +optional
	// +kubebuilder:default=true
	SelfHeal *bool `json:"selfHeal,omitempty"`

	// createNamespace creates the VM's namespace on each cluster if missing
	// (FleetVM does, through an OCM ManifestWork; removing the VMs leaves it).
	// +optional
	// +kubebuilder:default=true
	CreateNamespace *bool `json:"createNamespace,omitempty"`
}

// ClusterPhase is where the VM stands on one cluster.
// +kubebuilder:validation:Enum=Pending;WaitingForImage;Provisioning;Starting;Running;Stopping;Stopped;Failed;Leaving;Removing;Unknown
type ClusterPhase string

const (
	// ClusterPhasePending: decided, not yet on the cluster.
	ClusterPhasePending ClusterPhase = "Pending"
	// ClusterPhaseWaitingForImage: a disk image is not Ready there yet.
	ClusterPhaseWaitingForImage ClusterPhase = "WaitingForImage"
	ClusterPhaseProvisioning    ClusterPhase = "Provisioning"
	ClusterPhaseStarting        ClusterPhase = "Starting"
	ClusterPhaseRunning         ClusterPhase = "Running"
	ClusterPhaseStopping        ClusterPhase = "Stopping"
	ClusterPhaseStopped         ClusterPhase = "Stopped"
	ClusterPhaseFailed          ClusterPhase = "Failed"
	// ClusterPhaseLeaving: the FleetVirtualMachine no longer wants the VM
	// on this cluster (its spec, the cluster's labels or cluster-set
	// membership changed); the VM stays until the grace period ends.
	ClusterPhaseLeaving ClusterPhase = "Leaving"
	// ClusterPhaseRemoving: the grace period ended and the VM is being
	// removed; the entry stays until the cluster's agent no longer reports
	// the VM.
	ClusterPhaseRemoving ClusterPhase = "Removing"
	// ClusterPhaseUnknown: the cluster is unreachable or has not reported.
	ClusterPhaseUnknown ClusterPhase = "Unknown"
)

// ClusterStatus is the state of the VM on one managed cluster.
type ClusterStatus struct {
	// cluster is the ManagedCluster name.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster"`

	// environment is the environment the VM on this cluster is delivered
	// for (a git source's overlay): the cluster's environment label value
	// when it was placed, or a new value once it has held for the grace
	// period.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Environment string `json:"environment,omitempty"`

	// pendingEnvironment is the cluster's environment label value while it
	// differs from environment: the VM switches to it once it has held
	// for the grace period since pendingEnvironmentSince. Empty with
	// pendingEnvironmentSince set: the label was removed.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	PendingEnvironment string `json:"pendingEnvironment,omitempty"`

	// pendingEnvironmentSince is when the hub first saw the cluster's
	// environment label at pendingEnvironment.
	// +optional
	PendingEnvironmentSince *metav1.Time `json:"pendingEnvironmentSince,omitempty"`

	// phase summarizes the VM on this cluster.
	// +optional
	Phase ClusterPhase `json:"phase,omitempty"`

	// printableStatus is KubeVirt's printableStatus of the VM.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	PrintableStatus string `json:"printableStatus,omitempty"`

	// ready is KubeVirt's ready flag of the VM.
	// +optional
	Ready bool `json:"ready,omitempty"`

	// syncStatus is the Argo CD sync status of the cluster's Application.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	SyncStatus string `json:"syncStatus,omitempty"`

	// health is the Argo CD health status of the cluster's Application.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Health string `json:"health,omitempty"`

	// node the VM runs on.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node,omitempty"`

	// ipAddresses of the VM's interfaces.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=64
	// +listType=atomic
	IPAddresses []string `json:"ipAddresses,omitempty"`

	// consoleURL is the VM's page on the cluster's web console (OpenShift
	// Virtualization's VirtualMachine page), from the console URL the
	// cluster claims (its consoleurl.cluster.open-cluster-management.io
	// cluster claim); the VM's VNC console is this URL followed by
	// /console/standalone. Empty when the cluster claims no console. Like
	// the node and IPs, only the detailed entries carry it.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	ConsoleURL string `json:"consoleURL,omitempty"`

	// message explains the phase.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// lastTransitionTime is when the phase last changed.
	// +optional
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`

	// leavingSince is when the FleetVirtualMachine stopped wanting the VM
	// on this cluster. The VM is removed once the grace period has passed,
	// unless the cluster qualifies again before.
	// +optional
	LeavingSince *metav1.Time `json:"leavingSince,omitempty"`

	// removingSince is when FleetVM started removing the VM from this
	// cluster (Argo CD deletes it). The entry stays until the cluster's
	// agent no longer reports the VM.
	// +optional
	RemovingSince *metav1.Time `json:"removingSince,omitempty"`

	// rollout is the cluster's part of the rollout (spec.rollout set),
	// kept in every entry, compact or not, while the cluster has not
	// succeeded on status.rollout.revision: the record the rollout goes on
	// from after a restart of the hub. An entry without it runs
	// status.rollout.revision and succeeded (or spec.rollout is unset).
	// +optional
	Rollout *ClusterRollout `json:"rollout,omitempty"`
}

// ClusterRollout is where one cluster stands in a FleetVM's rollout.
type ClusterRollout struct {
	// revision is the revision the cluster is given.
	// +required
	// +kubebuilder:validation:Minimum=1
	Revision int64 `json:"revision"`

	// state: ToApply (waits its turn on revision, an earlier one),
	// Applying, Soaking, Failed, TimedOut, Reverting.
	// +required
	// +kubebuilder:validation:MaxLength=32
	State string `json:"state"`

	// since is when the cluster was given revision (not for ToApply).
	// +optional
	Since *metav1.Time `json:"since,omitempty"`

	// readySince is when the hub first saw the VM ready on revision: the
	// soak (minSuccessTime) counts from it.
	// +optional
	ReadySince *metav1.Time `json:"readySince,omitempty"`
}

// AnnotationRolloutPaused, set to "true" on a FleetVirtualMachine, pauses
// its rollout: no other cluster is given the latest revision until it is
// removed; those given it keep it (kubectl fleetvm rollout pause|resume).
const AnnotationRolloutPaused = "fleetvm.io/rollout-paused"

// AnnotationRolloutAbort, set to a revision's number, aborts the rollout
// of that revision while it is the latest: every cluster given it is given
// the previous revision again (kubectl fleetvm rollout abort).
const AnnotationRolloutAbort = "fleetvm.io/rollout-abort"

// RolloutPhase is where a FleetVM's rollout stands.
// +kubebuilder:validation:Enum=Progressing;Paused;Succeeded;Failed;RolledBack
type RolloutPhase string

// RolloutStatus is where the rollout of a FleetVM's latest revision
// stands.
type RolloutStatus struct {
	// revision is the latest revision: spec.template and spec.diskImages
	// as they are now.
	// +required
	// +kubebuilder:validation:Minimum=1
	Revision int64 `json:"revision"`

	// previousRevision is the revision it replaces; 0 for the first.
	// +optional
	PreviousRevision int64 `json:"previousRevision,omitempty"`

	// hash identifies revision's content, so that a change of the spec
	// is seen as a new revision.
	// +required
	// +kubebuilder:validation:MaxLength=64
	Hash string `json:"hash"`

	// phase: Progressing, Paused, Succeeded, Failed, RolledBack.
	// +optional
	Phase RolloutPhase `json:"phase,omitempty"`

	// updated is how many clusters run revision ready past its soak.
	// +optional
	Updated int32 `json:"updated,omitempty"`

	// failures is how many clusters failed or timed out on revision.
	// +optional
	Failures int32 `json:"failures,omitempty"`

	// message says what the rollout waits for.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// FleetSummary counts the clusters by state.
type FleetSummary struct {
	// desired is the number of clusters asked for (spec.placement.clusters),
	// or the number placed when unset.
	Desired int32 `json:"desired"`
	// placed is the number of clusters FleetVM keeps the VM on: those it
	// runs on and still qualify (reachable or not), and those just chosen
	// by the OCM scheduler. Leaving and removing clusters are not counted.
	Placed int32 `json:"placed"`
	// ready is the number of clusters where the VM is ready.
	Ready int32 `json:"ready"`
	// running is the number of clusters where the VM runs.
	Running int32 `json:"running"`
	// stopped is the number of clusters where the VM is stopped.
	Stopped int32 `json:"stopped"`
	// failed is the number of clusters where the VM failed.
	Failed int32 `json:"failed"`
	// unknown is the number of clusters whose state is unknown.
	Unknown int32 `json:"unknown"`
}

// PlacementStatus names the OCM Placement and its decision.
type PlacementStatus struct {
	// namespace of the Placement (the Argo CD namespace).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// name of the Placement.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name,omitempty"`
	// decidedClusters are where new copies may go: fleetvm-hub's pick
	// from the OCM scheduler's current decision of a shared candidate
	// Placement, or that decision itself on the FleetVirtualMachine's own
	// Placement. They show once OCM has marked the Placement scheduled. A cluster the VM already runs on stays
	// placed even when it drops out of it (full, unreachable).
	// The first 100 by name; decidedCount says how many there are, and
	// status.clusters lists every cluster the VM is placed on.
	// +optional
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=set
	DecidedClusters []string `json:"decidedClusters,omitempty"`
	// decidedCount is the number of clusters decided.
	// +optional
	// +kubebuilder:validation:Minimum=0
	DecidedCount int32 `json:"decidedCount,omitempty"`
	// excluded says why the clusters of the bound cluster sets that the VM
	// is not placed on were left out: how many per reason, naming the
	// first few. It is set while the FleetVirtualMachine asks for every
	// qualifying cluster (spec.placement.clusters unset) or has fewer
	// clusters than it asks for, and computed from what the OCM scheduler
	// sees (labels, taints, the agents' fleetvm-capacity scores) when the
	// hub last reconciled. `kubectl fleetvm explain` lists every cluster.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	Excluded []ExclusionCount `json:"excluded,omitempty"`
}

// ExclusionCount is how many clusters one reason keeps the VM off.
type ExclusionCount struct {
	// reason is the first reason that keeps the VM off these clusters:
	// Environment (the env label is another), Selector
	// (spec.placement.clusterSelector does not match), Taint (a NoSelect
	// taint not tolerated, as on an unavailable cluster),
	// AgentNotReporting (no fleetvm-capacity score), MissingNetwork
	// (a network the VM needs is on no node), NoRoom (no node has room for
	// the VM with its networks) or NotNeeded (the cluster qualifies;
	// enough were chosen).
	// +required
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason"`
	// count is the number of clusters.
	// +required
	// +kubebuilder:validation:Minimum=0
	Count int32 `json:"count"`
	// clusters are the first few of them, by name.
	// +optional
	// +kubebuilder:validation:MaxItems=3
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=atomic
	Clusters []string `json:"clusters,omitempty"`
	// detail says what is missing on the first of them (the network, the
	// VM's size, the taint), when it says more than the reason.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Detail string `json:"detail,omitempty"`
}

// DiskImageUsage is one disk image the VM uses. How many VMs use the image
// across the fleet is on its FleetDiskImage (status.totals.references and
// per cluster), or on each cluster's ImageInventory: a count that changes
// whenever any VM anywhere starts or stops would make every FleetVM that
// shows it rewrite its status each time.
type DiskImageUsage struct {
	// image identifies the image as the agents report it:
	// "datasource:<namespace>/<name>", "pvc:<namespace>/<name>",
	// "http:<url>", "registry:<url>", "s3:<url>" or "containerdisk:<image>".
	// +required
	// +kubebuilder:validation:MaxLength=2100
	Image string `json:"image"`
	// clusters is the number of this VM's clusters where the VM uses it.
	// +required
	Clusters int32 `json:"clusters"`
}

// FleetVirtualMachineStatus is the observed state of a FleetVirtualMachine.
type FleetVirtualMachineStatus struct {
	// observedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready, Placed, Delivered, Available, Degraded, Confined.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// placement is the Placement and its decision.
	// +optional
	Placement *PlacementStatus `json:"placement,omitempty"`

	// clusters has one entry per cluster the VM is on or going to, sorted
	// by name. It is FleetVM's record of where it placed the VM: written
	// before the VM is delivered to a new cluster or removed from one, and
	// never cut short. To stay small at any fleet size, only 50 entries
	// carry the cluster's details (printableStatus, Argo CD's sync and
	// health, node, IP addresses, message, lastTransitionTime): those that
	// need attention first (failed, unknown, leaving or removing, not yet
	// as runStrategy asks), then the others by name. Every other entry is
	// compact: cluster, environment, phase, ready, leavingSince and
	// removingSince. `kubectl fleetvm status` shows every cluster's details
	// from the agents' VMReports. The list is written whole by fleetvm-hub
	// (atomic), so the object's managedFields do not grow with it.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10000
	Clusters []ClusterStatus `json:"clusters,omitempty"`

	// summary counts the clusters by state.
	// +optional
	Summary FleetSummary `json:"summary,omitempty"`

	// diskImages are the disk images the VM uses on its clusters, sorted.
	// +optional
	// +listType=map
	// +listMapKey=image
	// +kubebuilder:validation:MaxItems=64
	DiskImages []DiskImageUsage `json:"diskImages,omitempty"`

	// deletionPolicy is the policy the deletion follows, recorded before
	// its first step and kept to the end: Delete, the VMs are being
	// removed; Orphan, they are being left running. Set only once the
	// FleetVirtualMachine is being deleted; spec.deletionPolicy can no
	// longer change then.
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// rollout is where the rollout of the latest revision stands (only
	// with spec.rollout).
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`
}

// FleetVirtualMachine is one KubeVirt VirtualMachine run on the managed
// clusters an OCM Placement selects, delivered by Argo CD, with the state of
// every copy reported back here.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="metadata.name must be at most 63 characters: it names the VM and labels it on every cluster"
// +kubebuilder:resource:shortName=fvm,categories=fleetvm
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.summary.desired`
// +kubebuilder:printcolumn:name="Placed",type=integer,JSONPath=`.status.summary.placed`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.summary.ready`
// +kubebuilder:printcolumn:name="Running",type=integer,JSONPath=`.status.summary.running`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type FleetVirtualMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired state.
	// +required
	Spec FleetVirtualMachineSpec `json:"spec"`

	// status is the observed state.
	// +optional
	Status FleetVirtualMachineStatus `json:"status,omitempty"`
}

// FleetVirtualMachineList is a list of FleetVirtualMachines.
//
// +kubebuilder:object:root=true
type FleetVirtualMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FleetVirtualMachine `json:"items"`
}
