package argoapp

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Argo CD's codes and names the hub reads or writes, as Argo CD (and its
// gitops-engine) spell them.

// SyncStatusCode is whether an Application's live state matches git.
type SyncStatusCode string

// The sync status codes.
const (
	SyncStatusCodeUnknown   SyncStatusCode = "Unknown"
	SyncStatusCodeSynced    SyncStatusCode = "Synced"
	SyncStatusCodeOutOfSync SyncStatusCode = "OutOfSync"
)

// HealthStatusCode is an Application's health.
type HealthStatusCode string

// The health status codes.
const (
	HealthStatusUnknown     HealthStatusCode = "Unknown"
	HealthStatusProgressing HealthStatusCode = "Progressing"
	HealthStatusHealthy     HealthStatusCode = "Healthy"
	HealthStatusSuspended   HealthStatusCode = "Suspended"
	HealthStatusDegraded    HealthStatusCode = "Degraded"
	HealthStatusMissing     HealthStatusCode = "Missing"
)

// OperationPhase is the phase of an Application's sync operation.
type OperationPhase string

// The operation phases.
const (
	OperationRunning     OperationPhase = "Running"
	OperationTerminating OperationPhase = "Terminating"
	OperationFailed      OperationPhase = "Failed"
	OperationError       OperationPhase = "Error"
	OperationSucceeded   OperationPhase = "Succeeded"
)

// ResultCode is what a sync did to one resource.
type ResultCode string

// The result codes.
const (
	ResultCodeSynced       ResultCode = "Synced"
	ResultCodeSyncFailed   ResultCode = "SyncFailed"
	ResultCodePruned       ResultCode = "Pruned"
	ResultCodePruneSkipped ResultCode = "PruneSkipped"
)

// ApplicationCondition is one condition of an Application.
type ApplicationCondition struct {
	Type               string       `json:"type"`
	Message            string       `json:"message"`
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`
}

// ApplicationConditionInvalidSpecError: Argo CD found the Application's
// spec invalid (a project that does not exist or does not allow it, ...).
const ApplicationConditionInvalidSpecError = "InvalidSpecError"

// ResourcesFinalizerName is Argo CD's finalizer: an Application that has
// it is deleted only after Argo CD deleted the resources it synced.
const ResourcesFinalizerName = "resources-finalizer.argocd.argoproj.io"

// IsError says whether the condition is an error, as Argo CD does: its
// type ends in "Error".
func (c *ApplicationCondition) IsError() bool {
	return strings.HasSuffix(c.Type, "Error")
}
