// Package fleetvirtualmachine reconciles FleetVirtualMachines: an OCM
// Placement picks the clusters, an Argo CD ApplicationSet delivers the VM to
// each, and the status joins decisions, Applications, agent reports and
// cluster availability.
package fleetvirtualmachine

import (
	"context"
	"fmt"
	"slices"
	"time"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetdiskimage"
	"github.com/fleetvm/fleetvm/pkg/imagerefs"
)

// Finalizer holds a FleetVirtualMachine until its VMs are removed (Delete)
// or detached (Orphan) and its hub objects are gone.
const Finalizer = "fleetvm.io/cleanup"

// Reconciler reconciles FleetVirtualMachines.
type Reconciler struct {
	Client   client.Client
	Recorder record.EventRecorder
	Clock    clock.PassiveClock
	Config   Config
	// Images gives the fleet-wide references of the disk images the VMs
	// use; ImageEvents wakes a FleetVirtualMachine when a total it shows
	// changed. Both optional: without them, references are not shown.
	Images      *imagerefs.Tally
	ImageEvents <-chan event.GenericEvent
	// MaxConcurrentReconciles bounds parallel reconciles (default 4).
	MaxConcurrentReconciles int
}

// +kubebuilder:rbac:groups=fleetvm.io,resources=fleetvirtualmachines,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=fleetvm.io,resources=fleetvirtualmachines/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=fleetvm.io,resources=fleetvirtualmachines/finalizers,verbs=update
// +kubebuilder:rbac:groups=fleetvm.io,resources=vmreports,verbs=get;list;watch
// +kubebuilder:rbac:groups=fleetvm.io,resources=fleetdiskimages,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.open-cluster-management.io,resources=placements,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=cluster.open-cluster-management.io,resources=placementdecisions,verbs=get;list;watch
// +kubebuilder:rbac:groups=cluster.open-cluster-management.io,resources=managedclustersetbindings,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=cluster.open-cluster-management.io,resources=managedclustersets/bind,verbs=create
// +kubebuilder:rbac:groups=cluster.open-cluster-management.io,resources=managedclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps.open-cluster-management.io,resources=gitopsclusters,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=argoproj.io,resources=applicationsets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=argoproj.io,resources=applications,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile brings one FleetVirtualMachine's hub objects in line with its
// spec and computes its status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	fvm := &fleetv1alpha1.FleetVirtualMachine{}
	if err := r.Client.Get(ctx, req.NamespacedName, fvm); err != nil {
		if apierrors.IsNotFound(err) {
			r.observeImages(req.NamespacedName, nil)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if fvm.DeletionTimestamp != nil {
		return r.reconcileDelete(ctx, fvm)
	}
	if !controllerutil.ContainsFinalizer(fvm, Finalizer) {
		patch := client.MergeFrom(fvm.DeepCopy())
		controllerutil.AddFinalizer(fvm, Finalizer)
		if err := r.Client.Patch(ctx, fvm, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	before := fvm.DeepCopy()
	now := metav1.NewTime(r.Clock.Now())
	in := statusInputs{Spec: fvm.Spec, Generation: fvm.Generation, Previous: fvm.Status, Now: now}
	var errs []error

	// Placement.
	placementName := childName(req.NamespacedName)
	in.PlacementRef = &fleetv1alpha1.PlacementStatus{Namespace: r.Config.ArgoNamespace, Name: placementName}
	var sticky []string
	if fvm.Status.Placement != nil {
		sticky = fvm.Status.Placement.DecidedClusters
	}
	placement, err := r.placementPhase(ctx, fvm, sticky)
	if err != nil {
		in.PlacementErr = err
		errs = append(errs, err)
	}
	if placement != nil {
		in.PlacementScheduled, in.PlacementMessage = scheduled(placement)
		if in.Decided, err = r.readDecisions(ctx, placement); err != nil {
			errs = append(errs, err)
		}
	}

	// Delivery.
	appSet, err := r.reconcileApplicationSet(ctx, fvm, placementName, in.Decided)
	if err != nil {
		in.DeliveryErr = err
		errs = append(errs, err)
	}
	in.AppSetExists = appSet != nil
	apps, err := r.listApplications(ctx, fvm)
	if err != nil {
		errs = append(errs, err)
	}
	if appSet != nil {
		if err := r.adoptApplications(ctx, appSet, apps); err != nil {
			errs = append(errs, err)
		}
	}
	requeue, err := r.trackLeaving(ctx, fvm, apps, &in)
	if err != nil {
		errs = append(errs, err)
	}

	// Status.
	if err := r.readClusterState(ctx, fvm, &in); err != nil {
		errs = append(errs, err)
	}
	in.ImageTotals = r.observeImages(req.NamespacedName, reportedImages(in.Reports))
	if err := r.readDiskImages(ctx, fvm, &in); err != nil {
		errs = append(errs, err)
	}
	fvm.Status = computeStatus(in)
	switch err := r.patchStatusIfChanged(ctx, before, fvm); {
	case apierrors.IsConflict(err):
		// The cache is behind the API server: the newer object (most often
		// this controller's own previous status write) is on its way through
		// the watch and triggers the next reconcile, which computes the status
		// again from it. Returning the conflict would log a reconciler error
		// and requeue with backoff (the fleet benchmark, test/benchmark/fleet,
		// saw 1.3 per FleetVM when 300 were created at once). The transitions
		// are recorded by the reconcile whose write lands, not twice.
	case err != nil:
		errs = append(errs, err)
		r.recordTransitions(before, fvm)
	default:
		r.recordTransitions(before, fvm)
	}
	if err := joinErrors(errs); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// placementPhase binds the cluster sets, ensures the shared GitOps import,
// and reconciles the FleetVirtualMachine's own Placement.
func (r *Reconciler) placementPhase(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, sticky []string) (*clusterv1beta1.Placement, error) {
	var errs []error
	if err := r.ensureBindings(ctx, fvm); err != nil {
		errs = append(errs, err)
	}
	if err := r.ensureSharedGitOps(ctx, fvm); err != nil {
		errs = append(errs, err)
	}
	p, err := r.reconcilePlacement(ctx, fvm, sticky)
	if err != nil {
		errs = append(errs, err)
	}
	return p, joinErrors(errs)
}

// scheduled tells whether the OCM scheduler has acted on the Placement,
// and its PlacementSatisfied message.
func scheduled(p *clusterv1beta1.Placement) (bool, string) {
	c := meta.FindStatusCondition(p.Status.Conditions, clusterv1beta1.PlacementConditionSatisfied)
	if c == nil || c.ObservedGeneration < p.Generation && c.ObservedGeneration != 0 {
		return false, ""
	}
	return true, c.Message
}

// trackLeaving keeps the VM on clusters that left the decision until the
// grace period has passed, then removes their Application deliberately. It
// returns when to look again.
func (r *Reconciler) trackLeaving(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, apps []argov1alpha1.Application, in *statusInputs) (time.Duration, error) {
	in.Apps = map[string]appState{}
	in.Leaving = map[string]metav1.Time{}
	prevLeaving := map[string]metav1.Time{}
	for _, c := range fvm.Status.Clusters {
		if c.LeavingSince != nil {
			prevLeaving[c.Cluster] = *c.LeavingSince
		}
	}
	var requeue time.Duration
	var errs []error
	for i := range apps {
		app := &apps[i]
		cluster := app.Labels[fleetv1alpha1.LabelCluster]
		if cluster == "" || app.DeletionTimestamp != nil {
			continue
		}
		in.Apps[cluster] = appState{Sync: string(app.Status.Sync.Status), Health: string(app.Status.Health.Status)}
		if slices.Contains(in.Decided, cluster) {
			continue
		}
		if !in.PlacementScheduled {
			// No decision to trust (the Placement is new, recreated or
			// unreadable): start no clock and remove nothing.
			if since, ok := prevLeaving[cluster]; ok {
				in.Leaving[cluster] = since
			}
			continue
		}
		since, ok := prevLeaving[cluster]
		if !ok {
			since = in.Now
			r.Recorder.Eventf(fvm, "Normal", "ClusterLeaving",
				"Cluster %s left the placement decision; its VM is removed if it does not return within %s", cluster, r.Config.GracePeriod)
		}
		left := r.Config.GracePeriod - in.Now.Sub(since.Time)
		if left > 0 {
			in.Leaving[cluster] = since
			if requeue == 0 || left < requeue {
				requeue = left
			}
			continue
		}
		if err := r.removeApplication(ctx, app, true); err != nil {
			errs = append(errs, err)
			in.Leaving[cluster] = since
			continue
		}
		delete(in.Apps, cluster)
		r.Recorder.Eventf(fvm, "Normal", "ClusterRemoved",
			"Removed the VM from cluster %s: out of the placement decision for more than %s", cluster, r.Config.GracePeriod)
	}
	return requeue, joinErrors(errs)
}

// readClusterState reads the ManagedClusters and agent reports of the
// clusters the status lists.
func (r *Reconciler) readClusterState(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, in *statusInputs) error {
	in.Clusters = map[string]clusterInfo{}
	in.Reports = map[string]*fleetv1alpha1.VMState{}
	names := slices.Clone(in.Decided)
	for c := range in.Leaving {
		names = append(names, c)
	}
	var errs []error
	for _, name := range names {
		mc := &clusterv1.ManagedCluster{}
		if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, mc); err != nil {
			if !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("get ManagedCluster %s: %w", name, err))
			}
			continue
		}
		info := clusterInfo{Environment: mc.Labels[r.Config.EnvironmentLabel], Available: metav1.ConditionUnknown}
		if c := meta.FindStatusCondition(mc.Status.Conditions, clusterv1.ManagedClusterConditionAvailable); c != nil {
			info.Available = c.Status
		}
		in.Clusters[name] = info

		// The report lives in the cluster's own namespace: the agent of
		// that cluster is the only one allowed to write there, so a report
		// elsewhere is never read.
		report := &fleetv1alpha1.VMReport{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: name, Name: reportName(fvm)}, report)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			errs = append(errs, fmt.Errorf("get VMReport %s/%s: %w", name, reportName(fvm), err))
		case report.Spec.FleetVM.Name == fvm.Name && report.Spec.FleetVM.Namespace == fvm.Namespace && len(report.Spec.VMs) > 0:
			in.Reports[name] = &report.Spec.VMs[0]
		}
	}
	return joinErrors(errs)
}

// readDiskImages reads the FleetDiskImages the VM boots from.
func (r *Reconciler) readDiskImages(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, in *statusInputs) error {
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

// reportName is the name of a FleetVirtualMachine's VMReport in a cluster
// namespace.
func reportName(fvm *fleetv1alpha1.FleetVirtualMachine) string {
	return fvm.Namespace + "." + fvm.Name
}

// patchStatusIfChanged writes the status only when it differs: a reconcile
// that finds nothing new issues no write.
func (r *Reconciler) patchStatusIfChanged(ctx context.Context, before, fvm *fleetv1alpha1.FleetVirtualMachine) error {
	if equality.Semantic.DeepEqual(before.Status, fvm.Status) {
		return nil
	}
	// Update, not a merge patch: the summary counts are required fields, and
	// a merge patch would leave out the ones that stayed zero. A conflict
	// requeues with fresh data.
	if err := r.Client.Status().Update(ctx, fvm); err != nil {
		return fmt.Errorf("patch status of %s: %w", klog.KObj(fvm), err)
	}
	return nil
}

// recordTransitions emits an event when Placed, Delivered or Ready change.
func (r *Reconciler) recordTransitions(before, after *fleetv1alpha1.FleetVirtualMachine) {
	for _, t := range []string{fleetv1alpha1.ConditionPlaced, fleetv1alpha1.ConditionDelivered, fleetv1alpha1.ConditionReady} {
		old := meta.FindStatusCondition(before.Status.Conditions, t)
		cur := meta.FindStatusCondition(after.Status.Conditions, t)
		if cur == nil || (old != nil && old.Status == cur.Status && old.Reason == cur.Reason) {
			continue
		}
		kind := "Normal"
		if cur.Status == metav1.ConditionFalse {
			kind = "Warning"
		}
		r.Recorder.Event(after, kind, cur.Reason, cur.Message)
	}
}

// SetupWithManager registers the controller. Objects in the Argo CD
// namespace are not owned through owner references (they live in another
// namespace): they carry labels naming their FleetVirtualMachine, and the
// watches map them back.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	byLabels := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		if key, ok := ownerKey(obj); ok {
			return []reconcile.Request{{NamespacedName: key}}
		}
		return nil
	})
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
		if key, ok := ownerKey(p); ok {
			return []reconcile.Request{{NamespacedName: key}}
		}
		return nil
	})
	reports := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		r, ok := obj.(*fleetv1alpha1.VMReport)
		if !ok {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: r.Spec.FleetVM.Namespace, Name: r.Spec.FleetVM.Name}}}
	})
	workers := r.MaxConcurrentReconciles
	if workers == 0 {
		workers = 4
	}
	b := ctrl.NewControllerManagedBy(mgr)
	if r.ImageEvents != nil {
		b = b.WatchesRawSource(source.Channel(r.ImageEvents, &handler.EnqueueRequestForObject{}))
	}
	return b.
		Named("fleetvirtualmachine").
		For(&fleetv1alpha1.FleetVirtualMachine{}).
		Watches(&clusterv1beta1.Placement{}, byLabels, inArgo).
		Watches(&argov1alpha1.ApplicationSet{}, byLabels, inArgo).
		Watches(&argov1alpha1.Application{}, byLabels, inArgo).
		Watches(&clusterv1beta1.PlacementDecision{}, decisions, inArgo).
		Watches(&fleetv1alpha1.VMReport{}, reports).
		Watches(&fleetv1alpha1.FleetDiskImage{}, handler.EnqueueRequestsFromMapFunc(r.fleetVMsUsingImage)).
		Watches(&clusterv1.ManagedCluster{}, handler.EnqueueRequestsFromMapFunc(r.fleetVMsOnCluster),
			builder.WithPredicates(clusterChanged())).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}

// fleetVMsOnCluster maps a ManagedCluster to the FleetVirtualMachines whose
// status lists it, through the status index.
func (r *Reconciler) fleetVMsOnCluster(ctx context.Context, obj client.Object) []reconcile.Request {
	var list fleetv1alpha1.FleetVirtualMachineList
	if err := r.Client.List(ctx, &list, client.MatchingFields{IndexStatusCluster: obj.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "list FleetVirtualMachines on cluster", "cluster", obj.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// fleetVMsUsingImage maps a FleetDiskImage to the FleetVirtualMachines
// that list it.
func (r *Reconciler) fleetVMsUsingImage(ctx context.Context, obj client.Object) []reconcile.Request {
	var list fleetv1alpha1.FleetVirtualMachineList
	if err := r.Client.List(ctx, &list, client.InNamespace(obj.GetNamespace()),
		client.MatchingFields{fleetdiskimage.IndexDiskImage: client.ObjectKeyFromObject(obj).String()}); err != nil {
		log.FromContext(ctx).Error(err, "list FleetVirtualMachines using a disk image", "image", klog.KObj(obj))
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// clusterChanged passes ManagedCluster updates that change what the status
// shows: availability or labels.
func clusterChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, ok1 := e.ObjectOld.(*clusterv1.ManagedCluster)
			n, ok2 := e.ObjectNew.(*clusterv1.ManagedCluster)
			if !ok1 || !ok2 {
				return true
			}
			return availability(o) != availability(n) || !equality.Semantic.DeepEqual(o.Labels, n.Labels)
		},
	}
}

func availability(mc *clusterv1.ManagedCluster) metav1.ConditionStatus {
	if c := meta.FindStatusCondition(mc.Status.Conditions, clusterv1.ManagedClusterConditionAvailable); c != nil {
		return c.Status
	}
	return metav1.ConditionUnknown
}
