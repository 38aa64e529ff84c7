package fleetvirtualmachine

import (
	"context"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	workv1 "open-cluster-management.io/api/work/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/argoapp"
	"github.com/fleetvm/fleetvm/pkg/consolelink"
	"github.com/fleetvm/fleetvm/pkg/controller/coalesce"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetdiskimage"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/delivery"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/move/runner"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/placement"
	"github.com/fleetvm/fleetvm/pkg/tenancy"
	"github.com/fleetvm/fleetvm/pkg/vmclaim"
	"github.com/fleetvm/fleetvm/pkg/write"
)

// SetupWithManager registers the controller. Objects in the Argo CD
// namespace are not owned through owner references (they live in another
// namespace): they carry labels naming their FleetVirtualMachine, and the
// watches map them back.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	byLabels := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		if key, ok := delivery.OwnerKey(obj); ok {
			return []reconcile.Request{{NamespacedName: key}}
		}
		return nil
	})
	// A candidate Placement's users: those that pick more clusters from
	// it, or every one not being deleted when it is deleted (the next one
	// recreates it).
	candidateUsers := func(ctx context.Context, p client.Object, deleted bool) []reconcile.Request {
		if !isCandidatePlacement(p) {
			return nil
		}
		if deleted {
			return r.fleetVMsMatching(ctx, "of a candidate Placement", p, client.MatchingFields{IndexStatusPlacement: p.GetName()})
		}
		return r.fleetVMsMatching(ctx, "picking from a candidate Placement", p, client.MatchingFields{IndexWantsCandidates: p.GetName()})
	}
	placements := handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, ownerOrUsers(ctx, e.Object, candidateUsers, false))
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, ownerOrUsers(ctx, e.ObjectNew, candidateUsers, false))
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(q, ownerOrUsers(ctx, e.Object, candidateUsers, true))
		},
	}
	r.load = placement.NewClusterLoad()
	r.arriving = placement.NewArriving()
	loads := handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.trackLoad(e.Object, false)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.trackLoad(e.ObjectNew, false)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.trackLoad(e.Object, true)
		},
	}
	// A score written after copies stopped arriving shows them
	// (placement.Arriving.Scored).
	scored := handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.arriving.Scored(e.Object.GetNamespace())
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if e.ObjectOld.GetResourceVersion() != e.ObjectNew.GetResourceVersion() {
				r.arriving.Scored(e.ObjectNew.GetNamespace())
			}
		},
	}
	inArgo := builder.WithPredicates(predicate.NewPredicateFuncs(func(obj client.Object) bool {
		return obj.GetNamespace() == r.Config.ArgoNamespace
	}))
	decisions := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
		name := obj.GetLabels()[clusterv1beta1.PlacementLabel]
		if name == "" {
			return nil
		}
		p := &clusterv1beta1.Placement{}
		if err := r.Client.Get(ctx, types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}, p); err != nil {
			return nil
		}
		reqs := ownerOrUsers(ctx, p, candidateUsers, false)
		if isCandidatePlacement(p) {
			// A move waiting for the scheduler to add a cluster it asked
			// for wakes with the new decision too.
			reqs = append(reqs, runner.FleetVMsNotStarted(ctx, r.Client)...)
		}
		return reqs
	})
	// A report wakes the FleetVirtualMachine it names, and those that
	// claim a VM it lists (a copy left by another FleetVirtualMachine).
	reports := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, obj client.Object) []reconcile.Request {
		report, ok := obj.(*fleetv1alpha1.VMReport)
		if !ok {
			return nil
		}
		reqs := []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: report.Spec.FleetVM.Namespace, Name: report.Spec.FleetVM.Name}}}
		for _, vm := range report.Spec.VMs {
			// The one of the VM's name, which IndexVM leaves out (it
			// most often delivers it: the report's own FleetVM), and
			// those whose template names the VM.
			named := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: vm.Namespace, Name: vm.Name}}
			for _, req := range append(r.fleetVMsMatching(ctx, "claiming a reported VM", obj,
				client.MatchingFields{vmclaim.IndexVM: vm.Namespace + "/" + vm.Name}), named) {
				if !slices.Contains(reqs, req) {
					reqs = append(reqs, req)
				}
			}
		}
		return reqs
	})
	workers := r.MaxConcurrentReconciles
	if workers == 0 {
		workers = 4
	}
	r.alarms = newAlarms(r.Clock)
	if err := r.observeShapes(mgr); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		WatchesRawSource(source.Channel(r.alarms.events, &handler.EnqueueRequestForObject{})).
		Named("fleetvirtualmachine").
		For(&fleetv1alpha1.FleetVirtualMachine{}).
		Watches(&fleetv1alpha1.FleetVirtualMachine{}, loads).
		Watches(&fleetv1alpha1.FleetVirtualMachine{}, handler.EnqueueRequestsFromMapFunc(r.fleetVMsOverShapeLimit),
			builder.WithPredicates(shapeMayFreeUp())).
		Watches(&clusterv1beta1.Placement{}, placements, inArgo).
		Watches(&argoapp.ApplicationSet{}, coalesce.Creates(byLabels, Coalesce), inArgo).
		Watches(&argoapp.Application{}, coalesce.Creates(byLabels, Coalesce), inArgo, builder.WithPredicates(applicationChanged())).
		Watches(&clusterv1beta1.PlacementDecision{}, decisions, inArgo).
		Watches(&fleetv1alpha1.VMReport{}, coalesce.Creates(reports, Coalesce)).
		Watches(&fleetv1alpha1.FleetVirtualMachineMove{}, handler.EnqueueRequestsFromMapFunc(runner.FleetVMOf)).
		// A Cold move's export feedback.
		Watches(&workv1.ManifestWork{}, byLabels, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return runner.WorkKey(o) != "" }))).
		Watches(&fleetv1alpha1.FleetDiskImage{}, handler.EnqueueRequestsFromMapFunc(r.fleetVMsUsingImage)).
		Watches(&clusterv1.ManagedCluster{}, handler.EnqueueRequestsFromMapFunc(r.fleetVMsOnCluster),
			builder.WithPredicates(clusterChanged())).
		Watches(&clusterv1alpha1.AddOnPlacementScore{}, handler.EnqueueRequestsFromMapFunc(r.fleetVMsWaitingForClusters),
			builder.WithPredicates(r.scoresChanged())).
		Watches(&clusterv1alpha1.AddOnPlacementScore{}, scored).
		Watches(&clusterv1beta2.ManagedClusterSet{}, handler.EnqueueRequestsFromMapFunc(r.fleetVMsOfSet)).
		Watches(&clusterv1beta2.ManagedClusterSetBinding{}, handler.EnqueueRequestsFromMapFunc(r.fleetVMsOfBinding)).
		Watches(tenancy.NewAppProject(), handler.EnqueueRequestsFromMapFunc(r.fleetVMsOfProject), inArgo).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.allFleetVMs), builder.WithPredicates(r.argoSettingsChanged())).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(write.Requeue(r))
}

// Coalesce is how long the creation of an ApplicationSet, Application or
// VM report waits before it wakes its FleetVirtualMachine. A rollout
// creates one of each per cluster within moments of each other: a
// reconcile for each would write a status for each step (Delivered on 1
// of 3 clusters, then 2, ...), and every status write is work for the API
// server. Later changes of these objects (a VM stopping, an Application
// out of sync) wake the FleetVirtualMachine at once.
const Coalesce = time.Second

// ownerOrUsers maps a Placement to its FleetVirtualMachine, or a
// candidate Placement to its users.
func ownerOrUsers(ctx context.Context, p client.Object, users func(context.Context, client.Object, bool) []reconcile.Request, deleted bool) []reconcile.Request {
	if key, ok := delivery.OwnerKey(p); ok {
		return []reconcile.Request{{NamespacedName: key}}
	}
	return users(ctx, p, deleted)
}

func enqueue(q workqueue.TypedRateLimitingInterface[reconcile.Request], reqs []reconcile.Request) {
	for _, req := range reqs {
		q.Add(req)
	}
}

// trackLoad counts a FleetVirtualMachine on the clusters its status
// lists, and where its copies are arriving.
func (r *Reconciler) trackLoad(obj client.Object, deleted bool) {
	fvm, ok := obj.(*fleetv1alpha1.FleetVirtualMachine)
	if !ok {
		return
	}
	r.observeArrivals(fvm, deleted)
	if deleted {
		r.load.Set(client.ObjectKeyFromObject(fvm), nil)
		return
	}
	r.load.Set(client.ObjectKeyFromObject(fvm), statusClusters(fvm))
}

// fleetVMsMatching lists the FleetVirtualMachines opts select (an index,
// a namespace) as reconcile requests; what names the lookup in the log.
func (r *Reconciler) fleetVMsMatching(ctx context.Context, what string, obj client.Object, opts ...client.ListOption) []reconcile.Request {
	var list fleetv1alpha1.FleetVirtualMachineList
	// Names only: read-only and shallow.
	if err := r.Client.List(ctx, &list, append(opts, client.UnsafeDisableDeepCopy)...); err != nil {
		log.FromContext(ctx).Error(err, "list FleetVirtualMachines "+what, "object", klog.KObj(obj))
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// fleetVMsOnCluster maps a ManagedCluster to the FleetVirtualMachines whose
// status lists it, through the status index, and to those waiting for
// clusters (its labels or availability may change why it is left out).
func (r *Reconciler) fleetVMsOnCluster(ctx context.Context, obj client.Object) []reconcile.Request {
	return append(r.fleetVMsMatching(ctx, "on a cluster", obj, client.MatchingFields{IndexStatusCluster: obj.GetName()}),
		r.fleetVMsWaitingForClusters(ctx, obj)...)
}

// fleetVMsOfSet maps a ManagedClusterSet to the FleetVirtualMachines that
// select from it: a changed selector changes which clusters they want.
func (r *Reconciler) fleetVMsOfSet(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.fleetVMsMatching(ctx, "of a cluster set", obj, client.MatchingFields{IndexClusterSet: obj.GetName()})
}

// fleetVMsOfBinding maps a ManagedClusterSetBinding to the
// FleetVirtualMachines of its namespace that select from its set: a
// binding made or removed changes which clusters they may use.
func (r *Reconciler) fleetVMsOfBinding(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.fleetVMsMatching(ctx, "of a cluster set binding", obj,
		client.InNamespace(obj.GetNamespace()), client.MatchingFields{IndexClusterSet: obj.GetName()})
}

// fleetVMsOfProject maps an AppProject to the FleetVirtualMachines whose
// Applications run under it: one made, changed or deleted by hand changes
// what they may deliver.
func (r *Reconciler) fleetVMsOfProject(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.fleetVMsMatching(ctx, "of an AppProject", obj, client.MatchingFields{IndexProject: obj.GetName()})
}

// fleetVMsUsingImage maps a FleetDiskImage to the FleetVirtualMachines
// that list it.
func (r *Reconciler) fleetVMsUsingImage(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.fleetVMsMatching(ctx, "using a disk image", obj, client.InNamespace(obj.GetNamespace()),
		client.MatchingFields{fleetdiskimage.IndexDiskImage: client.ObjectKeyFromObject(obj).String()})
}

// applicationChanged drops the Application updates that only renew
// status.reconciledAt: Argo CD writes it on every periodic reconciliation
// (every 3 minutes by default), which would reconcile every
// FleetVirtualMachine about once a minute with nothing to do.
func applicationChanged() predicate.Predicate {
	return updateChanged(func(o, n *argoapp.Application) bool { return !sameButReconciledAt(o, n) })
}

// updateChanged passes every create, delete and generic event, and an
// update when changed says the two copies differ in what the hub reads
// (or when either is not a T).
func updateChanged[T client.Object](changed func(before, after T) bool) predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(T)
			n, ok2 := e.ObjectNew.(T)
			if !ok1 || !ok2 {
				return true
			}
			return changed(o, n)
		},
	}
}

// sameButReconciledAt says whether two copies of an Application differ in
// nothing the hub reads: only in their resource version, generation,
// managed fields, or in what the hub's view of an Application leaves out
// (argoapp), such as the time Argo CD last reconciled it. The Application
// CRD has no status subresource, so a status write bumps the generation
// too.
func sameButReconciledAt(a, b *argoapp.Application) bool {
	ma, mb := a.ObjectMeta, b.ObjectMeta
	ma.ResourceVersion, mb.ResourceVersion = "", ""
	ma.Generation, mb.Generation = 0, 0
	ma.ManagedFields, mb.ManagedFields = nil, nil
	return equality.Semantic.DeepEqual(ma, mb) && sameHeldLabels(a, b) && a.Spec == b.Spec && equality.Semantic.DeepEqual(a.Status, b.Status)
}

// sameHeldLabels says whether two copies of an Application hold the same
// values of the labels the hub reads; a cached copy holds them outside
// its metadata (argoapp.Trim).
func sameHeldLabels(a, b *argoapp.Application) bool {
	for _, key := range argoapp.HeldLabels {
		if a.Label(key) != b.Label(key) {
			return false
		}
	}
	return true
}

// clusterChanged passes ManagedCluster updates that change what the status
// shows: availability, labels or the console URL it claims.
func clusterChanged() predicate.Predicate {
	return updateChanged(func(o, n *clusterv1.ManagedCluster) bool {
		return availability(o) != availability(n) || !equality.Semantic.DeepEqual(o.Labels, n.Labels) || Draining(o) != Draining(n) ||
			consolelink.Console(o.Status.ClusterClaims) != consolelink.Console(n.Status.ClusterClaims)
	})
}

func availability(mc *clusterv1.ManagedCluster) metav1.ConditionStatus {
	if c := meta.FindStatusCondition(mc.Status.Conditions, clusterv1.ManagedClusterConditionAvailable); c != nil {
		return c.Status
	}
	return metav1.ConditionUnknown
}
