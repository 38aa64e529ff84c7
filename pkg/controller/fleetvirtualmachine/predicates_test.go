package fleetvirtualmachine

import (
	"testing"
	"time"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/argoproj/gitops-engine/pkg/health"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// TestApplicationChanged: Argo CD's periodic renewal of reconciledAt does
// not reconcile the FleetVirtualMachine; every change the hub reads does.
func TestApplicationChanged(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	later := metav1.NewTime(then.Add(3 * time.Minute))
	old := &argov1alpha1.Application{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "argocd", ResourceVersion: "1", Generation: 4},
		Status: argov1alpha1.ApplicationStatus{
			ReconciledAt: &then,
			Health:       argov1alpha1.AppHealthStatus{Status: health.HealthStatusHealthy},
			Sync:         argov1alpha1.SyncStatus{Status: argov1alpha1.SyncStatusCodeSynced},
		},
	}
	cases := map[string]struct {
		change func(*argov1alpha1.Application)
		want   bool
	}{
		"reconciledAt renewed": {change: func(a *argov1alpha1.Application) { a.Status.ReconciledAt = &later }, want: false},
		"reconciledAt dropped": {change: func(a *argov1alpha1.Application) { a.Status.ReconciledAt = nil }, want: false},
		"health degraded":      {change: func(a *argov1alpha1.Application) { a.Status.Health.Status = health.HealthStatusDegraded }, want: true},
		"out of sync":          {change: func(a *argov1alpha1.Application) { a.Status.Sync.Status = argov1alpha1.SyncStatusCodeOutOfSync }, want: true},
		"error condition": {change: func(a *argov1alpha1.Application) {
			a.Status.Conditions = []argov1alpha1.ApplicationCondition{{Type: "SyncError", Message: "x"}}
		}, want: true},
		"being deleted":   {change: func(a *argov1alpha1.Application) { a.DeletionTimestamp = &later }, want: true},
		"finalizer added": {change: func(a *argov1alpha1.Application) { a.Finalizers = []string{"resources-finalizer.argocd.argoproj.io"} }, want: true},
		"annotation added": {change: func(a *argov1alpha1.Application) {
			a.Annotations = map[string]string{"argocd.argoproj.io/refresh": "normal"}
		}, want: true},
		"destination changed": {change: func(a *argov1alpha1.Application) { a.Spec.Destination.Name = "prod-b" }, want: true},
		"operation started":   {change: func(a *argov1alpha1.Application) { a.Operation = &argov1alpha1.Operation{} }, want: true},
		"with reconciledAt too": {change: func(a *argov1alpha1.Application) {
			a.Status.ReconciledAt = &later
			a.Labels = map[string]string{"x": "y"}
		}, want: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			n := old.DeepCopy()
			// As the API server writes it: the Application CRD has no
			// status subresource, so every write bumps the generation.
			n.ResourceVersion, n.Generation = "2", old.Generation+1
			c.change(n)
			if got := applicationChanged().Update(event.UpdateEvent{ObjectOld: old, ObjectNew: n}); got != c.want {
				t.Errorf("applicationChanged = %v, want %v", got, c.want)
			}
		})
	}
}
