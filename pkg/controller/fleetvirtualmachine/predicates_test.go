package fleetvirtualmachine

import (
	"testing"
	"time"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/argoproj/gitops-engine/pkg/health"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/argoapp"
	"github.com/fleetvm/fleetvm/pkg/argoapp/argoapptest"
	"github.com/fleetvm/fleetvm/pkg/consolelink"
)

// TestApplicationChanged: Argo CD's periodic renewal of reconciledAt does
// not reconcile the FleetVirtualMachine; every change the hub reads does.
// Each change is made to Argo CD's Application and seen as the hub's
// cache decodes it (argoapp): what that leaves out, the spec but the
// project and the operation Argo CD runs, reconciles nothing either.
func TestApplicationChanged(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	later := metav1.NewTime(then.Add(3 * time.Minute))
	old := &argov1alpha1.Application{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "argocd", ResourceVersion: "1", Generation: 4, Labels: map[string]string{
			fleetv1alpha1.LabelFleetVMName: "vm", fleetv1alpha1.LabelFleetVMNamespace: "team-a",
			fleetv1alpha1.LabelCluster: "prod-a", fleetv1alpha1.LabelPartOf: fleetv1alpha1.PartOfValue,
		}},
		Status: argov1alpha1.ApplicationStatus{
			ReconciledAt: &then,
			Health:       argov1alpha1.AppHealthStatus{Status: health.HealthStatusHealthy},
			Sync:         argov1alpha1.SyncStatus{Status: argov1alpha1.SyncStatusCodeSynced},
		},
	}
	cases := map[string]updateCase[*argov1alpha1.Application]{
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
		"destination changed": {change: func(a *argov1alpha1.Application) { a.Spec.Destination.Name = "prod-b" }, want: false},
		"project changed":     {change: func(a *argov1alpha1.Application) { a.Spec.Project = "other" }, want: true},
		"operation started":   {change: func(a *argov1alpha1.Application) { a.Operation = &argov1alpha1.Operation{} }, want: false},
		"sync running": {change: func(a *argov1alpha1.Application) {
			a.Status.OperationState = &argov1alpha1.OperationState{Phase: "Running"}
		}, want: true},
		"with reconciledAt too": {change: func(a *argov1alpha1.Application) {
			a.Status.ReconciledAt = &later
			a.Labels[fleetv1alpha1.LabelCluster] = "prod-b"
		}, want: true},
		// The cache keeps only the labels FleetVM sets (argoapp.Trim).
		"owner label changed": {change: func(a *argov1alpha1.Application) { a.Labels[fleetv1alpha1.LabelFleetVMName] = "other" }, want: true},
		"mark removed":        {change: func(a *argov1alpha1.Application) { delete(a.Labels, fleetv1alpha1.LabelPartOf) }, want: true},
		"another label added": {change: func(a *argov1alpha1.Application) { a.Labels["team"] = "a" }, want: false},
	}
	cached := func(t *testing.T, app *argov1alpha1.Application) *argoapp.Application {
		t.Helper()
		out, err := argoapptest.FromArgo(app)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			n := old.DeepCopy()
			// As the API server writes it: the Application CRD has no
			// status subresource, so every write bumps the generation.
			n.ResourceVersion, n.Generation = "2", old.Generation+1
			c.change(n)
			if got := applicationChanged().Update(event.UpdateEvent{ObjectOld: cached(t, old), ObjectNew: cached(t, n)}); got != c.want {
				t.Errorf("Update passes = %v, want %v", got, c.want)
			}
		})
	}
}

// updateCase is one change to an object, and whether the predicate passes
// the update.
type updateCase[T client.Object] struct {
	change func(T)
	want   bool
}

// checkUpdates runs each case through the predicate's Update: a copy of
// old with a new resourceVersion, written as prepare says the API server
// writes it (nil: nothing more), then changed.
func checkUpdates[T client.Object](t *testing.T, p predicate.Predicate, old T, prepare func(T), cases map[string]updateCase[T]) {
	t.Helper()
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			n := old.DeepCopyObject().(T)
			n.SetResourceVersion(old.GetResourceVersion() + "0")
			if prepare != nil {
				prepare(n)
			}
			c.change(n)
			if got := p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: n}); got != c.want {
				t.Errorf("Update passes = %v, want %v", got, c.want)
			}
		})
	}
}

// TestClusterChanged: a ManagedCluster's lease and status renewals do not
// reconcile the FleetVirtualMachines of its sets; its availability,
// labels and claimed console URL do.
func TestClusterChanged(t *testing.T) {
	available := func(s metav1.ConditionStatus, at time.Time) []metav1.Condition {
		return []metav1.Condition{{Type: clusterv1.ManagedClusterConditionAvailable, Status: s, LastTransitionTime: metav1.NewTime(at)}}
	}
	then := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	old := &clusterv1.ManagedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "prod-a", ResourceVersion: "1", Labels: map[string]string{"env": "prod"}},
		Status:     clusterv1.ManagedClusterStatus{Conditions: available(metav1.ConditionTrue, then)},
	}
	cases := map[string]updateCase[*clusterv1.ManagedCluster]{
		"condition time renewed": {change: func(c *clusterv1.ManagedCluster) {
			c.Status.Conditions = available(metav1.ConditionTrue, then.Add(time.Minute))
		}, want: false},
		"version reported": {change: func(c *clusterv1.ManagedCluster) { c.Status.Version.Kubernetes = "v1.33.1" }, want: false},
		"unreachable":      {change: func(c *clusterv1.ManagedCluster) { c.Status.Conditions = available(metav1.ConditionUnknown, then) }, want: true},
		"condition gone":   {change: func(c *clusterv1.ManagedCluster) { c.Status.Conditions = nil }, want: true},
		"relabelled":       {change: func(c *clusterv1.ManagedCluster) { c.Labels["env"] = "staging" }, want: true},
		"label added":      {change: func(c *clusterv1.ManagedCluster) { c.Labels["region"] = "eu" }, want: true},
		"console claimed": {change: func(c *clusterv1.ManagedCluster) {
			c.Status.ClusterClaims = []clusterv1.ManagedClusterClaim{{Name: consolelink.ClaimConsoleURL, Value: "https://console.example.com"}}
		}, want: true},
		"another claim": {change: func(c *clusterv1.ManagedCluster) {
			c.Status.ClusterClaims = []clusterv1.ManagedClusterClaim{{Name: consolelink.ClaimOpenShiftVersion, Value: "4.21.3"}}
		}, want: false},
	}
	checkUpdates(t, clusterChanged(), old, nil, cases)
}

// TestScoresChanged: an agent renewing its score's validity does not
// reconcile the FleetVirtualMachines waiting for clusters; a new value
// does.
func TestScoresChanged(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC))
	later := metav1.NewTime(then.Add(90 * time.Second))
	old := &clusterv1alpha1.AddOnPlacementScore{
		ObjectMeta: metav1.ObjectMeta{Name: "fleetvm-capacity", Namespace: "prod-a", ResourceVersion: "1"},
		Status: clusterv1alpha1.AddOnPlacementScoreStatus{
			ValidUntil: &then,
			Scores:     []clusterv1alpha1.AddOnPlacementScoreItem{{Name: "cpu-free", Value: 40}, {Name: "fit-2000m-4096mi", Value: 3}},
		},
	}
	cases := map[string]updateCase[*clusterv1alpha1.AddOnPlacementScore]{
		"validity renewed": {change: func(s *clusterv1alpha1.AddOnPlacementScore) { s.Status.ValidUntil = &later }, want: false},
		"fit dropped":      {change: func(s *clusterv1alpha1.AddOnPlacementScore) { s.Status.Scores[1].Value = 0 }, want: true},
		"shape added": {change: func(s *clusterv1alpha1.AddOnPlacementScore) {
			s.Status.Scores = append(s.Status.Scores, clusterv1alpha1.AddOnPlacementScoreItem{Name: "fit-4000m-8192mi", Value: 1})
		}, want: true},
	}
	// The hub's clock before the old validity ends.
	r := &Reconciler{Clock: clocktesting.NewFakeClock(then.Add(-time.Minute))}
	checkUpdates(t, r.scoresChanged(), old, nil, cases)

	// Past it: the agent had stopped renewing, and a renewal brings the
	// cluster back (its FleetVirtualMachines waiting for clusters may
	// pick it again); one still in the past does not.
	r.Clock = clocktesting.NewFakeClock(then.Add(time.Minute))
	checkUpdates(t, r.scoresChanged(), old, nil, map[string]updateCase[*clusterv1alpha1.AddOnPlacementScore]{
		"renewed after it expired": {change: func(s *clusterv1alpha1.AddOnPlacementScore) { s.Status.ValidUntil = &later }, want: true},
		"renewed, still expired": {change: func(s *clusterv1alpha1.AddOnPlacementScore) {
			s.Status.ValidUntil = ptr.To(metav1.NewTime(then.Add(30 * time.Second)))
		}, want: false},
	})
}
