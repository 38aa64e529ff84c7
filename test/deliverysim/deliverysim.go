// Package deliverysim stands in for Argo CD in integration tests that run
// no Argo CD controllers. It is not Argo CD and does not pretend to be:
//
//   - ApplicationSets are rendered by Argo CD's own generator and template
//     code (package appsetsim), and their Applications created or updated;
//   - each Application's Helm source is rendered by Helm's own engine from
//     the chart in this repository (the fleetvm-vm chart that carries inline
//     templates) and applied to its destination cluster by server-side
//     apply;
//   - the Application's status is set to Synced and Healthy once applied
//     (no diffing, no health assessment);
//   - deleting an Application that carries Argo CD's resources finalizer
//     deletes what it rendered, then removes the finalizer; as Argo CD's
//     finalizeApplicationDeletion, only while its AppProject exists:
//     without it the Application gets a DeletionError condition ("error
//     getting app project") and stays;
//   - as Argo CD, a destination needs a cluster secret in the Argo CD
//     namespace (label argocd.argoproj.io/secret-type=cluster, data.name
//     the destination's name): without one the Application gets Argo CD's
//     InvalidSpecError condition, and deleting it drops its finalizers and
//     leaves the cluster's objects in place (Argo CD's
//     finalizeApplicationDeletion does the same when the destination
//     cluster cannot be found);
//   - as Argo CD's sync, every object is checked against the Application's
//     AppProject (it must exist; the kind against its whitelists; a
//     namespaced object's namespace against its destinations), and a sync
//     it refuses fails with Argo CD's messages; it creates no namespace: an
//     apply into a missing one fails and is retried.
//
// Git sources are not supported: the Application's status says so. The local
// fleet (make run) and its end-to-end test run the real Argo CD.
package deliverysim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"time"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/argoproj/argo-cd/v3/util/glob"
	"github.com/argoproj/gitops-engine/pkg/health"
	synccommon "github.com/argoproj/gitops-engine/pkg/sync/common"
	"github.com/go-logr/logr"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/strvals"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/fleetvm/fleetvm/test/appsetsim"
)

// FieldManager is the server-side apply field manager on the clusters.
const FieldManager = "fleetvm-deliverysim"

// Options configure the stand-in.
type Options struct {
	// Hub is the hub API server; Scheme must know Argo CD's types.
	Hub    *rest.Config
	Scheme *runtime.Scheme
	// Namespace is the Argo CD namespace.
	Namespace string
	// ChartRoot is the folder chart paths are relative to (the repository
	// root): a source's path, or charts/<chart> under deploy/ for a chart
	// from a Helm repository.
	ChartRoot string
	// Clusters are the destination clusters by name.
	Clusters map[string]client.Client
	Logger   logr.Logger
}

// Run runs the stand-in until ctx ends.
func Run(ctx context.Context, opts Options) error {
	mgr, err := ctrl.NewManager(opts.Hub, ctrl.Options{
		Scheme:                 opts.Scheme,
		Logger:                 opts.Logger,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{opts.Namespace: {}}},
	})
	if err != nil {
		return err
	}
	direct, err := client.New(opts.Hub, client.Options{Scheme: opts.Scheme})
	if err != nil {
		return err
	}
	sim, err := appsetsim.New(ctx, opts.Hub, direct, opts.Namespace)
	if err != nil {
		return err
	}
	if err := ctrl.NewControllerManagedBy(mgr).Named("deliverysim-appset").
		For(&argov1alpha1.ApplicationSet{}).
		Complete(&appSets{sim: sim}); err != nil {
		return err
	}
	// A cluster secret that comes or goes changes what Argo CD can do with
	// the Applications of that destination.
	byDestination := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		secret, ok := o.(*corev1.Secret)
		if !ok || secret.Labels["argocd.argoproj.io/secret-type"] != "cluster" {
			return nil
		}
		var list argov1alpha1.ApplicationList
		if err := mgr.GetClient().List(ctx, &list, client.InNamespace(opts.Namespace)); err != nil {
			return nil
		}
		var reqs []reconcile.Request
		for _, app := range list.Items {
			if app.Spec.Destination.Name == string(secret.Data["name"]) {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&app)})
			}
		}
		return reqs
	})
	if err := ctrl.NewControllerManagedBy(mgr).Named("deliverysim-app").
		For(&argov1alpha1.Application{}).
		Watches(&corev1.Secret{}, byDestination).
		Complete(&apps{client: mgr.GetClient(), opts: opts}); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// appSets renders ApplicationSets as the applicationset-controller does
// (policy create-update).
type appSets struct{ sim *appsetsim.Sim }

func (a *appSets) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if _, err := a.sim.Sync(ctx, req.NamespacedName); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

// apps applies each Application's rendered manifests to its cluster.
type apps struct {
	client client.Client
	opts   Options
}

func (a *apps) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	app := &argov1alpha1.Application{}
	if err := a.client.Get(ctx, req.NamespacedName, app); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	cluster, ok := a.opts.Clusters[app.Spec.Destination.Name]
	if !ok {
		return ctrl.Result{}, a.setStatus(ctx, app, argov1alpha1.SyncStatusCodeUnknown, "Unknown",
			fmt.Sprintf("cluster %q is not known to the delivery stand-in", app.Spec.Destination.Name))
	}
	known, err := a.clusterSecretExists(ctx, app.Spec.Destination.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !known {
		if app.DeletionTimestamp != nil {
			// Argo CD: "Unable to get destination cluster" → the
			// finalizers go, the resources stay.
			patch := client.MergeFrom(app.DeepCopy())
			for _, f := range resourceFinalizers(app) {
				controllerutil.RemoveFinalizer(app, f)
			}
			return ctrl.Result{}, a.client.Patch(ctx, app, patch)
		}
		return ctrl.Result{}, a.setInvalid(ctx, app, fmt.Sprintf(
			"application destination spec for %s is invalid: unable to find destination server: there are no clusters with this name: %s",
			app.Name, app.Spec.Destination.Name))
	}
	objs, renderErr := a.render(app)

	if app.DeletionTimestamp != nil {
		finalizers := resourceFinalizers(app)
		if len(finalizers) == 0 {
			return ctrl.Result{}, nil
		}
		if renderErr != nil {
			return ctrl.Result{}, renderErr
		}
		if err := a.client.Get(ctx, client.ObjectKey{Namespace: a.opts.Namespace, Name: app.Spec.Project}, &argov1alpha1.AppProject{}); err != nil {
			if !apierrors.IsNotFound(err) {
				return ctrl.Result{}, err
			}
			// Argo CD retries on its own resync; so does the stand-in.
			return ctrl.Result{RequeueAfter: projectRetry}, a.setCondition(ctx, app, argov1alpha1.ApplicationConditionDeletionError,
				fmt.Sprintf("error getting app project %q: appproject.argoproj.io %q not found", app.Spec.Project, app.Spec.Project))
		}
		for _, o := range objs {
			if err := cluster.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
				return ctrl.Result{}, fmt.Errorf("delete %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
			}
		}
		patch := client.MergeFrom(app.DeepCopy())
		for _, f := range finalizers {
			controllerutil.RemoveFinalizer(app, f)
		}
		return ctrl.Result{}, a.client.Patch(ctx, app, patch)
	}

	if renderErr != nil {
		return ctrl.Result{}, a.setStatus(ctx, app, argov1alpha1.SyncStatusCodeUnknown, "Unknown", renderErr.Error())
	}
	proj := &argov1alpha1.AppProject{}
	if err := a.client.Get(ctx, client.ObjectKey{Namespace: a.opts.Namespace, Name: app.Spec.Project}, proj); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, a.setInvalid(ctx, app, fmt.Sprintf("Application referencing project %s which does not exist", app.Spec.Project))
		}
		return ctrl.Result{}, err
	}
	if denied, err := permitted(cluster, proj, objs); err != nil {
		return ctrl.Result{}, err
	} else if len(denied) > 0 {
		return ctrl.Result{}, a.setSyncFailed(ctx, app, denied)
	}
	for _, o := range objs {
		if err := cluster.Patch(ctx, o, client.Apply, client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
			return ctrl.Result{}, errors.Join(
				fmt.Errorf("apply %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err),
				a.setStatus(ctx, app, argov1alpha1.SyncStatusCodeOutOfSync, "Degraded", err.Error()))
		}
	}
	return ctrl.Result{}, a.setStatus(ctx, app, argov1alpha1.SyncStatusCodeSynced, "Healthy", "")
}

// render renders the Application's Helm source with Helm's engine.
func (a *apps) render(app *argov1alpha1.Application) ([]*unstructured.Unstructured, error) {
	src := app.Spec.Source
	if src == nil || src.Helm == nil {
		return nil, errors.New("the delivery stand-in renders only Helm sources (inline templates); git sources need the real Argo CD")
	}
	dir := src.Path
	if dir == "" {
		dir = filepath.Join("deploy", "charts", src.Chart)
	}
	chart, err := loader.Load(filepath.Join(a.opts.ChartRoot, dir))
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", dir, err)
	}
	values := map[string]any{}
	if src.Helm.ValuesObject != nil && len(src.Helm.ValuesObject.Raw) > 0 {
		if err := json.Unmarshal(src.Helm.ValuesObject.Raw, &values); err != nil {
			return nil, fmt.Errorf("decode valuesObject: %w", err)
		}
	}
	for _, p := range src.Helm.Parameters {
		parse := strvals.ParseInto
		if p.ForceString {
			parse = strvals.ParseIntoString
		}
		if err := parse(p.Name+"="+p.Value, values); err != nil {
			return nil, fmt.Errorf("helm parameter %s: %w", p.Name, err)
		}
	}
	namespace := app.Spec.Destination.Namespace
	release := src.Helm.ReleaseName
	if release == "" {
		release = app.Name
	}
	rv, err := chartutil.ToRenderValues(chart, values, chartutil.ReleaseOptions{Name: release, Namespace: namespace}, nil)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(chart, rv)
	if err != nil {
		return nil, fmt.Errorf("render chart %s: %w", dir, err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []*unstructured.Unstructured
	for _, name := range names {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewBufferString(files[name]), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("decode %s: %w", name, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			if u.GetNamespace() == "" {
				u.SetNamespace(namespace)
			}
			out = append(out, u)
		}
	}
	return out, nil
}

// permitted checks the objects as Argo CD's sync does against the
// Application's AppProject: the kind (namespaced whitelist, cluster-scoped
// whitelist) and each namespaced object's namespace (the destinations).
// It returns Argo CD's message for each object refused.
func permitted(cluster client.Client, proj *argov1alpha1.AppProject, objs []*unstructured.Unstructured) ([]string, error) {
	var denied []string
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		mapping, err := cluster.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, err
		}
		namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace
		if !proj.IsGroupKindPermitted(gvk.GroupKind(), namespaced) {
			denied = append(denied, fmt.Sprintf("resource %s:%s is not permitted in project %s", gvk.Group, gvk.Kind, proj.Name))
			continue
		}
		if !namespaced {
			continue
		}
		ok := false
		for _, d := range proj.Spec.Destinations {
			ok = ok || glob.Match(d.Namespace, o.GetNamespace())
		}
		if !ok {
			denied = append(denied, fmt.Sprintf("namespace %v is not permitted in project '%s'", o.GetNamespace(), proj.Name))
		}
	}
	return denied, nil
}

// setSyncFailed records a sync Argo CD refused, as its application
// controller does: the operation failed, with a result per resource.
func (a *apps) setSyncFailed(ctx context.Context, app *argov1alpha1.Application, denied []string) error {
	if op := app.Status.OperationState; op != nil && op.Phase == synccommon.OperationFailed && app.Status.Sync.Status == argov1alpha1.SyncStatusCodeOutOfSync {
		return nil
	}
	patch := client.MergeFrom(app.DeepCopy())
	result := &argov1alpha1.SyncOperationResult{}
	for _, msg := range denied {
		result.Resources = append(result.Resources, &argov1alpha1.ResourceResult{Status: synccommon.ResultCodeSyncFailed, Message: msg})
	}
	app.Status.Sync.Status = argov1alpha1.SyncStatusCodeOutOfSync
	app.Status.Health.Status = health.HealthStatusMissing
	app.Status.OperationState = &argov1alpha1.OperationState{
		Operation:  argov1alpha1.Operation{Sync: &argov1alpha1.SyncOperation{}},
		Phase:      synccommon.OperationFailed,
		Message:    "one or more synchronization tasks are not valid",
		SyncResult: result,
		StartedAt:  metav1.Now(),
	}
	return a.client.Patch(ctx, app, patch)
}

// clusterSecretExists tells whether Argo CD would find the destination: a
// cluster secret whose data.name is it.
func (a *apps) clusterSecretExists(ctx context.Context, name string) (bool, error) {
	var secrets corev1.SecretList
	if err := a.client.List(ctx, &secrets, client.InNamespace(a.opts.Namespace),
		client.MatchingLabels{"argocd.argoproj.io/secret-type": "cluster"}); err != nil {
		return false, err
	}
	for _, s := range secrets.Items {
		if string(s.Data["name"]) == name || s.StringData["name"] == name {
			return true, nil
		}
	}
	return false, nil
}

// projectRetry is how soon a deletion waiting for its AppProject is tried
// again.
const projectRetry = 2 * time.Second

// setCondition gives the Application one condition of Argo CD's.
func (a *apps) setCondition(ctx context.Context, app *argov1alpha1.Application, kind, message string) error {
	for _, c := range app.Status.Conditions {
		if c.Type == kind && c.Message == message {
			return nil
		}
	}
	patch := client.MergeFrom(app.DeepCopy())
	app.Status.Conditions = append(app.Status.Conditions, argov1alpha1.ApplicationCondition{Type: kind, Message: message})
	return a.client.Patch(ctx, app, patch)
}

// setInvalid gives the Application Argo CD's InvalidSpecError condition.
func (a *apps) setInvalid(ctx context.Context, app *argov1alpha1.Application, message string) error {
	for _, c := range app.Status.Conditions {
		if c.Type == argov1alpha1.ApplicationConditionInvalidSpecError && c.Message == message {
			return nil
		}
	}
	patch := client.MergeFrom(app.DeepCopy())
	app.Status.Sync.Status = argov1alpha1.SyncStatusCodeUnknown
	app.Status.Health.Status = health.HealthStatusUnknown
	app.Status.Conditions = []argov1alpha1.ApplicationCondition{{Type: argov1alpha1.ApplicationConditionInvalidSpecError, Message: message}}
	return a.client.Patch(ctx, app, patch)
}

// setStatus writes the Application's sync and health status when it
// changed, and clears an InvalidSpecError once the destination is found.
func (a *apps) setStatus(ctx context.Context, app *argov1alpha1.Application, sync argov1alpha1.SyncStatusCode, healthStatus, message string) error {
	if app.Status.Sync.Status == sync && string(app.Status.Health.Status) == healthStatus && app.Status.Health.Message == message && //nolint:staticcheck // see below
		len(app.Status.Conditions) == 0 {
		return nil
	}
	patch := client.MergeFrom(app.DeepCopy())
	app.Status.Sync.Status = sync
	app.Status.Health.Status = health.HealthStatusCode(healthStatus)
	app.Status.Health.Message = message //nolint:staticcheck // Argo CD still shows it.
	app.Status.Conditions = nil
	return a.client.Patch(ctx, app, patch)
}

// resourceFinalizers are the Argo CD finalizers that ask for the
// Application's resources to be deleted with it.
func resourceFinalizers(app *argov1alpha1.Application) []string {
	var out []string
	for _, f := range app.Finalizers {
		if f == argov1alpha1.ResourcesFinalizerName || strings.HasPrefix(f, argov1alpha1.ResourcesFinalizerName+"/") {
			out = append(out, f)
		}
	}
	return out
}
