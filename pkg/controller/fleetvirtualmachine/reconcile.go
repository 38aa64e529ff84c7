package fleetvirtualmachine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/argoapp"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/delivery"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/move/runner"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/placement"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/status"
	"github.com/fleetvm/fleetvm/pkg/tenancy"
	"github.com/fleetvm/fleetvm/pkg/vmclaim"
	"github.com/fleetvm/fleetvm/pkg/write"
)

// scope carries what the phases of one reconcile of a FleetVirtualMachine
// share, in the order Reconcile fills it. Each phase reads what the ones
// before it left, adds its own, and keeps going after an error: the error
// is kept (fail) and returned at the end, and what it leaves unknown is
// recorded as such in the status (the Placement and delivery errors of
// Inputs). Only record stops a reconcile early.
type scope struct {
	fvm    *fleetv1alpha1.FleetVirtualMachine
	before *fleetv1alpha1.FleetVirtualMachine // as read, for the status patch and events
	now    metav1.Time

	// readFleet
	obs *observation
	// stepMoves: what the moves ask of the rest of the reconcile
	moves runner.Plan
	// decide
	outcome    placement.Outcome
	waiting    bool     // the status lists why clusters are left out
	qualifying []string // clusters the scheduler now finds qualify
	// moveQualifying: the same, for a move waiting for the scheduler to
	// add a cluster to the candidate decision (stepMoves)
	moveQualifying []string
	// readDelivery
	project   string
	appSet    *argoapp.ApplicationSet // as read; nil if none
	deliverOK bool                    // project and ApplicationSet read: delivery may act
	// planRollout: the revision each cluster is given (spec.rollout set)
	rollout *rolloutPlan

	// in is the status's input, filled by every phase.
	in   status.Inputs
	errs []error
}

func (r *Reconciler) newScope(fvm *fleetv1alpha1.FleetVirtualMachine) *scope {
	now := metav1.NewTime(r.Clock.Now())
	return &scope{
		fvm: fvm, before: fvm.DeepCopy(), now: now,
		in: status.Inputs{
			Spec: fvm.Spec, Generation: fvm.Generation, GracePeriod: r.Config.GracePeriod, Previous: fvm.Status, Now: now,
			PlacementRef: &fleetv1alpha1.PlacementStatus{Namespace: r.Config.ArgoNamespace}, VM: deliveredVM(fvm),
		},
	}
}

// deliveredVM is the VM's namespace and name on the clusters when the hub
// delivers it from an inline template; zero for a git source.
func deliveredVM(fvm *fleetv1alpha1.FleetVirtualMachine) types.NamespacedName {
	if _, inline := vmclaim.Key(fvm); !inline {
		return types.NamespacedName{}
	}
	return vmclaim.Identity(fvm)
}

// fail keeps err, if any, for the end of the reconcile.
func (s *scope) fail(err error) {
	if err != nil {
		s.errs = append(s.errs, err)
	}
}

// err is every error the phases kept.
func (s *scope) err() error { return errors.Join(s.errs...) }

func (s *scope) key() types.NamespacedName {
	return types.NamespacedName{Namespace: s.fvm.Namespace, Name: s.fvm.Name}
}

// reconcileGone releases what a FleetVirtualMachine that is gone left:
// its alarm, its expectation, and what FleetVMs
// deleted together left behind in its namespace.
func (r *Reconciler) reconcileGone(ctx context.Context, key types.NamespacedName) (ctrl.Result, error) {
	r.alarms.set(key, 0)
	r.expect.Forget(key)
	r.shapes.Forget(key)
	r.valid.forget(key)
	if err := r.moveRunner().Forget(ctx, key, r.Clock.Now()); err != nil {
		return ctrl.Result{}, err
	}
	return r.sweepReleased(ctx, key.Namespace)
}

// ensureFinalizer adds the finalizer that holds the FleetVirtualMachine
// until its VMs are dealt with. fleetvm-hub's mutating webhook puts it
// there at creation (pkg/webhook), so this sends nothing in the normal
// path; it is the fallback for objects created without it: webhooks off
// or down, or created before the webhook existed.
func (r *Reconciler) ensureFinalizer(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine) error {
	added, err := write.AddFinalizer(ctx, r.Client, fvm, fleetv1alpha1.FleetVirtualMachineFinalizer)
	if err != nil {
		return fmt.Errorf("add finalizer: %w", err)
	}
	if added {
		r.expect.Wrote(fvm)
	}
	return nil
}

// readFleet (phase 1) reads the Placement and the scheduler's decision,
// the Applications, the clusters and the agents' reports, and mirrors the
// cluster sets the namespace may use into the Argo CD namespace, where
// Argo CD imports their clusters.
func (r *Reconciler) readFleet(ctx context.Context, s *scope) {
	obs, err := r.observe(ctx, s.fvm)
	s.fail(err)
	s.obs = obs
	s.in.UnboundSets = obs.Unbound
	if obs.Candidate != nil {
		s.in.PlacementRef.Name = obs.Candidate.Name
	}
	if len(obs.Allowed) == 0 {
		// No set this namespace may use: nothing new is placed.
		obs.Scheduled = false
	}
	s.in.PlacementErr = errors.Join(r.ensureBindings(ctx, s.fvm, obs.Allowed), r.ensureSharedGitOps(ctx, obs.Allowed))
}

// decide (phase 2) runs the pure decision (placement.Decide) and, while clusters
// are still wanted, says why the others are left out, from what the
// scheduler sees: for the status, and to ask for a new schedule when that
// says a cluster now qualifies.
func (r *Reconciler) decide(ctx context.Context, s *scope) {
	in := r.decisionInput(s.fvm, s.obs, s.now)
	in.Moves = s.moves.Decision()
	s.outcome = placement.Decide(in)
	s.noteMoves()
	obs := s.obs
	s.waiting = obs.Scheduled && obs.PlacementErr == nil && len(obs.Allowed) > 0 && s.in.PlacementErr == nil &&
		wantsExclusions(s.fvm.Spec, len(s.outcome.InState(placement.Placed)))
	if !s.waiting {
		return
	}
	var err error
	s.in.Excluded, s.qualifying, err = r.exclusions(ctx, s.fvm, obs.Decision, obs.Candidates, s.outcome, s.now)
	s.fail(err)
}

// writePlacement (phase 3) writes the candidate Placement when the intent
// changed or a new schedule is asked for.
func (r *Reconciler) writePlacement(ctx context.Context, s *scope) {
	obs := s.obs
	if obs.PlacementErr != nil {
		s.in.PlacementErr = errors.Join(s.in.PlacementErr, obs.PlacementErr)
	} else if len(obs.Allowed) > 0 {
		waiting, qualifying := s.waiting, s.qualifying
		if len(qualifying) == 0 && len(s.moveQualifying) > 0 {
			waiting, qualifying = true, s.moveQualifying
		}
		want := withReschedule(obs.Candidate, rescheduleToken(obs.Placement, waiting, qualifying))
		if p, written, err := r.reconcilePlacement(ctx, s.fvm, want, obs.Placement); err != nil {
			s.in.PlacementErr = errors.Join(s.in.PlacementErr, err)
		} else if written {
			// Its decision answers the old spec until rescheduled.
			obs.Scheduled, obs.SchedulerMessage = scheduled(p)
		}
	}
	s.fail(s.in.PlacementErr)
	s.in.PlacementScheduled, s.in.PlacementMessage = obs.Scheduled, obs.SchedulerMessage
	s.in.Decision, s.in.Outcome = obs.Decision, s.outcome
}

// readDelivery (the rest of phase 1, once the Placement is settled) reads
// the project the Applications run under, the ApplicationSet, what the
// clusters report and the disk images the VM uses.
func (r *Reconciler) readDelivery(ctx context.Context, s *scope) {
	project, projectErr := r.deliveryProject(ctx, s.fvm)
	if projectErr != nil {
		s.in.DeliveryErr = projectErr
		if !status.IsForbidden(projectErr) { // a refused project is the user's to fix: the status says so
			s.fail(projectErr)
		}
	}
	s.project = project
	s.in.Namespace, s.in.Project = s.fvm.Namespace, tenancy.ProjectFor(s.fvm.Namespace, s.fvm.Spec.Delivery.Project)
	s.in.Impersonation = r.readImpersonation(ctx)
	appSet, appSetErr := r.getOwned(ctx, s.fvm, &argoapp.ApplicationSet{}, delivery.ChildName(s.key()))
	if appSetErr != nil {
		s.in.DeliveryErr = appSetErr
		s.fail(appSetErr)
	}
	if appSet != nil {
		s.appSet = appSet.(*argoapp.ApplicationSet)
	}
	s.deliverOK = projectErr == nil && appSetErr == nil
	s.in.AppSetExists = appSet != nil
	r.readClusterState(s.obs, &s.in)
	s.fail(r.readDiskImages(ctx, s.fvm, &s.in))
}

// record (phase 4) writes the decision into the status before anything
// acts on it, and tells what changed in events. It returns false when the
// reconcile must stop: the write was refused (the error is kept), or the
// cache is behind the API server (stale: the errors kept are dropped, there
// is nothing to retry), and the newer object (most often this controller's
// own previous status write) is on its way through the watch and brings
// the next reconcile, which decides again from it. Acting now could act on
// a stale record.
func (r *Reconciler) record(ctx context.Context, s *scope) bool {
	s.fvm.Status = status.Compute(s.in)
	switch err := r.patchStatusIfChanged(ctx, s.before, s.fvm); {
	case write.Stale(err):
		s.errs = nil
		return false
	case err != nil:
		s.fail(err)
		return false
	}
	r.recordTransitions(s.before, s.fvm)
	r.recordClusterChanges(s.fvm, s.before.Status, s.outcome)
	r.load.Set(s.key(), statusClusters(s.fvm))
	r.trackArrivals(s.fvm)
	s.fail(r.releasePlacement(ctx, s.fvm, s.before.Status.Placement))
	return true
}

// deliver (phase 5) acts on the recorded decision: the ApplicationSet
// delivers to the recorded clusters (their namespaces first), Applications
// Argo CD made before are adopted and missing ones refreshed, and the
// Applications of clusters whose grace period ended are removed (with
// their VM) or released (without).
func (r *Reconciler) deliver(ctx context.Context, s *scope) ctrl.Result {
	var result ctrl.Result
	// A Cold move's export is up before its target imports from it.
	s.fail(r.moveRunner().EnsureWorks(ctx, s.fvm, s.moves))
	if s.deliverOK {
		targets := r.deliveryTargets(s.fvm, s.obs, s.outcome, s.moves.Held(s.reported), s.moves.Imports(), s.rollout)
		s.fail(r.ensureNamespaces(ctx, s.fvm, append(s.outcome.Delivered(), s.moves.Importing()...)))
		written, err := r.reconcileApplicationSet(ctx, s.fvm, s.appSet, s.project, targets)
		if err != nil {
			s.fail(err)
			r.reportDeliveryError(ctx, s.fvm, err)
		}
		if written != nil {
			apps := make([]argoapp.Application, 0, len(s.obs.Apps))
			for _, a := range s.obs.Apps {
				apps = append(apps, *a)
			}
			s.fail(r.adoptApplications(ctx, written, apps))
			wait, err := r.refreshIfMissing(ctx, s.fvm, written, s.obs.Apps)
			s.fail(err)
			result.RequeueAfter = wait
		}
	}
	for _, c := range s.outcome.Remove {
		// Only once the ApplicationSet as read no longer delivers there:
		// Argo CD would create the Application again, and with it the VM.
		// The write above brings the next reconcile.
		if s.appSet == nil || !slices.Contains(delivery.Targets(s.appSet), c) {
			s.fail(r.removeApplication(ctx, s.obs.Apps[c], true))
		}
	}
	for _, c := range s.outcome.Release {
		s.fail(r.removeApplication(ctx, s.obs.Apps[c], false))
	}
	return result
}
