package inventory

import (
	"context"
	"fmt"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/write"
)

// Reconciler keeps the cluster's ImageInventory on the hub in step with
// the VMs on the spoke.
type Reconciler struct {
	// Spoke reads VMs and DataVolumes (a cached client).
	Spoke client.Reader
	// Hub writes the ImageInventory in Namespace.
	Hub client.Client
	// Namespace is the cluster namespace on the hub (the cluster's name).
	Namespace string
	// Heartbeat is how often observedTime is refreshed when nothing
	// changed (default DefaultHeartbeat).
	Heartbeat time.Duration
	// Now returns the time (time.Now when nil).
	Now func() time.Time
}

// DefaultHeartbeat is how often an unchanged inventory is confirmed: one
// small write per cluster every five minutes.
const DefaultHeartbeat = 5 * time.Minute

// Reconcile recounts the images and writes the inventory if it changed.
func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	var vms kubevirtv1.VirtualMachineList
	if err := r.Spoke.List(ctx, &vms); err != nil {
		return reconcile.Result{}, fmt.Errorf("list VirtualMachines: %w", err)
	}
	lookup, err := r.dataVolumes(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	want := fleetv1alpha1.ImageInventorySpec{Images: Count(vms.Items, lookup)}
	if len(want.Images) == 0 {
		want.Images = nil
	}
	next, err := r.write(ctx, want)
	return reconcile.Result{RequeueAfter: next}, err
}

func (r *Reconciler) heartbeat() time.Duration {
	if r.Heartbeat > 0 {
		return r.Heartbeat
	}
	return DefaultHeartbeat
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// dataVolumes returns a lookup over the spoke's DataVolumes.
func (r *Reconciler) dataVolumes(ctx context.Context) (LookupDataVolume, error) {
	var dvs cdiv1beta1.DataVolumeList
	if err := r.Spoke.List(ctx, &dvs); err != nil {
		return nil, fmt.Errorf("list DataVolumes: %w", err)
	}
	byKey := make(map[types.NamespacedName]*cdiv1beta1.DataVolume, len(dvs.Items))
	for i := range dvs.Items {
		byKey[client.ObjectKeyFromObject(&dvs.Items[i])] = &dvs.Items[i]
	}
	return func(ns, name string) (*cdiv1beta1.DataVolume, bool) {
		dv, ok := byKey[types.NamespacedName{Namespace: ns, Name: name}]
		return dv, ok
	}, nil
}

func (r *Reconciler) labels() map[string]string {
	return map[string]string{fleetv1alpha1.LabelCluster: r.Namespace, fleetv1alpha1.LabelPartOf: fleetv1alpha1.PartOfValue}
}

// write creates or updates the inventory when its images changed or its
// observedTime is a heartbeat old, and returns when to confirm it next.
func (r *Reconciler) write(ctx context.Context, want fleetv1alpha1.ImageInventorySpec) (time.Duration, error) {
	now := r.now()
	want.ObservedTime = &metav1.Time{Time: now.Truncate(time.Second)}
	key := client.ObjectKey{Namespace: r.Namespace, Name: fleetv1alpha1.ImageInventoryName}
	got := &fleetv1alpha1.ImageInventory{}
	switch err := r.Hub.Get(ctx, key, got); {
	case apierrors.IsNotFound(err):
		got = nil
	case err != nil:
		return 0, fmt.Errorf("get ImageInventory %s: %w", key, err)
	default:
		labelsOK := true
		for k, v := range r.labels() {
			labelsOK = labelsOK && got.Labels[k] == v
		}
		if got.Spec.ObservedTime != nil {
			age := now.Sub(got.Spec.ObservedTime.Time)
			if labelsOK && apiequality.Semantic.DeepEqual(got.Spec.Images, want.Images) && age < r.heartbeat() {
				return r.heartbeat() - age, nil
			}
		}
	}
	inv := &fleetv1alpha1.ImageInventory{
		ObjectMeta: metav1.ObjectMeta{Namespace: r.Namespace, Name: fleetv1alpha1.ImageInventoryName, Labels: r.labels()},
		Spec:       want,
	}
	if _, err := write.Ensure(ctx, r.Hub, inv, got); err != nil {
		return 0, fmt.Errorf("write ImageInventory %s: %w", key, err)
	}
	return r.heartbeat(), nil
}

// SetupWithManager watches VMs and DataVolumes on the spoke (the
// manager's cache) and the inventory on the hub.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, hub cluster.Cluster) error {
	key := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: r.Namespace, Name: fleetv1alpha1.ImageInventoryName}}
	one := func(context.Context, client.Object) []reconcile.Request { return []reconcile.Request{key} }
	specChanged := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return !apiequality.Semantic.DeepEqual(specOf(e.ObjectOld), specOf(e.ObjectNew))
	}}
	err := ctrl.NewControllerManagedBy(mgr).
		Named("fleetvm-image-inventory").
		WatchesRawSource(source.Kind(mgr.GetCache(), client.Object(&kubevirtv1.VirtualMachine{}), handler.EnqueueRequestsFromMapFunc(one), specChanged)).
		WatchesRawSource(source.Kind(mgr.GetCache(), client.Object(&cdiv1beta1.DataVolume{}), handler.EnqueueRequestsFromMapFunc(one), specChanged)).
		WatchesRawSource(source.Kind(hub.GetCache(), client.Object(&fleetv1alpha1.ImageInventory{}), handler.EnqueueRequestsFromMapFunc(one),
			predicate.NewPredicateFuncs(func(o client.Object) bool {
				return o.GetNamespace() == r.Namespace && o.GetName() == fleetv1alpha1.ImageInventoryName
			}))).
		Complete(write.Requeue(r))
	if err != nil {
		return fmt.Errorf("set up image inventory controller: %w", err)
	}
	return nil
}

func specOf(o client.Object) any {
	switch o := o.(type) {
	case *kubevirtv1.VirtualMachine:
		return &o.Spec
	case *cdiv1beta1.DataVolume:
		return &o.Spec
	}
	return o
}
