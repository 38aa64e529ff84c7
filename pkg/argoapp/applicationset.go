package argoapp

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ApplicationSet is an Argo CD ApplicationSet as FleetVM writes one: the
// fields of Argo CD's spec that FleetVM sets, with Argo CD's JSON names,
// and of the status the conditions. The hub writes ApplicationSets with
// merge patches computed from the copy it read (write.Ensure), so a field
// this type leaves out is neither read nor written: an edit of such a
// field by someone else stays, as it did when the hub read Argo CD's type
// and found every field it generates in place.
//
// +kubebuilder:object:root=true
type ApplicationSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ApplicationSetSpec   `json:"spec"`
	Status ApplicationSetStatus `json:"status,omitempty"`

	// held is what a cached copy keeps in place of its spec and of its
	// label and annotation maps (Hold); zero for any other copy. No JSON
	// name: runtime.DefaultUnstructuredConverter, which write.Ensure
	// compares and hashes with, converts a field without a tag, even an
	// unexported one.
	held heldSet `json:"-"`
}

// ApplicationSetList is a list of ApplicationSets.
//
// +kubebuilder:object:root=true
type ApplicationSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ApplicationSet `json:"items"`
}

// ApplicationSetSpec is what FleetVM generates of an ApplicationSet: a
// list generator, the Application template, the per-element template
// patch, the differences of Applications left to FleetVM and the sync
// policy.
type ApplicationSetSpec struct {
	GoTemplate                   bool                            `json:"goTemplate,omitempty"`
	Generators                   []ApplicationSetGenerator       `json:"generators"`
	Template                     ApplicationSetTemplate          `json:"template"`
	SyncPolicy                   *ApplicationSetSyncPolicy       `json:"syncPolicy,omitempty"`
	GoTemplateOptions            []string                        `json:"goTemplateOptions,omitempty"`
	IgnoreApplicationDifferences ApplicationSetIgnoreDifferences `json:"ignoreApplicationDifferences,omitempty"`
	TemplatePatch                *string                         `json:"templatePatch,omitempty"`
}

// ApplicationSetGenerator is one generator; FleetVM writes list
// generators only.
type ApplicationSetGenerator struct {
	List *ListGenerator `json:"list,omitempty"`
}

// ListGenerator generates one Application per element.
type ListGenerator struct {
	Elements []apiextensionsv1.JSON `json:"elements"`
}

// ApplicationSetTemplate is the template of each generated Application.
type ApplicationSetTemplate struct {
	ApplicationSetTemplateMeta `json:"metadata"`
	Spec                       ApplicationSpec `json:"spec"`
}

// ApplicationSetTemplateMeta is the generated Applications' metadata.
type ApplicationSetTemplateMeta struct {
	Name        string            `json:"name,omitempty"`
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Finalizers  []string          `json:"finalizers,omitempty"`
}

// ApplicationSetSyncPolicy is what the ApplicationSet controller may do to
// the Applications it generated.
type ApplicationSetSyncPolicy struct {
	PreserveResourcesOnDeletion bool                    `json:"preserveResourcesOnDeletion,omitempty"`
	ApplicationsSync            *ApplicationsSyncPolicy `json:"applicationsSync,omitempty"`
}

// ApplicationsSyncPolicy names what the ApplicationSet controller may do:
// create, update, delete Applications.
type ApplicationsSyncPolicy string

// ApplicationsSyncPolicyCreateUpdate: create and update Applications,
// never delete one.
const ApplicationsSyncPolicyCreateUpdate ApplicationsSyncPolicy = "create-update"

// ApplicationSetIgnoreDifferences are the fields of generated
// Applications the ApplicationSet controller leaves as they are.
type ApplicationSetIgnoreDifferences []ApplicationSetResourceIgnoreDifferences

// ApplicationSetResourceIgnoreDifferences names fields of Applications by
// JSON pointer.
type ApplicationSetResourceIgnoreDifferences struct {
	Name              string   `json:"name,omitempty"`
	JSONPointers      []string `json:"jsonPointers,omitempty"`
	JQPathExpressions []string `json:"jqPathExpressions,omitempty"`
}

// ApplicationSpec is the spec of an Application FleetVM generates: one
// source, the destination, the project, the sync policy and the fields of
// the VM left out of the diff.
type ApplicationSpec struct {
	Source            *ApplicationSource          `json:"source,omitempty"`
	Destination       ApplicationDestination      `json:"destination"`
	Project           string                      `json:"project"`
	SyncPolicy        *SyncPolicy                 `json:"syncPolicy,omitempty"`
	IgnoreDifferences []ResourceIgnoreDifferences `json:"ignoreDifferences,omitempty"`
}

// ApplicationSource is a Helm chart or a git path, with its Helm or
// kustomize settings.
type ApplicationSource struct {
	RepoURL        string                      `json:"repoURL"`
	Path           string                      `json:"path,omitempty"`
	TargetRevision string                      `json:"targetRevision,omitempty"`
	Helm           *ApplicationSourceHelm      `json:"helm,omitempty"`
	Kustomize      *ApplicationSourceKustomize `json:"kustomize,omitempty"`
	Chart          string                      `json:"chart,omitempty"`
}

// ApplicationSourceHelm is how Argo CD renders a Helm source.
type ApplicationSourceHelm struct {
	ValueFiles   []string              `json:"valueFiles,omitempty"`
	Parameters   []HelmParameter       `json:"parameters,omitempty"`
	ReleaseName  string                `json:"releaseName,omitempty"`
	Values       string                `json:"values,omitempty" patchStrategy:"replace"`
	ValuesObject *runtime.RawExtension `json:"valuesObject,omitempty"`
}

// HelmParameter is one Helm parameter; parameters win over values.
type HelmParameter struct {
	Name        string `json:"name,omitempty"`
	Value       string `json:"value,omitempty"`
	ForceString bool   `json:"forceString,omitempty"`
}

// ApplicationSourceKustomize is how Argo CD renders a kustomize source.
type ApplicationSourceKustomize struct {
	NamePrefix   string            `json:"namePrefix,omitempty"`
	CommonLabels map[string]string `json:"commonLabels,omitempty"`
	Patches      []KustomizePatch  `json:"patches,omitempty"`
}

// KustomizePatch is one inline kustomize patch and the resources it
// targets.
type KustomizePatch struct {
	Path   string             `json:"path,omitempty"`
	Patch  string             `json:"patch,omitempty"`
	Target *KustomizeSelector `json:"target,omitempty"`
}

// KustomizeSelector selects the resources a patch applies to.
type KustomizeSelector struct {
	KustomizeResID     `json:",inline"`
	AnnotationSelector string `json:"annotationSelector,omitempty"`
	LabelSelector      string `json:"labelSelector,omitempty"`
}

// KustomizeResID names resources by group, version, kind, name and
// namespace.
type KustomizeResID struct {
	KustomizeGvk `json:",inline"`
	Name         string `json:"name,omitempty"`
	Namespace    string `json:"namespace,omitempty"`
}

// KustomizeGvk is a group, version and kind.
type KustomizeGvk struct {
	Group   string `json:"group,omitempty"`
	Version string `json:"version,omitempty"`
	Kind    string `json:"kind,omitempty"`
}

// ApplicationDestination is the cluster and namespace an Application
// deploys to.
type ApplicationDestination struct {
	Server    string `json:"server,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
}

// SyncPolicy is when and how Argo CD syncs an Application.
type SyncPolicy struct {
	Automated   *SyncPolicyAutomated `json:"automated,omitempty"`
	SyncOptions []string             `json:"syncOptions,omitempty"`
	Retry       *RetryStrategy       `json:"retry,omitempty"`
}

// SyncPolicyAutomated is an automated sync: whether it prunes and heals.
type SyncPolicyAutomated struct {
	Prune    bool `json:"prune,omitempty"`
	SelfHeal bool `json:"selfHeal,omitempty"`
}

// RetryStrategy is how a failed sync is retried.
type RetryStrategy struct {
	Limit   int64    `json:"limit,omitempty"`
	Backoff *Backoff `json:"backoff,omitempty"`
}

// Backoff is the back-off between retries.
type Backoff struct {
	Duration    string `json:"duration,omitempty"`
	Factor      *int64 `json:"factor,omitempty"`
	MaxDuration string `json:"maxDuration,omitempty"`
}

// ResourceIgnoreDifferences names fields of a kind Argo CD leaves out of
// the diff.
type ResourceIgnoreDifferences struct {
	Group             string   `json:"group,omitempty"`
	Kind              string   `json:"kind"`
	Name              string   `json:"name,omitempty"`
	Namespace         string   `json:"namespace,omitempty"`
	JSONPointers      []string `json:"jsonPointers,omitempty"`
	JQPathExpressions []string `json:"jqPathExpressions,omitempty"`
}

// ApplicationSetStatus is the ApplicationSet controller's status; FleetVM
// reads its conditions.
type ApplicationSetStatus struct {
	Conditions []ApplicationSetCondition `json:"conditions,omitempty"`
}

// ApplicationSetCondition is one condition of an ApplicationSet.
type ApplicationSetCondition struct {
	Type               string       `json:"type"`
	Message            string       `json:"message"`
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`
	Status             string       `json:"status"`
	Reason             string       `json:"reason"`
}

// What the ApplicationSet controller says of an ApplicationSet it could
// not reconcile: the ErrorOccurred condition, true, with the reason of an
// invalid generated Application.
const (
	ApplicationSetConditionErrorOccurred           = "ErrorOccurred"
	ApplicationSetConditionStatusTrue              = "True"
	ApplicationSetReasonApplicationValidationError = "ApplicationValidationError"
)
