// Package fleetvirtualmachine reconciles FleetVirtualMachines: an OCM
// Placement picks the clusters, an Argo CD ApplicationSet delivers the VM to
// each, and the status joins decisions, Applications, agent reports and
// cluster availability.
//
// This package reads and writes; what it decides and builds lives in
// three packages below it, which import nothing of it:
//
//   - placement: where the VM is and goes (Decide, IntentFor, Pick,
//     ChooseOverlay);
//   - status: the FleetVirtualMachine's status from what was read and
//     decided (Compute);
//   - delivery: the ApplicationSet and the names and labels of the
//     objects in the Argo CD namespace (Renderer, ChildName).
//
// Files: controller.go (the Reconciler and Reconcile), reconcile.go (its
// phases over a scope), observe.go (the reads), placement.go (the
// candidate Placement), gitops.go (the ApplicationSet and Applications),
// tenant.go (the AppProject and the namespace on the clusters),
// record.go (the status write and events), delete.go, watches.go.
package fleetvirtualmachine

import (
	"time"

	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/capacity"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/delivery"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/move/runner"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/placement"
	"github.com/fleetvm/fleetvm/pkg/write"
)

// Reconciler reconciles FleetVirtualMachines.
type Reconciler struct {
	Client client.Client
	// APIReader reads an ApplicationSet whole when the cache's trimmed
	// copy (delivery.TrimApplicationSet) holds another spec than FleetVM
	// renders (Client when nil).
	APIReader client.Reader
	Recorder  record.EventRecorder
	// Clock is read for every timestamp and grace period, and wakes the
	// reconcile when a grace period ends (a fake clock in tests).
	Clock  clock.WithDelayedExecution
	Config Config
	// MaxConcurrentReconciles bounds parallel reconciles (default 4).
	MaxConcurrentReconciles int

	// alarms wake a reconcile when a grace period ends (SetupWithManager).
	alarms *alarms
	// load counts FleetVirtualMachines per cluster, for picking from
	// candidate Placements (SetupWithManager).
	load *placement.ClusterLoad
	// arriving counts the copies placed on each cluster that its capacity
	// score does not show yet (SetupWithManager).
	arriving *placement.Arriving
	// scores keeps the clusters' capacity scores parsed, once per version.
	scores capacity.Scores
	// decisions keeps each candidate Placement's decided clusters, sorted,
	// once per version of its PlacementDecisions.
	decisions decisionMemo
	// expect holds each FleetVirtualMachine's own last write until the
	// cache has it: a reconcile from an older copy would be refused.
	expect write.Expectations
	// deletions keep the tenant and shared objects this hub deleted from
	// being deleted again while the cache still shows them: the last of a
	// namespace's FleetVirtualMachines deletes its ManifestWorks (one per
	// cluster), and the sweep after it found them all again.
	deletions write.Deletions
	// shapes holds each FleetVirtualMachine's VM shape per generation,
	// recorded by an event handler on the FleetVirtualMachine informer;
	// shapesObserved tells whether that handler has seen the informer's
	// initial list (SetupWithManager).
	shapes         capacity.ShapeCache
	shapesObserved func() bool
	// written lets the generated objects found as last written (the
	// namespace works, shared by a namespace's FleetVirtualMachines,
	// above all) skip the comparison.
	written write.Memo
	// valid remembers the generations that passed validation.
	valid validated
	// moves runs the FleetVirtualMachines' moves (moveRunner(), made once
	// from Client and Recorder).
	moves     *runner.Runner
	movesOnce sync.Once
}

// moveRunner is the seam of the FleetVirtualMachines' moves.
func (r *Reconciler) moveRunner() *runner.Runner {
	r.movesOnce.Do(func() { r.moves = &runner.Runner{Client: r.Client, Recorder: r.Recorder} })
	return r.moves
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

	recorded := false
	defer func() {
		if !recorded {
			// Nothing recorded: the copies picked in this reconcile
			// take no room (the next one picks again).
			r.arriving.Keep(req.NamespacedName, statusClusters(s.before))
		}
	}()
	r.readFleet(ctx, s)       // 1. read
	if !r.stepMoves(ctx, s) { //    and step the moves under way
		return ctrl.Result{}, s.err()
	}
	r.decide(ctx, s)         // 2. decide
	r.writePlacement(ctx, s) // 3. the Placement
	r.readDelivery(ctx, s)   //    and what delivers and runs
	r.planRollout(ctx, s)    //    and which revision each cluster is given
	if !r.record(ctx, s) {   // 4. record
		return ctrl.Result{}, s.err()
	}
	recorded = true
	result := r.deliver(ctx, s) // 5. act
	if s.obs != nil && s.obs.heldByArrivals && (result.RequeueAfter == 0 || result.RequeueAfter > arrivalsRecheck) {
		result.RequeueAfter = arrivalsRecheck
	}
	r.alarms.set(req.NamespacedName, s.outcome.LookAgain)
	r.alarms.setFor(req.NamespacedName, alarmMove, s.moves.LookAgain())
	r.alarms.setFor(req.NamespacedName, alarmRollout, s.rollout.lookAgain(r.Clock.Now()))
	if err := s.err(); err != nil {
		return ctrl.Result{}, err
	}
	return result, nil
}

// arrivalsRecheck is how soon a FleetVirtualMachine held back by copies
// arriving on a cluster looks again: they start (the agent's next score
// shows them) or fail there (their room is free again) without an event
// for it. Real time, as the agents' reports are.
const arrivalsRecheck = 5 * time.Second

// trackArrivals records the clusters a FleetVirtualMachine's copies are
// arriving on, from the status this controller just wrote or read
// (placement.Arriving.Set), and ends the assumptions of its reconcile
// that status does not list.
func (r *Reconciler) trackArrivals(fvm *fleetv1alpha1.FleetVirtualMachine) {
	clusters, landed := placement.ArrivingClusters(fvm)
	shape, ok := r.arrivingShape(fvm, clusters)
	key := client.ObjectKeyFromObject(fvm)
	r.arriving.Set(key, clusters, landed, shape, ok)
	r.arriving.Keep(key, statusClusters(fvm))
}

// observeArrivals records the clusters a FleetVirtualMachine's copies are
// arriving on as the watch delivers it (placement.Arriving.Observe).
func (r *Reconciler) observeArrivals(fvm *fleetv1alpha1.FleetVirtualMachine, deleted bool) {
	key := client.ObjectKeyFromObject(fvm)
	clusters, landed := placement.ArrivingClusters(fvm)
	if deleted {
		r.arriving.Forget(key, landed)
		return
	}
	shape, ok := r.arrivingShape(fvm, clusters)
	r.arriving.Observe(key, clusters, landed, statusClusters(fvm), shape, ok)
}

// arrivingShape is the shape of a FleetVirtualMachine with copies
// arriving (none: no shape is needed).
func (r *Reconciler) arrivingShape(fvm *fleetv1alpha1.FleetVirtualMachine, clusters []string) (capacity.Shape, bool) {
	if len(clusters) == 0 {
		return capacity.Shape{}, false
	}
	return r.shapes.Of(fvm)
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
func (r *Reconciler) deliveryTargets(fvm *fleetv1alpha1.FleetVirtualMachine, obs *observation, outcome placement.Outcome, held map[string]runner.Hold, imports map[string]*delivery.Import, plan *rolloutPlan) []delivery.Target {
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
		t := delivery.Target{Name: c, Environment: env}
		t.RunStrategy, t.Hold = held[c].RunStrategy, held[c].Hold
		t.Import = imports[c]
		if plan != nil {
			t.Revision = plan.given[c]
			if plan.restart[c] && t.RunStrategy == "" {
				// Stopped, then started on its new spec; a move's hold wins.
				t.RunStrategy = fleetv1alpha1.RunStrategyHalted
			}
		}
		out = append(out, t)
	}
	r.alarms.setFor(client.ObjectKeyFromObject(fvm), alarmOverlay, placement.OverlayWake(fvm.Status.Clusters, r.Clock.Now(), r.Config.GracePeriod))
	return out
}
