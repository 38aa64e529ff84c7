package delivery

import (
	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	synccommon "github.com/argoproj/gitops-engine/pkg/sync/common"
)

// TrimApplication is the hub's cache transform for Argo CD Applications:
// it keeps what the hub reads of one (its metadata and project, Argo CD's
// sync and health status, its conditions, and the phase and messages of a failed
// sync: StateOf, removalBlocked) and drops the rest before it enters
// the cache. An Application's spec carries the VM template in its Helm
// values, and its status grows with every resource it syncs (resources,
// history, summary, comparedTo); the hub holds three or more Applications
// per FleetVirtualMachine and reads none of that. The hub writes
// Applications only as merge patches of what it changed (write.Mutate)
// and by deleting them, so nothing dropped here is ever written back.
func TrimApplication(obj any) (any, error) {
	app, ok := obj.(*argov1alpha1.Application)
	if !ok {
		return obj, nil
	}
	app.ManagedFields = nil
	// The project: a namespace's AppProject goes only once no Application
	// runs under it (cleanupTenant).
	app.Spec = argov1alpha1.ApplicationSpec{Project: app.Spec.Project}
	app.Operation = nil
	st := app.Status
	app.Status = argov1alpha1.ApplicationStatus{
		Sync:       argov1alpha1.SyncStatus{Status: st.Sync.Status},
		Health:     argov1alpha1.AppHealthStatus{Status: st.Health.Status},
		Conditions: st.Conditions,
	}
	if op := st.OperationState; op != nil {
		kept := &argov1alpha1.OperationState{Phase: op.Phase, Message: op.Message, RetryCount: op.RetryCount}
		if op.SyncResult != nil {
			var failed []*argov1alpha1.ResourceResult
			for _, res := range op.SyncResult.Resources {
				if res != nil && res.Status == synccommon.ResultCodeSyncFailed && res.Message != "" {
					failed = append(failed, &argov1alpha1.ResourceResult{Status: res.Status, Message: res.Message})
				}
			}
			if failed != nil {
				kept.SyncResult = &argov1alpha1.SyncOperationResult{Resources: failed}
			}
		}
		app.Status.OperationState = kept
	}
	return app, nil
}
