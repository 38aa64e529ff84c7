package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/argoproj/gitops-engine/pkg/health"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The Argo CD stand-in: no Argo CD runs in the benchmark, so the harness
// does, in its place, the two things FleetVM's status depends on.
//
//   - As the ApplicationSet controller (policy create-update): on every
//     ApplicationSet event (and only then, as Argo CD, which does not watch
//     PlacementDecisions and otherwise re-reads them every 3 minutes), list
//     the PlacementDecisions its clusterDecisionResource generator selects,
//     straight from the API server, and create the missing Applications:
//     the template with {{.name}} set to the cluster, owned by the
//     ApplicationSet (controller reference), as Argo CD names and labels
//     them. Applications are never deleted or updated by it.
//   - As the application controller: the Application is created already
//     Synced and Healthy (one write, where Argo CD needs a create and a
//     status update), and its status.reconciledAt is patched every
//     ArgoRefresh (default 3 minutes, Argo CD's reconciliation timeout),
//     spread over the period, as Argo CD's periodic refresh does.
//
// It does not render Helm charts or apply anything: the agent stand-in
// "receives" the VM from the Application's values.
type argoStandIn struct {
	h      *harness
	queue  workqueue.TypedRateLimitingInterface[string]
	mu     sync.Mutex
	apps   map[string]*argov1alpha1.Application // by name, as created
	order  []string                             // names in creation order
	writes atomic.Int64
}

func newArgoStandIn(h *harness) *argoStandIn {
	return &argoStandIn{
		h: h,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "bench-argocd-applicationsets"}),
		apps: map[string]*argov1alpha1.Application{},
	}
}

// appSetChanged is the ApplicationSet watch.
func (a *argoStandIn) appSetChanged(name string) { a.queue.Add(name) }

func (a *argoStandIn) start(ctx context.Context, workers int, refresh time.Duration) {
	for range workers {
		go func() {
			for {
				name, shutdown := a.queue.Get()
				if shutdown {
					return
				}
				if err := a.sync(ctx, name); err != nil && ctx.Err() == nil {
					a.h.logf("argo stand-in: %v", err)
					a.queue.AddRateLimited(name)
				} else {
					a.queue.Forget(name)
				}
				a.queue.Done(name)
			}
		}()
	}
	go func() {
		<-ctx.Done()
		a.queue.ShutDown()
	}()
	if refresh > 0 {
		go a.refreshLoop(ctx, refresh)
	}
}

// sync generates one ApplicationSet's Applications.
func (a *argoStandIn) sync(ctx context.Context, name string) error {
	appSet := &argov1alpha1.ApplicationSet{}
	if err := a.h.cache.Get(ctx, client.ObjectKey{Namespace: argoNS, Name: name}, appSet); err != nil {
		return client.IgnoreNotFound(err)
	}
	if appSet.DeletionTimestamp != nil {
		return nil
	}
	selector, ok := decisionSelector(appSet)
	if !ok {
		return nil
	}
	var decisions clusterv1beta1.PlacementDecisionList
	if err := a.h.admin.List(ctx, &decisions, client.InNamespace(argoNS), client.MatchingLabels(selector)); err != nil {
		return fmt.Errorf("list PlacementDecisions of ApplicationSet %s: %w", name, err)
	}
	var errs []error
	for _, d := range decisions.Items {
		for _, cd := range d.Status.Decisions {
			if err := a.ensureApplication(ctx, appSet, cd.ClusterName); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("ApplicationSet %s: %v", name, errs)
	}
	return nil
}

// decisionSelector returns the labels the clusterDecisionResource
// generator selects PlacementDecisions by.
func decisionSelector(appSet *argov1alpha1.ApplicationSet) (map[string]string, bool) {
	for _, g := range appSet.Spec.Generators {
		if g.ClusterDecisionResource != nil {
			return g.ClusterDecisionResource.LabelSelector.MatchLabels, true
		}
		if g.Matrix != nil {
			for _, n := range g.Matrix.Generators {
				if n.ClusterDecisionResource != nil {
					return n.ClusterDecisionResource.LabelSelector.MatchLabels, true
				}
			}
		}
	}
	return nil, false
}

func (a *argoStandIn) ensureApplication(ctx context.Context, appSet *argov1alpha1.ApplicationSet, cluster string) error {
	app, err := renderApplication(appSet, cluster)
	if err != nil {
		return err
	}
	a.mu.Lock()
	_, exists := a.apps[app.Name]
	a.mu.Unlock()
	if exists {
		return nil
	}
	now := metav1.Now()
	app.Status = argov1alpha1.ApplicationStatus{
		Sync:         argov1alpha1.SyncStatus{Status: argov1alpha1.SyncStatusCodeSynced},
		Health:       argov1alpha1.AppHealthStatus{Status: health.HealthStatusHealthy},
		ReconciledAt: &now,
	}
	a.writes.Add(1)
	if err := a.h.gen.Create(ctx, app); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create Application %s: %w", app.Name, err)
	}
	a.mu.Lock()
	a.apps[app.Name] = app
	a.order = append(a.order, app.Name)
	a.mu.Unlock()
	// Argo CD syncs it: the VM lands on the cluster.
	return a.h.agents.deliver(ctx, app)
}

// renderApplication renders the ApplicationSet's template for a cluster:
// {{.name}} is the only parameter FleetVM's templates use.
func renderApplication(appSet *argov1alpha1.ApplicationSet, cluster string) (*argov1alpha1.Application, error) {
	raw, err := json.Marshal(appSet.Spec.Template)
	if err != nil {
		return nil, err
	}
	rendered := strings.ReplaceAll(string(raw), "{{.name}}", cluster)
	var t argov1alpha1.ApplicationSetTemplate
	if err := json.Unmarshal([]byte(rendered), &t); err != nil {
		return nil, fmt.Errorf("render ApplicationSet %s for %s: %w", appSet.Name, cluster, err)
	}
	app := &argov1alpha1.Application{
		ObjectMeta: metav1.ObjectMeta{
			Name: t.Name, Namespace: appSet.Namespace, Labels: t.Labels, Annotations: t.Annotations,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: argov1alpha1.SchemeGroupVersion.String(), Kind: "ApplicationSet",
				Name: appSet.Name, UID: appSet.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: t.Spec,
	}
	return app, nil
}

// refreshLoop patches status.reconciledAt of every Application once per
// period, a slice each second.
func (a *argoStandIn) refreshLoop(ctx context.Context, period time.Duration) {
	parts := max(int(period/time.Second), 1)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		a.mu.Lock()
		var due []*argov1alpha1.Application
		for i := n % parts; i < len(a.order); i += parts {
			due = append(due, a.apps[a.order[i]])
		}
		a.mu.Unlock()
		for _, app := range due {
			patch := client.MergeFrom(app.DeepCopy())
			fresh := app.DeepCopy()
			now := metav1.Now()
			fresh.Status.ReconciledAt = &now
			a.writes.Add(1)
			if err := a.h.gen.Patch(ctx, fresh, patch); err != nil {
				if ctx.Err() != nil {
					return
				}
				continue
			}
			a.mu.Lock()
			a.apps[app.Name] = fresh
			a.mu.Unlock()
		}
	}
}
