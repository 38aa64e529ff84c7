// Package fleetvirtualmachine reconciles FleetVirtualMachines: an OCM
// Placement picks the clusters, an Argo CD ApplicationSet delivers the VM to
// each, and the status joins decisions, Applications, agent reports and
// cluster availability.
package fleetvirtualmachine

import (
	"context"
	"fmt"
	"maps"
	"slices"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
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
	"github.com/fleetvm/fleetvm/pkg/capacity"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetdiskimage"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/delivery"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/placement"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/status"
	"github.com/fleetvm/fleetvm/pkg/imagerefs"
	"github.com/fleetvm/fleetvm/pkg/vmclaim"
	"github.com/fleetvm/fleetvm/pkg/write"
)

// Finalizer holds a FleetVirtualMachine until its VMs are removed (Delete)
// or detached (Orphan) and its hub objects are gone.
const Finalizer = "fleetvm.io/cleanup"

// Reconciler reconciles FleetVirtualMachines.
type Reconciler struct {
	Client   client.Client
	Recorder record.EventRecorder
	// Clock is read for every timestamp and grace period, and wakes the
	// reconcile when a grace period ends (a fake clock in tests).
	Clock  clock.WithDelayedExecution
	Config Config
	// Images gives the fleet-wide references of the disk images the VMs
	// use; ImageEvents wakes a FleetVirtualMachine when a total it shows
	// changed. Both optional: without them, references are not shown.
	Images      *imagerefs.Tally
	ImageEvents <-chan event.GenericEvent
	// MaxConcurrentReconciles bounds parallel reconciles (default 4).
	MaxConcurrentReconciles int

	// alarms wake a reconcile when a grace period ends (SetupWithManager).
	alarms *alarms
	// load counts FleetVirtualMachines per cluster, for picking from
	// candidate Placements (SetupWithManager).
	load *placement.ClusterLoad
	// expect holds each FleetVirtualMachine's own last write until the
	// cache has it: a reconcile from an older copy would be refused.
	expect write.Expectations
	// shapes holds each FleetVirtualMachine's VM shape per generation.
	shapes capacity.ShapeCache
}

// +kubebuilder:rbac:groups=fleetvm.io,resources=fleetvirtualmachines,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=fleetvm.io,resources=fleetvirtualmachines/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fleetvm.io,resources=fleetvirtualmachines/finalizers,verbs=update
// +kubebuilder:rbac:groups=fleetvm.io,resources=vmreports,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleetvm.io,resources=fleetdiskimages,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.open-cluster-management.io,resources=managedclustersetbindings,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.open-cluster-management.io,resources=managedclustersets/bind,verbs=create
// +kubebuilder:rbac:groups=cluster.open-cluster-management.io,resources=managedclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.open-cluster-management.io,resources=managedclustersets,verbs=get;list;watch

// In Argo CD's namespace only (a Role there; the chart puts it in
// argocd.namespace, and the manager caches these kinds only there):
// +kubebuilder:rbac:groups=cluster.open-cluster-management.io,namespace=argocd,resources=placements,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=cluster.open-cluster-management.io,namespace=argocd,resources=placementdecisions,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.open-cluster-management.io,namespace=argocd,resources=managedclustersetbindings,verbs=create;delete
// +kubebuilder:rbac:groups=apps.open-cluster-management.io,namespace=argocd,resources=gitopsclusters,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=argoproj.io,namespace=argocd,resources=applicationsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=argoproj.io,namespace=argocd,resources=applications,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings one FleetVirtualMachine's hub objects in line with its
// spec and computes its status, in an order that never loses a VM:
//
//  1. read: the Placement and the scheduler's decision, the Applications,
//     the clusters (labels, sets), the agents' reports;
//  2. decide (placement.Decide, pure): where the VM stays, leaves, is removed,
//     is added;
//  3. write the Placement when the intent or where the VM runs changed;
//  4. record the decision in the status, before acting on it: the write
//     carries the object's resourceVersion, so a reconcile that read a
//     stale FleetVirtualMachine (its own previous write not yet seen, a
//     restarted hub) is refused with a conflict and acts on nothing;
//  5. act: the ApplicationSet delivers to the recorded clusters, and the
//     Applications of clusters whose grace period ended are removed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	fvm := &fleetv1alpha1.FleetVirtualMachine{}
	if err := r.Client.Get(ctx, req.NamespacedName, fvm); err != nil {
		if apierrors.IsNotFound(err) {
			return r.reconcileGone(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, err
	}
	if !r.expect.Satisfied(fvm) {
		// The cache has not seen this controller's last write yet; its
		// watch event brings the next reconcile (the requeue is a
		// backstop).
		return ctrl.Result{RequeueAfter: write.ExpectationTimeout}, nil
	}
	if fvm.DeletionTimestamp != nil {
		return r.reconcileDelete(ctx, fvm)
	}
	if err := r.ensureFinalizer(ctx, fvm); err != nil {
		return ctrl.Result{}, err
	}
	if invalid, err := r.reconcileInvalid(ctx, fvm); invalid || err != nil {
		return ctrl.Result{}, err // validate.go: nothing new is placed or delivered, no VM removed
	}
	if over, err := r.reconcileShapeLimit(ctx, fvm); over || err != nil {
		return ctrl.Result{}, err // likewise
	}
	s := r.newScope(fvm)
	// One FleetVirtualMachine per VM.
	if winner, err := r.claimWinner(ctx, fvm); err != nil {
		return ctrl.Result{}, err
	} else if winner != nil {
		return r.reconcileConflict(ctx, fvm, s.before, winner, s.now)
	}

	r.readFleet(ctx, s)      // 1. read
	r.decide(ctx, s)         // 2. decide
	r.writePlacement(ctx, s) // 3. the Placement
	r.readDelivery(ctx, s)   //    and what delivers and runs
	if !r.record(ctx, s) {   // 4. record
		return ctrl.Result{}, s.err()
	}
	result := r.deliver(ctx, s) // 5. act
	r.alarms.set(req.NamespacedName, s.outcome.LookAgain)
	if err := s.err(); err != nil {
		return ctrl.Result{}, err
	}
	return result, nil
}

// statusClusters are the clusters a FleetVirtualMachine's status lists.
func statusClusters(fvm *fleetv1alpha1.FleetVirtualMachine) []string {
	out := make([]string, 0, len(fvm.Status.Clusters))
	for _, c := range fvm.Status.Clusters {
		out = append(out, c.Cluster)
	}
	return out
}

// releasePlacement removes the Placement a FleetVirtualMachine used
// before, when its status now names another: its own Placement (from
// before the hub shared Placements, on a hub upgraded since), or a
// candidate Placement no one else uses (its intent changed).
func (r *Reconciler) releasePlacement(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, was *fleetv1alpha1.PlacementStatus) error {
	if was == nil || was.Name == "" || fvm.Status.Placement != nil && fvm.Status.Placement.Name == was.Name {
		return nil
	}
	if was.Name != delivery.ChildName(client.ObjectKeyFromObject(fvm)) {
		return r.releaseCandidates(ctx, fvm, was.Name)
	}
	switch obj, err := r.getOwned(ctx, fvm, &clusterv1beta1.Placement{}, was.Name); {
	case err != nil:
		return err
	case obj != nil:
		if err := r.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete Placement %s: %w", klog.KObj(obj), err)
		}
	}
	return nil
}

// deliveryTargets are the ApplicationSet's elements: every cluster the VM
// is delivered to, with the environment the status records for it
// (placement.ChooseOverlay): a relabelled cluster switches overlay only once its new
// label has held for the grace period, and a leaving one keeps the
// environment it was placed for. The overlay alarm wakes the reconcile
// when a pending switch is due.
func (r *Reconciler) deliveryTargets(fvm *fleetv1alpha1.FleetVirtualMachine, obs *observation, outcome placement.Outcome) []delivery.Target {
	recorded := map[string]string{}
	for _, c := range fvm.Status.Clusters {
		recorded[c.Cluster] = c.Environment
	}
	var out []delivery.Target
	for _, c := range outcome.Delivered() {
		env, ok := recorded[c]
		if mc := obs.Facts[c].Cluster; mc != nil && !ok {
			env = mc.Labels[r.Config.EnvironmentLabel]
		}
		out = append(out, delivery.Target{Name: c, Environment: env})
	}
	r.alarms.setFor(client.ObjectKeyFromObject(fvm), alarmOverlay, placement.OverlayWake(fvm.Status.Clusters, r.Clock.Now(), r.Config.GracePeriod))
	return out
}

// readClusterState turns what observe read into the status inputs of the
// clusters the outcome lists.
func (r *Reconciler) readClusterState(obs *observation, in *status.Inputs) {
	in.Apps = map[string]status.AppState{}
	for c, app := range obs.Apps {
		in.Apps[c] = delivery.StateOf(app)
	}
	in.Clusters = map[string]status.ClusterInfo{}
	in.Reports = map[string]*fleetv1alpha1.VMState{}
	for c := range in.Outcome.Clusters {
		if mc := obs.Facts[c].Cluster; mc != nil {
			info := status.ClusterInfo{Environment: mc.Labels[r.Config.EnvironmentLabel], Available: metav1.ConditionUnknown}
			if cond := meta.FindStatusCondition(mc.Status.Conditions, clusterv1.ManagedClusterConditionAvailable); cond != nil {
				info.Available = cond.Status
			}
			in.Clusters[c] = info
		}
		if rep, ok := obs.Reports[c]; ok {
			in.Reports[c] = rep
		}
	}
}

// reportDeliveryError shows an ApplicationSet write that failed after the
// status was recorded: Delivered turns False with the error.
func (r *Reconciler) reportDeliveryError(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, err error) {
	before := fvm.DeepCopy()
	meta.SetStatusCondition(&fvm.Status.Conditions, metav1.Condition{
		Type: fleetv1alpha1.ConditionDelivered, Status: metav1.ConditionFalse, Reason: fleetv1alpha1.ReasonDeliveryFailed,
		Message: status.Truncate(err.Error(), status.MaxErrorInMessage), ObservedGeneration: fvm.Generation, LastTransitionTime: metav1.NewTime(r.Clock.Now()),
	})
	if werr := r.patchStatusIfChanged(ctx, before, fvm); werr != nil && !write.Stale(werr) {
		log.FromContext(ctx).Error(werr, "report delivery error in status")
	}
}

// recordClusterChanges emits an event when a cluster starts leaving, its
// VM's removal starts, or a removal is confirmed.
func (r *Reconciler) recordClusterChanges(fvm *fleetv1alpha1.FleetVirtualMachine, prev fleetv1alpha1.FleetVirtualMachineStatus, outcome placement.Outcome) {
	was := map[string]fleetv1alpha1.ClusterStatus{}
	for _, c := range prev.Clusters {
		was[c.Cluster] = c
	}
	for _, c := range slices.Sorted(maps.Keys(outcome.Clusters)) {
		plan, old := outcome.Clusters[c], was[c]
		switch {
		case plan.State == placement.Leaving && old.LeavingSince == nil:
			r.Recorder.Eventf(fvm, "Normal", "ClusterLeaving",
				"Cluster %s no longer qualifies (%s); its VM is removed if it does not qualify again within %s", c, plan.Reason, r.Config.GracePeriod)
		case plan.State == placement.Removing && old.RemovingSince == nil:
			r.Recorder.Eventf(fvm, "Normal", "ClusterRemoving",
				"Removing the VM from cluster %s: it did not qualify for %s (%s)", c, r.Config.GracePeriod, plan.Reason)
		}
	}
	for _, c := range outcome.Dropped {
		if _, ok := was[c]; ok {
			r.Recorder.Eventf(fvm, "Normal", "ClusterRemoved", "The VM is gone from cluster %s", c)
		}
	}
}

// readDiskImages reads the FleetDiskImages the VM boots from.
func (r *Reconciler) readDiskImages(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, in *status.Inputs) error {
	in.Images = map[string]*fleetv1alpha1.FleetDiskImage{}
	var errs []error
	for _, d := range fvm.Spec.DiskImages {
		fdi := &fleetv1alpha1.FleetDiskImage{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: fvm.Namespace, Name: d.Name}, fdi)
		switch {
		case apierrors.IsNotFound(err):
			in.Images[d.Name] = nil
		case err != nil:
			errs = append(errs, fmt.Errorf("get FleetDiskImage %s/%s: %w", fvm.Namespace, d.Name, err))
		default:
			in.Images[d.Name] = fdi
		}
	}
	return joinErrors(errs)
}

// observeImages returns the fleet-wide totals of the images and has the
// tally wake this FleetVirtualMachine when one changes.
func (r *Reconciler) observeImages(key types.NamespacedName, images []string) map[string]int32 {
	if r.Images == nil {
		return nil
	}
	return r.Images.Observe(key, images)
}

// patchStatusIfChanged writes the status only when it differs: a reconcile
// that finds nothing new issues no write.
func (r *Reconciler) patchStatusIfChanged(ctx context.Context, before, fvm *fleetv1alpha1.FleetVirtualMachine) error {
	written, err := write.Status(ctx, r.Client, before, fvm)
	if err != nil {
		return fmt.Errorf("write status of %s: %w", klog.KObj(fvm), err)
	}
	if written {
		r.expect.Wrote(fvm)
	}
	return nil
}

// recordTransitions emits an event for the transitions an operator acts
// on, not for every step of a rollout: Ready becoming True, or leaving
// True; Placed or Delivered turning False (or False for another reason),
// and turning True again after that. A FleetVirtualMachine created and
// rolled out without trouble has one event, Ready.
func (r *Reconciler) recordTransitions(before, after *fleetv1alpha1.FleetVirtualMachine) {
	for _, t := range []string{fleetv1alpha1.ConditionPlaced, fleetv1alpha1.ConditionDelivered, fleetv1alpha1.ConditionReady} {
		old := meta.FindStatusCondition(before.Status.Conditions, t)
		cur := meta.FindStatusCondition(after.Status.Conditions, t)
		if kind, ok := transitionEvent(t, old, cur); ok {
			r.Recorder.Event(after, kind, cur.Reason, cur.Message)
		}
	}
}

// transitionEvent says whether a condition's change is worth an event,
// and its type.
func transitionEvent(condition string, old, cur *metav1.Condition) (string, bool) {
	if cur == nil || (old != nil && old.Status == cur.Status && old.Reason == cur.Reason) {
		return "", false
	}
	was := metav1.ConditionUnknown
	if old != nil {
		was = old.Status
	}
	if condition == fleetv1alpha1.ConditionReady {
		switch {
		case cur.Status == metav1.ConditionTrue && was != metav1.ConditionTrue:
			return "Normal", true
		case cur.Status != metav1.ConditionTrue && was == metav1.ConditionTrue:
			return "Warning", true
		}
		return "", false
	}
	// Waiting for Argo CD to create the Applications is a step of a
	// rollout; losing them once delivered is not.
	rollingOut := func(c *metav1.Condition) bool {
		return c != nil && c.Reason == fleetv1alpha1.ReasonApplicationsMissing
	}
	switch {
	case cur.Status == metav1.ConditionFalse && rollingOut(cur) && was != metav1.ConditionTrue:
		return "", false
	case cur.Status == metav1.ConditionFalse:
		return "Warning", true
	case cur.Status == metav1.ConditionTrue && was == metav1.ConditionFalse && !rollingOut(old):
		return "Normal", true
	}
	return "", false
}

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
	// it, or every one when it is deleted (the next one recreates it).
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
		return ownerOrUsers(ctx, p, candidateUsers, false)
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
			for _, req := range r.fleetVMsMatching(ctx, "claiming a reported VM", obj, client.InNamespace(vm.Namespace),
				client.MatchingFields{vmclaim.IndexVM: vm.Namespace + "/" + vm.Name}) {
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
	b := ctrl.NewControllerManagedBy(mgr).
		WatchesRawSource(source.Channel(r.alarms.events, &handler.EnqueueRequestForObject{}))
	if r.ImageEvents != nil {
		b = b.WatchesRawSource(source.Channel(r.ImageEvents, &handler.EnqueueRequestForObject{}))
	}
	return b.
		Named("fleetvirtualmachine").
		For(&fleetv1alpha1.FleetVirtualMachine{}).
		Watches(&fleetv1alpha1.FleetVirtualMachine{}, loads).
		Watches(&fleetv1alpha1.FleetVirtualMachine{}, handler.EnqueueRequestsFromMapFunc(r.fleetVMsOverShapeLimit),
			builder.WithPredicates(shapeMayFreeUp())).
		Watches(&clusterv1beta1.Placement{}, placements, inArgo).
		Watches(&argov1alpha1.ApplicationSet{}, byLabels, inArgo).
		Watches(&argov1alpha1.Application{}, byLabels, inArgo, builder.WithPredicates(applicationChanged())).
		Watches(&clusterv1beta1.PlacementDecision{}, decisions, inArgo).
		Watches(&fleetv1alpha1.VMReport{}, reports).
		Watches(&fleetv1alpha1.FleetDiskImage{}, handler.EnqueueRequestsFromMapFunc(r.fleetVMsUsingImage)).
		Watches(&clusterv1.ManagedCluster{}, handler.EnqueueRequestsFromMapFunc(r.fleetVMsOnCluster),
			builder.WithPredicates(clusterChanged())).
		Watches(&clusterv1alpha1.AddOnPlacementScore{}, handler.EnqueueRequestsFromMapFunc(r.fleetVMsWaitingForClusters),
			builder.WithPredicates(scoresChanged())).
		Watches(&clusterv1beta2.ManagedClusterSet{}, handler.EnqueueRequestsFromMapFunc(r.fleetVMsOfSet)).
		Watches(&clusterv1beta2.ManagedClusterSetBinding{}, handler.EnqueueRequestsFromMapFunc(r.fleetVMsOfBinding)).
		Watches(&argov1alpha1.AppProject{}, handler.EnqueueRequestsFromMapFunc(r.fleetVMsOfProject), inArgo).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.allFleetVMs), builder.WithPredicates(r.argoSettingsChanged())).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(write.Requeue(r))
}

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

// trackLoad counts a FleetVirtualMachine on the clusters its status lists.
func (r *Reconciler) trackLoad(obj client.Object, deleted bool) {
	fvm, ok := obj.(*fleetv1alpha1.FleetVirtualMachine)
	if !ok {
		return
	}
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
	return updateChanged(func(o, n *argov1alpha1.Application) bool { return !sameButReconciledAt(o, n) })
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
// managed fields or the time Argo CD last reconciled them. The
// Application CRD has no status subresource, so a status write bumps the
// generation too; a spec change shows in the spec.
func sameButReconciledAt(a, b *argov1alpha1.Application) bool {
	ma, mb := a.ObjectMeta, b.ObjectMeta
	ma.ResourceVersion, mb.ResourceVersion = "", ""
	ma.Generation, mb.Generation = 0, 0
	ma.ManagedFields, mb.ManagedFields = nil, nil
	sa, sb := a.Status, b.Status
	sa.ReconciledAt, sb.ReconciledAt = nil, nil
	sa.ObservedAt, sb.ObservedAt = nil, nil
	return equality.Semantic.DeepEqual(ma, mb) && equality.Semantic.DeepEqual(a.Spec, b.Spec) &&
		equality.Semantic.DeepEqual(a.Operation, b.Operation) && equality.Semantic.DeepEqual(sa, sb)
}

// clusterChanged passes ManagedCluster updates that change what the status
// shows: availability or labels.
func clusterChanged() predicate.Predicate {
	return updateChanged(func(o, n *clusterv1.ManagedCluster) bool {
		return availability(o) != availability(n) || !equality.Semantic.DeepEqual(o.Labels, n.Labels)
	})
}

func availability(mc *clusterv1.ManagedCluster) metav1.ConditionStatus {
	if c := meta.FindStatusCondition(mc.Status.Conditions, clusterv1.ManagedClusterConditionAvailable); c != nil {
		return c.Status
	}
	return metav1.ConditionUnknown
}
