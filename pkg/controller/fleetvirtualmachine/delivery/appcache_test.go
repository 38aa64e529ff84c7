package delivery

import (
	"testing"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/argoproj/gitops-engine/pkg/health"
	synccommon "github.com/argoproj/gitops-engine/pkg/sync/common"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/status"
)

// TestTrimApplication: the cached Application reads the same to the hub
// (state, removal block, metadata) and holds neither spec nor the status
// the hub never reads.
func TestTrimApplication(t *testing.T) {
	now := metav1.Now()
	rich := func() *argov1alpha1.Application {
		return &argov1alpha1.Application{
			ObjectMeta: metav1.ObjectMeta{
				Namespace: "argocd", Name: "fvm-vms.web.prod-a", Labels: map[string]string{"fleetvm.io/cluster": "prod-a"},
				Finalizers:      []string{argov1alpha1.ResourcesFinalizerName},
				OwnerReferences: []metav1.OwnerReference{{Kind: "ApplicationSet", Name: "fvm-vms.web", UID: "u1"}},
				ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "argocd-applicationset-controller"}},
			},
			Spec: argov1alpha1.ApplicationSpec{
				Project:     "fleetvm-vms",
				Destination: argov1alpha1.ApplicationDestination{Name: "prod-a", Namespace: "vms"},
				Source:      &argov1alpha1.ApplicationSource{RepoURL: "https://charts.example", Helm: &argov1alpha1.ApplicationSourceHelm{Values: "vm: {big: template}"}},
			},
			Operation: &argov1alpha1.Operation{Sync: &argov1alpha1.SyncOperation{Revision: "abc"}},
			Status: argov1alpha1.ApplicationStatus{
				Sync:         argov1alpha1.SyncStatus{Status: argov1alpha1.SyncStatusCodeOutOfSync, Revision: "abc"},
				Health:       argov1alpha1.AppHealthStatus{Status: health.HealthStatusDegraded},
				Resources:    []argov1alpha1.ResourceStatus{{Kind: "VirtualMachine", Name: "web"}},
				History:      argov1alpha1.RevisionHistories{{Revision: "abc"}},
				Summary:      argov1alpha1.ApplicationSummary{Images: []string{"quay.io/containerdisks/fedora"}},
				ReconciledAt: &now,
				Conditions: []argov1alpha1.ApplicationCondition{
					{Type: argov1alpha1.ApplicationConditionInvalidSpecError, Message: "cluster prod-a has no secret"},
					{Type: argov1alpha1.ApplicationConditionSyncError, Message: "sync failed"},
				},
				OperationState: &argov1alpha1.OperationState{
					Phase: synccommon.OperationRunning, Message: "retrying", RetryCount: 2, StartedAt: now,
					SyncResult: &argov1alpha1.SyncOperationResult{Revision: "abc", Resources: []*argov1alpha1.ResourceResult{
						{Kind: "VirtualMachine", Name: "web", Status: synccommon.ResultCodeSynced, Message: "created"},
						{Kind: "ClusterRoleBinding", Name: "x", Status: synccommon.ResultCodeSyncFailed, Message: "not permitted in project"},
						nil,
					}},
				},
			},
		}
	}
	app := rich()
	got, err := TrimApplication(app)
	if err != nil {
		t.Fatal(err)
	}
	trimmed := got.(*argov1alpha1.Application)
	orig := rich()
	if diff := cmp.Diff(StateOf(orig), StateOf(trimmed), cmp.AllowUnexported(status.AppState{})); diff != "" {
		t.Errorf("StateOf changed by the trim (-want,+got):\n%s", diff)
	}
	if a, b := RemovalBlocked(orig), RemovalBlocked(trimmed); a != b || a == "" {
		t.Errorf("removalBlocked = %q after the trim, %q before (want the same, not empty)", b, a)
	}
	wantMeta := orig.ObjectMeta
	wantMeta.ManagedFields = nil
	if diff := cmp.Diff(wantMeta, trimmed.ObjectMeta); diff != "" {
		t.Errorf("metadata (-want,+got):\n%s", diff)
	}
	if trimmed.Spec.Source != nil || trimmed.Spec.Destination.Name != "" || trimmed.Operation != nil ||
		trimmed.Status.Resources != nil || trimmed.Status.History != nil || trimmed.Status.Summary.Images != nil ||
		trimmed.Status.ReconciledAt != nil || trimmed.Status.Sync.Revision != "" ||
		len(trimmed.Status.OperationState.SyncResult.Resources) != 1 {
		t.Errorf("kept what the hub never reads: %+v", trimmed)
	}

	// Anything else passes unchanged (the informer hands tombstones too).
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}}
	if out, err := TrimApplication(cm); err != nil || out != any(cm) || len(cm.ManagedFields) != 1 {
		t.Errorf("TrimApplication(ConfigMap) = %v, %v; want it unchanged", out, err)
	}
}
