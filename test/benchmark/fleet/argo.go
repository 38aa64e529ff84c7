package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
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
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The Argo CD stand-in: no Argo CD runs in the benchmark, so the harness
// does, in its place, what FleetVM's status and safety depend on.
//
//   - As the ApplicationSet controller (policy create-update): on every
//     ApplicationSet event, read the clusters its list generator names and
//     create the missing Applications: the template with {{.name}} set to
//     the cluster, owned by the ApplicationSet (controller reference), as
//     Argo CD names and labels them. Applications are never deleted or
//     updated by it.
//   - As the application controller: the Application is created already
//     Synced and Healthy (one write, where Argo CD needs a create and a
//     status update), and its status.reconciledAt is patched every
//     ArgoRefresh (default 3 minutes, Argo CD's reconciliation timeout),
//     spread over the period, as Argo CD's periodic refresh does. An
//     Application deleted with Argo CD's resources finalizer has its VM
//     deleted from the cluster, then the finalizer removed, by as many
//     workers as Argo CD's operation processors; one deleted without it
//     leaves the VM. Both are counted.
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
	// deleted are the Applications seen deleted (or being deleted), and
	// created counts the Applications created per ApplicationSet.
	deleted map[string]bool
	created map[string]int
	// removals are the Applications being deleted with the resources
	// finalizer whose VM is still to remove, by name: worked through by
	// argoOperationProcessors workers, as Argo CD's application
	// controller does, not one at a time in the informer's handler.
	removals workqueue.TypedRateLimitingInterface[string]
}

// argoOperationProcessors is Argo CD's application controller's default
// number of operation processors (--operation-processors).
const argoOperationProcessors = 10

func newArgoStandIn(h *harness) *argoStandIn {
	return &argoStandIn{
		h: h,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "bench-argocd-applicationsets"}),
		apps:    map[string]*argov1alpha1.Application{},
		deleted: map[string]bool{},
		created: map[string]int{},
		removals: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "bench-argocd-removals"}),
	}
}

// appSetChanged is the ApplicationSet watch.
func (a *argoStandIn) appSetChanged(name string) { a.queue.Add(name) }

func (a *argoStandIn) start(ctx context.Context, workers int, refresh time.Duration) {
	a.work(ctx, a.queue, workers, a.sync)
	a.work(ctx, a.removals, argoOperationProcessors, a.remove)
	go func() {
		<-ctx.Done()
		a.queue.ShutDown()
		a.removals.ShutDown()
	}()
	if refresh > 0 {
		go a.refreshLoop(ctx, refresh)
	}
}

// work runs n workers taking names off q, each handled by fn; a name whose
// fn fails is retried with backoff.
func (a *argoStandIn) work(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], n int, fn func(context.Context, string) error) {
	for range n {
		go func() {
			for {
				name, shutdown := q.Get()
				if shutdown {
					return
				}
				if err := fn(ctx, name); err != nil && ctx.Err() == nil {
					a.h.logf("argo stand-in: %v", err)
					q.AddRateLimited(name)
				} else {
					q.Forget(name)
				}
				q.Done(name)
			}
		}()
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
	var errs []error
	for _, cluster := range listTargets(appSet) {
		if err := a.ensureApplication(ctx, appSet, cluster); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("ApplicationSet %s: %v", name, errs)
	}
	return nil
}

// listTargets returns the clusters an ApplicationSet's list generator
// names (FleetVM's elements carry "name").
func listTargets(appSet *argov1alpha1.ApplicationSet) []string {
	var out []string
	for _, g := range appSet.Spec.Generators {
		if g.List == nil {
			continue
		}
		for _, e := range g.List.Elements {
			var el struct {
				Name string `json:"name"`
			}
			if json.Unmarshal(e.Raw, &el) == nil && el.Name != "" {
				out = append(out, el.Name)
			}
		}
	}
	return out
}

// appChanged is the Application watch: an Application being deleted is
// counted and, with Argo CD's resources finalizer, its VM is deleted from
// the cluster and the finalizer removed, as Argo CD's application
// controller does.
func (a *argoStandIn) appChanged(ctx context.Context, app *argov1alpha1.Application, gone bool) {
	if app.DeletionTimestamp == nil && !gone {
		return
	}
	a.mu.Lock()
	a.deleted[app.Name] = true
	delete(a.apps, app.Name)
	a.mu.Unlock()
	if gone || !slices.Contains(app.Finalizers, argov1alpha1.ResourcesFinalizerName) {
		return
	}
	a.removals.Add(app.Name)
}

// remove deletes the VM of an Application being deleted with the
// resources finalizer from its cluster, then removes the finalizer.
func (a *argoStandIn) remove(ctx context.Context, name string) error {
	app := &argov1alpha1.Application{}
	if err := a.h.cache.Get(ctx, client.ObjectKey{Namespace: argoNS, Name: name}, app); err != nil {
		return client.IgnoreNotFound(err)
	}
	if app.DeletionTimestamp == nil || !slices.Contains(app.Finalizers, argov1alpha1.ResourcesFinalizerName) {
		return nil
	}
	if err := a.h.agents.undeliver(ctx, app); err != nil {
		return fmt.Errorf("delete the VM of %s: %w", app.Name, err)
	}
	patch := client.MergeFrom(app.DeepCopy())
	app.Finalizers = slices.DeleteFunc(app.Finalizers, func(f string) bool { return f == argov1alpha1.ResourcesFinalizerName })
	a.writes.Add(1)
	if err := a.h.gen.Patch(ctx, app, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("remove the finalizer of %s: %w", app.Name, err)
	}
	return nil
}

// deletedApplications is how many Applications were seen deleted.
func (a *argoStandIn) deletedApplications() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.deleted)
}

// createdPerApplicationSet counts the Applications created per
// ApplicationSet.
func (a *argoStandIn) createdPerApplicationSet() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]int, len(a.created))
	for k, v := range a.created {
		out[k] = v
	}
	return out
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
	a.created[appSet.Name]++
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
			if app := a.apps[a.order[i]]; app != nil {
				due = append(due, app)
			}
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
