package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A FleetVirtualMachineMove moves the copy of a FleetVirtualMachine's VM
// from one cluster to another, on purpose, as KubeVirt's
// VirtualMachineInstanceMigration moves a VM between nodes: one object
// per move, its phases in its status, kept once it ends.
//
// The move is make-before-break and never runs two servers: the VM is
// prepared on the target while the source still serves (Restart), or its
// disks are copied there once it stopped on the source (Cold); then it is
// started on the target, and the source's copy is removed only once the
// target's is ready. If anything fails or the timeout
// passes, the target's copy is stopped and removed and the source's
// started again; the status says why. Each step acts only on proof from
// the clusters: a state observed under the hold it proves, from an
// available cluster. A started move carries a finalizer: deleting it
// rolls it back, or finishes it past the point of no return, before the
// object goes. An ended move is deleted after ttlSecondsAfterFinished.

// MoveMethod is how the VM and its data reach the target cluster.
// +kubebuilder:validation:Enum=Auto;Restart;Cold;Live
type MoveMethod string

const (
	// MoveMethodAuto chooses the method from the VM: Restart when it keeps
	// no data of its own; when it does, Live when both clusters offer
	// decentralized live migration (LabelLiveMigration), else Cold. A VM
	// from git must name its method: the hub cannot read its disks.
	MoveMethodAuto MoveMethod = "Auto"
	// MoveMethodRestart starts the VM on the target from the same
	// definition and images (FleetDiskImages, container disks): for a VM
	// whose disks are made from images, not for one that keeps data of its
	// own, which it would lose.
	MoveMethodRestart MoveMethod = "Restart"
	// MoveMethodCold stops the VM on the source, exports its disks there
	// with KubeVirt's VirtualMachineExport, imports them on the target
	// with CDI and starts it there: for a VM whose disks of its own are
	// DataVolumes of its spec.dataVolumeTemplates. The VM is down from
	// its stop on the source until it is ready on the target.
	MoveMethodCold MoveMethod = "Cold"
	// MoveMethodLive migrates the running VM with KubeVirt 1.7's
	// decentralized live migration: the target waits as the receiver
	// (runStrategy WaitAsReceiver, blank disks of the same templates), a
	// migration on each cluster moves its memory and disks, and the source
	// stops only once the target runs. Both clusters must offer it
	// (LabelLiveMigration).
	MoveMethodLive MoveMethod = "Live"
)

// LabelLiveMigration on a ManagedCluster, "true", says the cluster offers
// KubeVirt's decentralized live migration: the DecentralizedLiveMigration
// feature gate is on and its synchronization controller is reachable from
// the other clusters. The operator who sets KubeVirt up sets it.
const LabelLiveMigration = "fleetvm.io/decentralized-live-migration"

// MovePhase is where a move stands.
// +kubebuilder:validation:Enum=Pending;Preparing;Switching;Copying;Migrating;Verifying;Completing;Succeeded;Aborting;RollingBack;Failed
type MovePhase string

const (
	// MovePending: not started: waiting for another move of the same VM,
	// or for the FleetVirtualMachine to be read. Pending counts against
	// the timeout too, from status.pendingTime: a move that cannot start
	// within it fails.
	MovePending MovePhase = "Pending"
	// MovePreparing: the VM is created stopped on the target (its disks
	// provisioned there), or (Live) as the receiver of the migration; the
	// source still serves.
	MovePreparing MovePhase = "Preparing"
	// MoveSwitching: the VM is being stopped on the source.
	MoveSwitching MovePhase = "Switching"
	// MoveCopying (Cold): the VM is stopped on the source, which exports
	// its disks; the target imports them into the VM, created stopped.
	MoveCopying MovePhase = "Copying"
	// MoveMigrating (Live): the VM migrates, running, from the source to
	// the target, which received it as WaitAsReceiver.
	MoveMigrating MovePhase = "Migrating"
	// MoveVerifying: the VM is started on the target, not ready yet.
	MoveVerifying MovePhase = "Verifying"
	// MoveCompleting: the VM is ready on the target; the source's copy is
	// being removed.
	MoveCompleting MovePhase = "Completing"
	// MoveSucceeded: the VM runs on the target only.
	MoveSucceeded MovePhase = "Succeeded"
	// MoveAborting (Live): the move failed; its migrations are deleted,
	// which aborts them, and nothing is released or removed until they
	// are gone. Then it rolls back, or goes on if the VM moved.
	MoveAborting MovePhase = "Aborting"
	// MoveRollingBack: the move failed; the target's copy is stopped and
	// removed, and the source's started again.
	MoveRollingBack MovePhase = "RollingBack"
	// MoveFailed: the move did not happen; the VM is where it was. The
	// message says why.
	MoveFailed MovePhase = "Failed"
)

// Terminal tells whether a move has ended.
func (p MovePhase) Terminal() bool { return p == MoveSucceeded || p == MoveFailed }

// LabelDrain on a FleetVirtualMachineMove names the cluster whose drain
// made it. Only the hub's drain controller may set it: admission refuses
// it from anyone else, and the drain counts only the moves it made.
const LabelDrain = "fleetvm.io/drain"

// MoveFinalizer holds a FleetVirtualMachineMove that has started until its
// protocol has reached a safe end: deleting a started move rolls it back
// (or, past the point of no return, finishes it) before the object goes.
const MoveFinalizer = "fleetvm.io/move"

// DefaultMoveTTLSecondsAfterFinished is spec.ttlSecondsAfterFinished's
// default: an ended move is kept a day for the record, then removed.
const DefaultMoveTTLSecondsAfterFinished = 86400

// DrainTaintKey is the ManagedCluster taint that drains a cluster: FleetVM
// moves every copy off it and places no new one on it. Its effect is
// NoSelectIfNew, so other Placements keep what they selected.
const DrainTaintKey = "fleetvm.io/drain"

// FleetVirtualMachineMoveSpec is what to move where. It is immutable.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a move's spec is immutable: delete it (a started move rolls back first) and create another"
// +kubebuilder:validation:XValidation:rule="!has(self.to) || self.to != self.from",message="to must differ from from"
type FleetVirtualMachineMoveSpec struct {
	// fleetVirtualMachine is the name of the FleetVirtualMachine, in this
	// namespace, whose copy moves.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	FleetVirtualMachine string `json:"fleetVirtualMachine"`

	// from is the managed cluster the copy leaves.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	From string `json:"from"`

	// to is the managed cluster the copy goes to. It must qualify by the
	// FleetVirtualMachine's placement (environment, cluster sets bound to
	// the namespace, a node the VM fits on with its networks), hold no
	// copy, and not be draining. Omitted, FleetVM picks one by the same
	// rules it places new copies with.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	To string `json:"to,omitempty"`

	// method is how the VM reaches the target. Auto (default) chooses.
	// +optional
	// +kubebuilder:default=Auto
	Method MoveMethod `json:"method,omitempty"`

	// timeout is how long the move may take from its start until the VM
	// is ready on the target; past it, the move rolls back. Default 15m.
	// +optional
	// +kubebuilder:default="15m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=duration
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="timeout must be positive"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// ttlSecondsAfterFinished is how long the move is kept once it ended
	// (Succeeded or Failed), as a Job's: then FleetVM deletes it. Default
	// 86400 (a day); 0 deletes it as soon as it ends.
	// +optional
	// +kubebuilder:default=86400
	// +kubebuilder:validation:Minimum=0
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// FleetVirtualMachineMoveStatus is where the move stands.
type FleetVirtualMachineMoveStatus struct {
	// phase is where the move stands.
	// +optional
	Phase MovePhase `json:"phase,omitempty"`

	// method is the method chosen.
	// +optional
	Method MoveMethod `json:"method,omitempty"`

	// to is the target cluster chosen.
	// +optional
	To string `json:"to,omitempty"`

	// message says what the move waits for, or why it failed.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// pendingTime is when the hub first found the move waiting to start
	// (Pending): from then, the wait counts against spec.timeout.
	// +optional
	PendingTime *metav1.Time `json:"pendingTime,omitempty"`

	// startTime is when the move left Pending.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// stoppedTime is when the VM was found stopped on the source (Live:
	// when the migration succeeded): the hand-over runs from it until the
	// VM is ready on the target.
	// +optional
	StoppedTime *metav1.Time `json:"stoppedTime,omitempty"`

	// copiedTime is when the target reported the VM's disks imported
	// (Cold).
	// +optional
	CopiedTime *metav1.Time `json:"copiedTime,omitempty"`

	// readyTime is when the VM was found ready on the target.
	// +optional
	ReadyTime *metav1.Time `json:"readyTime,omitempty"`

	// completionTime is when the move ended.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=fvmmove;fvmmoves,categories=fleetvm
// +kubebuilder:printcolumn:name="FleetVM",type=string,JSONPath=`.spec.fleetVirtualMachine`
// +kubebuilder:printcolumn:name="From",type=string,JSONPath=`.spec.from`
// +kubebuilder:printcolumn:name="To",type=string,JSONPath=`.status.to`
// +kubebuilder:printcolumn:name="Method",type=string,JSONPath=`.status.method`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// FleetVirtualMachineMove moves a FleetVirtualMachine's copy from one
// managed cluster to another, make-before-break.
type FleetVirtualMachineMove struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec FleetVirtualMachineMoveSpec `json:"spec"`

	// +optional
	Status FleetVirtualMachineMoveStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// FleetVirtualMachineMoveList is a list of FleetVirtualMachineMoves.
type FleetVirtualMachineMoveList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FleetVirtualMachineMove `json:"items"`
}
