// Package shapes tells every managed cluster which VM shapes the fleet asks
// for: a ConfigMap fleetvm-shapes in each cluster namespace on the hub, from
// which the cluster's agent scores how many VMs of each shape fit.
package shapes

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/capacity"
	"github.com/fleetvm/fleetvm/pkg/controller/coalesce"
	"github.com/fleetvm/fleetvm/pkg/write"
)

// fleetKey is the single work item: the shapes are one fleet-wide set.
var fleetKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "fleet"}}

// Reconciler writes the fleetvm-shapes ConfigMaps.
type Reconciler struct {
	Client client.Client
	// ShapesPerNamespace bounds the distinct shapes one namespace adds
	// (capacity.DefaultShapesPerNamespace when 0); the FleetVirtualMachine
	// controller must be given the same.
	ShapesPerNamespace int

	// shapes holds each FleetVirtualMachine's shape for its generation,
	// its template decoded once, and counts the shapes per namespace; the
	// watch's handler writes it, the reconcile reads it (it locks).
	shapes capacity.ShapeCache
	// observing: the watch of SetupWithManager records every
	// FleetVirtualMachine's shape in shapes (fleetShapes).
	observing bool

	// The controller has one work item, so one reconcile runs at a time
	// and these need no lock.
	//
	// verified maps each cluster namespace to the resourceVersion of its
	// ConfigMap as last found or written holding verifiedData: while the
	// cache shows that same version and the data is unchanged, there is
	// nothing to compare. An edit makes a new version.
	verified     map[string]string
	verifiedData string
}

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch

// Reconcile recomputes the fleet's shapes and writes every cluster's
// ConfigMap whose content differs; the cost is reads from the cache, and a
// write only where something changed.
func (r *Reconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	shapes, err := r.fleetShapes(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	// A FleetVirtualMachine over its namespace's limit says so in its
	// status (the FleetVirtualMachine controller); its shape is not here.
	data, err := capacity.EncodeShapes(shapes)
	if err != nil {
		// The ConfigMaps keep their last content: no shape replaces another.
		return ctrl.Result{}, err
	}
	if r.verified == nil || data != r.verifiedData {
		r.verified, r.verifiedData = map[string]string{}, data
	}
	var clusters clusterv1.ManagedClusterList
	if err := r.Client.List(ctx, &clusters, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("list ManagedClusters: %w", err)
	}
	// One list of the ConfigMaps FleetVM made, not one read per cluster.
	var cms corev1.ConfigMapList
	if err := r.Client.List(ctx, &cms, client.MatchingLabels{fleetv1alpha1.LabelPartOf: fleetv1alpha1.PartOfValue},
		client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("list ConfigMaps: %w", err)
	}
	have := map[string]*corev1.ConfigMap{}
	for i := range cms.Items {
		if cms.Items[i].Name == fleetv1alpha1.ShapesConfigMapName {
			have[cms.Items[i].Namespace] = &cms.Items[i]
		}
	}
	var errs []error
	for _, mc := range clusters.Items {
		if err := r.ensure(ctx, mc.Name, data, have[mc.Name]); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return ctrl.Result{}, fmt.Errorf("write %d of %d shape ConfigMaps: %v", len(errs), len(clusters.Items), errs[0])
	}
	return ctrl.Result{}, nil
}

// fleetShapes returns capacity.Shapes of every FleetVirtualMachine. Once
// the watch has recorded each one's shape as the informer delivers it
// (SetupWithManager), it reads them from the counts, and lists only the
// namespaces that ask for more shapes than their limit, so a pass costs
// the shapes, not the fleet: a burst of 10,000 FleetVirtualMachines makes
// hundreds of passes. Without the watch (a Reconciler called directly) it
// lists them all.
func (r *Reconciler) fleetShapes(ctx context.Context) ([]capacity.Shape, error) {
	if !r.observing {
		// Read only: the cache's objects are not copied.
		var fvms fleetv1alpha1.FleetVirtualMachineList
		if err := r.Client.List(ctx, &fvms, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("list FleetVirtualMachines: %w", err)
		}
		listed := make(map[types.NamespacedName]bool, len(fvms.Items))
		for i := range fvms.Items {
			listed[client.ObjectKeyFromObject(&fvms.Items[i])] = true
		}
		r.shapes.Retain(listed)
		return capacity.ShapesOf(fvms.Items, r.ShapesPerNamespace, r.shapes.Of).Shapes, nil
	}
	shapes, over := r.shapes.Fleet(r.ShapesPerNamespace)
	for _, ns := range over {
		var fvms fleetv1alpha1.FleetVirtualMachineList
		if err := r.Client.List(ctx, &fvms, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("list FleetVirtualMachines in %s: %w", ns, err)
		}
		// Lookup, not Of: the watch alone records and forgets, so a
		// FleetVirtualMachine deleted since this list is not put back.
		shapes = append(shapes, capacity.ShapesOf(fvms.Items, r.ShapesPerNamespace, r.shapes.Lookup).Shapes...)
	}
	return shapes, nil
}

// ensure writes one cluster's ConfigMap; cached is the cache's copy (nil:
// none), which it does not change.
func (r *Reconciler) ensure(ctx context.Context, namespace, data string, cached *corev1.ConfigMap) error {
	if cached != nil && cached.ResourceVersion == r.verified[namespace] {
		return nil
	}
	want := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: fleetv1alpha1.ShapesConfigMapName, Namespace: namespace,
			Labels: map[string]string{fleetv1alpha1.LabelPartOf: fleetv1alpha1.PartOfValue}},
		Data: map[string]string{fleetv1alpha1.ShapesConfigMapKey: data},
	}
	var got *corev1.ConfigMap
	if cached != nil {
		got = cached.DeepCopy() // Ensure leaves the API server's copy in it
	}
	out, err := write.Ensure(ctx, r.Client, want, got)
	switch {
	case apierrors.IsNotFound(err): // on create: the cluster namespace is not there (yet)
		return nil
	case err != nil:
		return fmt.Errorf("write ConfigMap %s: %w", klog.KObj(want), err)
	case out == write.Created:
		r.verified[namespace] = want.ResourceVersion
	default:
		r.verified[namespace] = got.ResourceVersion
	}
	return nil
}

// Coalesce is how long the fleet-wide work item waits after the event
// that queued it: the FleetVirtualMachines of a burst make one pass over
// the fleet every Coalesce, not one pass each (each pass reads every
// FleetVirtualMachine). The agents debounce what they read for longer.
const Coalesce = time.Second

// SetupWithManager registers the controller: any FleetVirtualMachine spec
// change or deletion, any new cluster, any edit of a shapes ConfigMap
// queues the one fleet-wide work item, Coalesce later. The
// FleetVirtualMachines' events also record each one's shape (shapeWatch),
// before they queue the item, and the controller starts once the informer's
// first list is recorded.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	all := coalesce.All(handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{fleetKey}
	}), Coalesce)
	shapesOnly := builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetName() == fleetv1alpha1.ShapesConfigMapName
	}))
	inf, err := mgr.GetCache().GetInformer(context.Background(), &fleetv1alpha1.FleetVirtualMachine{})
	if err != nil {
		return fmt.Errorf("FleetVirtualMachine informer: %w", err)
	}
	r.observing = true
	return ctrl.NewControllerManagedBy(mgr).
		Named("vmshapes").
		WatchesRawSource(&shapeWatch{informer: inf, shapes: &r.shapes, registered: make(chan toolscache.ResourceEventHandlerRegistration, 1)}).
		Watches(&clusterv1.ManagedCluster{}, all, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(_ event.UpdateEvent) bool { return false },
		})).
		Watches(&corev1.ConfigMap{}, all, shapesOnly).
		Complete(write.Requeue(r))
}

// shapeWatch is the controller's source of FleetVirtualMachine events: it
// records each one's shape in shapes as the informer delivers it (a spec
// change makes a new generation, and so does the start of a deletion)
// and forgets the deleted, then queues the fleet-wide item Coalesce
// later. One handler does both, in that order, so a pass the event
// queued finds it recorded; WaitForSync holds the controller's workers
// until the informer's first list is recorded, so no pass reads a
// partial fleet.
type shapeWatch struct {
	informer   crcache.Informer
	shapes     *capacity.ShapeCache
	registered chan toolscache.ResourceEventHandlerRegistration
}

// Start registers the handler; it does not block.
func (w *shapeWatch) Start(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	reg, err := w.informer.AddEventHandler(w.shapes.EventHandler(func() { q.AddAfter(fleetKey, Coalesce) }))
	if err != nil {
		return fmt.Errorf("watch FleetVirtualMachine shapes: %w", err)
	}
	w.registered <- reg
	return nil
}

// WaitForSync returns once the handler has recorded the informer's first
// list.
func (w *shapeWatch) WaitForSync(ctx context.Context) error {
	var reg toolscache.ResourceEventHandlerRegistration
	select {
	case reg = <-w.registered:
	case <-ctx.Done():
		return fmt.Errorf("FleetVirtualMachine shapes: %w", ctx.Err())
	}
	if !toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return fmt.Errorf("FleetVirtualMachine shapes: the informer's first list was not recorded: %w", ctx.Err())
	}
	return nil
}

func (w *shapeWatch) String() string { return "FleetVirtualMachine shapes" }
