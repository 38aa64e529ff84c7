package delivery

import (
	"strings"

	"github.com/fleetvm/fleetvm/pkg/argoapp"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/status"
)

// StateOf is what the status shows of an Application: Argo CD's sync
// and health, and its own error when it cannot render or sync.
func StateOf(app *argoapp.Application) status.AppState {
	s := status.AppState{Sync: string(app.Status.Sync.Status), Health: string(app.Status.Health.Status), Deleting: app.DeletionTimestamp != nil}
	for _, c := range app.Status.Conditions {
		if c.IsError() {
			s.Error = status.JoinMessage(s.Error, c.Message)
		}
	}
	// A failed sync, or one Argo CD retries after a failure: its message,
	// and what it says of each resource that failed (such as "resource
	// rbac.authorization.k8s.io:ClusterRoleBinding is not permitted in
	// project ...").
	if op := app.Status.OperationState; op != nil && (op.Phase == argoapp.OperationFailed || op.Phase == argoapp.OperationError ||
		op.Phase == argoapp.OperationRunning && op.RetryCount > 0) {
		msg := "sync " + strings.ToLower(string(op.Phase)) + ": " + op.Message
		if op.SyncResult != nil {
			for _, res := range op.SyncResult.Resources {
				if res.Failed() {
					msg += "; " + res.Message
				}
			}
		}
		s.Error = status.JoinMessage(s.Error, msg)
	}
	const most = 512
	if len(s.Error) > most {
		s.Error = s.Error[:most] + "…"
	}
	return s
}

// RemovalBlocked says why Argo CD would not remove the VM if the
// Application were deleted now: Argo CD drops its resources finalizer and
// leaves the resources when the Application's destination is invalid (no
// cluster secret for it, for instance), so an Application Argo CD reports
// invalid is not deleted.
func RemovalBlocked(app *argoapp.Application) string {
	for _, c := range app.Status.Conditions {
		if c.Type == argoapp.ApplicationConditionInvalidSpecError {
			return "Argo CD reports the Application invalid (" + c.Message + ")"
		}
	}
	return ""
}
