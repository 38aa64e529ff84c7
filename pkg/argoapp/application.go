// Package argoapp is the hub's view of Argo CD's kinds, under Argo CD's
// own group, version and kinds (hub.Scheme registers them in place of
// Argo CD's types): of an Application the fields fleetvm-hub reads,
// decoded straight from the API server's JSON; of an ApplicationSet the
// fields FleetVM generates (ApplicationSet).
//
// fleetvm-hub does not link Argo CD's module. Argo CD's API package
// imports its git, Helm, OCI, RBAC and cloud clients: some 650 packages
// beyond the hub's own, whose code and package variables a process
// holds from its start. A program importing every package fleetvm-hub
// imports held 72 MiB of RSS after start with Argo CD's API package and
// 41 MiB without it (a binary of 110 MB against 75 MB, 2026-11-29).
// Tests compare these types with Argo CD's (argoapptest, the delivery
// package's tests).
//
// The hub holds three or more Applications per FleetVirtualMachine in its
// cache. Argo CD's Application type is 992 bytes of struct before any of
// its content, however much of it is emptied; this one is 344 (408 with
// the labels it holds), and its JSON decoding allocates nothing for the
// spec and status fields the hub never reads (the sources with the VM
// template, the resources, history and summary Argo CD writes). On the
// benchmark's fleet of 10,000 FleetVirtualMachines the hub's live heap
// went from 215 to 191 MiB. A cached copy holds the labels FleetVM sets
// without a label map (Trim): 0.97 to 0.72 KiB per cached Application on
// the benchmark's fleet of 1,000 (hack/cachesize).
//
// The hub writes Applications only as merge patches of what it changed
// (write.Mutate and the finalizer helpers) and by deleting them, never as
// updates: what this type leaves out is never written back.
//
// +kubebuilder:object:generate=true
package argoapp

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// Application is what the hub reads of an Argo CD Application: its
// metadata, its project, Argo CD's sync and health status, its conditions,
// and the phase and messages of its current or last sync.
//
// +kubebuilder:object:root=true
type Application struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   Spec   `json:"spec"`
	Status Status `json:"status,omitempty"`

	// held is what a cached copy keeps of its labels in place of the
	// label map (Trim): the ones FleetVM sets.
	held heldLabels `json:"-"`
}

// heldLabels are the values of the labels FleetVM sets on the
// Applications it generates (HeldLabels), kept without a map: a map of
// four labels is some 340 bytes, a third of a cached Application, and
// the hub holds one Application per copy of every FleetVM. They are
// never written back: a merge patch computed from a cached copy carries
// no labels unless the caller sets some (SetLabels).
type heldLabels struct {
	name, namespace, cluster, partOf string
}

// HeldLabels are the labels a cached Application keeps (Trim): the
// FleetVirtualMachine it belongs to, the cluster it delivers to, and
// FleetVM's mark. The hub reads no other label of an Application.
var HeldLabels = []string{fleetv1alpha1.LabelFleetVMName, fleetv1alpha1.LabelFleetVMNamespace, fleetv1alpha1.LabelCluster, fleetv1alpha1.LabelPartOf}

func (h *heldLabels) field(key string) *string {
	switch key {
	case fleetv1alpha1.LabelFleetVMName:
		return &h.name
	case fleetv1alpha1.LabelFleetVMNamespace:
		return &h.namespace
	case fleetv1alpha1.LabelCluster:
		return &h.cluster
	case fleetv1alpha1.LabelPartOf:
		return &h.partOf
	}
	return nil
}

// Label is the value of the Application's label key, whether its labels
// are a map (as decoded) or held (a cached copy, Trim): "" when it has
// none.
func (a *Application) Label(key string) string {
	if a.Labels != nil {
		return a.Labels[key]
	}
	if f := a.held.field(key); f != nil {
		return *f
	}
	return ""
}

// GetLabels gives the Application's labels: its label map, or, of a
// cached copy (Trim), a new map of the labels it held. A change to the
// returned map of a cached copy changes nothing until SetLabels.
func (a *Application) GetLabels() map[string]string {
	if a.Labels != nil || a.held == (heldLabels{}) {
		return a.Labels
	}
	out := make(map[string]string, len(HeldLabels))
	for _, key := range HeldLabels {
		if v := *a.held.field(key); v != "" {
			out[key] = v
		}
	}
	return out
}

// HoldLabels replaces the Application's label map with the values of the
// labels FleetVM sets (HeldLabels), each passed through share (the
// hub's string table; nil: as they are). Other labels are dropped.
func (a *Application) HoldLabels(share func(string) string) {
	if share == nil {
		share = func(s string) string { return s }
	}
	if a.Labels == nil {
		for _, key := range HeldLabels {
			f := a.held.field(key)
			*f = share(*f)
		}
		return
	}
	a.held = heldLabels{}
	for _, key := range HeldLabels {
		*a.held.field(key) = share(a.Labels[key])
	}
	a.Labels = nil
}

// Spec is the project the Application runs under: a namespace's AppProject
// goes only once no Application runs under it.
type Spec struct {
	Project string `json:"project"`
}

// Status is Argo CD's sync and health status of the Application, its
// conditions, and its sync operation's state.
type Status struct {
	Sync           SyncStatus             `json:"sync,omitempty"`
	Health         HealthStatus           `json:"health,omitempty"`
	Conditions     []ApplicationCondition `json:"conditions,omitempty"`
	OperationState *OperationState        `json:"operationState,omitempty"`
}

// SyncStatus is whether the live state matches the target state.
type SyncStatus struct {
	Status SyncStatusCode `json:"status,omitempty"`
}

// HealthStatus is the Application's health.
type HealthStatus struct {
	Status HealthStatusCode `json:"status,omitempty"`
}

// OperationState is the phase and message of the Application's current or
// last sync, how often Argo CD retried it, and the resources it synced.
type OperationState struct {
	Phase      OperationPhase `json:"phase"`
	Message    string         `json:"message,omitempty"`
	RetryCount int64          `json:"retryCount,omitempty"`
	SyncResult *SyncResult    `json:"syncResult,omitempty"`
}

// SyncResult is what the sync did to each resource. The cache keeps only
// the resources that failed with a message (Trim).
type SyncResult struct {
	Resources []ResourceResult `json:"resources,omitempty"`
}

// ResourceResult is what the sync did to one resource.
type ResourceResult struct {
	Status  ResultCode `json:"status,omitempty"`
	Message string     `json:"message,omitempty"`
}

// Failed says whether the sync failed this resource, with a message.
func (r ResourceResult) Failed() bool {
	return r.Status == ResultCodeSyncFailed && r.Message != ""
}

// ApplicationList is a list of Applications.
//
// +kubebuilder:object:root=true
type ApplicationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Application `json:"items"`
}

// Trim is the hub's cache transform for Applications: it drops the managed
// fields, which the hub never reads, keeps of the labels only those
// FleetVM sets and without their map (HoldLabels), and of a sync's
// resources keeps only those that failed with a message, the ones the
// status shows (delivery.StateOf); the rest of the object is what this
// type decodes.
func Trim(obj any) (any, error) {
	app, ok := obj.(*Application)
	if !ok {
		return obj, nil
	}
	app.ManagedFields = nil
	app.HoldLabels(nil)
	if op := app.Status.OperationState; op != nil && op.SyncResult != nil {
		var failed []ResourceResult
		for _, res := range op.SyncResult.Resources {
			if res.Failed() {
				failed = append(failed, res)
			}
		}
		op.SyncResult = nil
		if failed != nil {
			op.SyncResult = &SyncResult{Resources: failed}
		}
	}
	return app, nil
}

// GroupVersion is Argo CD's API group and version.
var GroupVersion = schema.GroupVersion{Group: "argoproj.io", Version: "v1alpha1"}

// AddToScheme registers this package's Application and ApplicationSet
// (and their lists) under Argo CD's group, version and kinds: a client of
// such a scheme reads and writes them as these types. AppProjects are
// read and written unstructured (tenancy.NewAppProject): the hub holds one
// per namespace, and a write of the one FleetVM makes replaces the whole
// spec Argo CD defines, not only the fields a type of the hub's would
// know.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&Application{}, &ApplicationList{},
		&ApplicationSet{}, &ApplicationSetList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
