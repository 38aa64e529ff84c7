package delivery

import (
	"strings"
	"testing"
	"unsafe"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/argoproj/gitops-engine/pkg/health"
	synccommon "github.com/argoproj/gitops-engine/pkg/sync/common"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetvm/fleetvm/pkg/argoapp"
	"github.com/fleetvm/fleetvm/pkg/argoapp/argoapptest"
)

// TestStateOfCachedApplication: what the hub's cache holds of an Argo CD
// Application (argoapp, decoded from Argo CD's JSON and trimmed) is all
// StateOf and RemovalBlocked read: sync, health, every error condition,
// the failed sync and the resources it failed, and the metadata whole; it
// holds none of what the hub never reads.
func TestStateOfCachedApplication(t *testing.T) {
	now := metav1.Now()
	full := &argov1alpha1.Application{
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
				{Type: argov1alpha1.ApplicationConditionOrphanedResourceWarning, Message: "an orphan"},
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
	app, err := argoapptest.FromArgo(full)
	if err != nil {
		t.Fatal(err)
	}
	s := StateOf(app)
	if s.Sync != "OutOfSync" || s.Health != "Degraded" || s.Deleting {
		t.Errorf("state %+v, want OutOfSync, Degraded, not deleting", s)
	}
	for _, want := range []string{"cluster prod-a has no secret", "sync failed", "sync running: retrying", "not permitted in project"} {
		if !strings.Contains(s.Error, want) {
			t.Errorf("error %q does not say %q", s.Error, want)
		}
	}
	for _, not := range []string{"an orphan", "created"} {
		if strings.Contains(s.Error, not) {
			t.Errorf("error %q says %q: not an error", s.Error, not)
		}
	}
	if why := RemovalBlocked(app); !strings.Contains(why, "cluster prod-a has no secret") {
		t.Errorf("RemovalBlocked = %q, want the invalid spec's message", why)
	}
	wantMeta := *full.ObjectMeta.DeepCopy()
	wantMeta.ManagedFields = nil
	wantMeta.Labels = nil // held outside the metadata (argoapp.HoldLabels)
	if diff := cmp.Diff(wantMeta, app.ObjectMeta); diff != "" {
		t.Errorf("metadata (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(full.Labels, app.GetLabels()); diff != "" {
		t.Errorf("labels (-want,+got):\n%s", diff)
	}
	if app.Spec.Project != "fleetvm-vms" {
		t.Errorf("project %q, want fleetvm-vms", app.Spec.Project)
	}
	if res := app.Status.OperationState.SyncResult.Resources; len(res) != 1 || res[0].Message != "not permitted in project" {
		t.Errorf("sync result resources %+v, want the one that failed", res)
	}
	// The point of the type: a third of Argo CD's, whatever it holds.
	if got, argo := unsafe.Sizeof(argoapp.Application{}), unsafe.Sizeof(argov1alpha1.Application{}); got > argo/2 {
		t.Errorf("argoapp.Application is %d bytes, Argo CD's %d: want under half", got, argo)
	}

	// Anything else passes the transform unchanged (the informer hands
	// tombstones too).
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}}
	if out, err := argoapp.Trim(cm); err != nil || out != any(cm) || len(cm.ManagedFields) != 1 {
		t.Errorf("Trim(ConfigMap) = %v, %v; want it unchanged", out, err)
	}
}
