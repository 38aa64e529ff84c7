package fleetvirtualmachine

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/delivery"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/status"
	"github.com/fleetvm/fleetvm/pkg/rollout"
	"github.com/fleetvm/fleetvm/pkg/write"
)

// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=get;list;create;delete

// revisionHistoryLimit is how many revisions no cluster is given are kept
// besides the latest, for an undo.
const revisionHistoryLimit = 10

// rolloutPlan is the rollout's decision for one reconcile: the revision
// each delivered cluster is given, and the record the status keeps.
type rolloutPlan struct {
	given map[string]*delivery.Revision
	// restart are the clusters whose VM restarts now to take its
	// revision (KubeVirt's RestartRequired, in the cluster's turn): it is
	// delivered stopped until its cluster reports it stopped, then with
	// the fleet's run strategy again.
	restart map[string]bool
	record  *status.Rollout
	// recheckAt is when the plan changes with nothing reported (a soak
	// ends, a deadline passes).
	recheckAt time.Time
}

// planRollout (phase 2b, spec.rollout set) finds the latest revision,
// writing its ControllerRevision when the spec changed, and decides which
// revision each cluster the VM is delivered to is given now
// (rollout.Decide), from the record the status keeps and what the
// clusters report. The status records the plan before the ApplicationSet
// delivers it.
func (r *Reconciler) planRollout(ctx context.Context, s *scope) {
	fvm := s.fvm
	if fvm.Spec.Rollout == nil {
		return
	}
	plan, err := r.decideRollout(ctx, s)
	if err != nil {
		// Nothing is delivered from a plan that could not be made: the
		// ApplicationSet keeps what it delivers.
		s.deliverOK = false
		s.in.DeliveryErr = fmt.Errorf("rollout: %w", err)
		s.fail(s.in.DeliveryErr)
		return
	}
	s.rollout = plan
	s.in.Rollout = plan.record
}

func (r *Reconciler) decideRollout(ctx context.Context, s *scope) (*rolloutPlan, error) {
	fvm, prev := s.fvm, s.fvm.Status.Rollout
	latest := delivery.RevisionOf(fvm, 0)
	hash, err := latest.Hash()
	if err != nil {
		return nil, err
	}
	previous := int64(0)
	var history []appsv1.ControllerRevision
	if prev != nil && prev.Hash == hash {
		latest.Number, previous = prev.Revision, prev.PreviousRevision
	} else {
		if history, err = r.revisionHistory(ctx, fvm); err != nil {
			return nil, err
		}
		if prev != nil {
			previous = prev.Revision
		}
		// history, as listed before the write, holds every older revision
		// a cluster may still be given (pruning spares those).
		if latest.Number, err = r.writeRevision(ctx, fvm, latest, hash, history, previous); err != nil {
			return nil, err
		}
	}

	// Each cluster's record: a cluster with an entry and no record
	// succeeded on the revision that was the latest then (every copy runs
	// the first revision when the rollout starts); one with no entry has
	// no copy yet.
	records := map[string]*fleetv1alpha1.ClusterRollout{}
	listed := map[string]bool{}
	for i := range fvm.Status.Clusters {
		c := &fvm.Status.Clusters[i]
		listed[c.Cluster] = true
		if c.Rollout != nil {
			records[c.Cluster] = c.Rollout
		}
	}
	done := latest.Number
	if prev != nil {
		done = prev.Revision
	}
	now := s.now.Time
	in := rollout.Input{
		Strategy: *fvm.Spec.Rollout, Target: latest.Number, Previous: previous, Now: now,
		Paused:  fvm.Annotations[fleetv1alpha1.AnnotationRolloutPaused] == "true",
		Aborted: fvm.Annotations[fleetv1alpha1.AnnotationRolloutAbort] == strconv.FormatInt(latest.Number, 10),
		Failed:  prev != nil && prev.Revision == latest.Number && prev.Phase == fleetv1alpha1.RolloutPhase(rollout.Failed),
	}
	moving := s.moves.Held(s.reported)
	delivered := s.outcome.Delivered()
	groups, err := decisionGroups(s, delivered)
	if err != nil {
		return nil, err
	}
	// given reads a cluster's record: the revision it is given, since
	// when, and ready since when; succeeded when it has no record.
	given := func(c string, rc *rollout.Cluster) (succeeded bool) {
		switch rec := records[c]; {
		case rec != nil:
			rc.Given = rec.Revision
			if rec.Since != nil {
				rc.GivenAt = rec.Since.Time
			}
			if rec.ReadySince != nil {
				rc.ReadySince = rec.ReadySince.Time
			}
			rc.Reverting = rec.State == string(rollout.Reverting)
		case listed[c] || prev == nil:
			rc.Given, succeeded = done, true
		}
		return succeeded
	}
	// A move's new copy carries its source's revision: the VM moves, not
	// its change (a Live migration needs the same VM on both sides). It
	// takes the latest revision in its turn once the move ended.
	// Both ends of a move under way wait for it to end, held or not (a
	// Restart move's target runs unheld while the move verifies it).
	sourceOf := map[string]string{}
	inMove := map[string]bool{}
	for _, mv := range s.moves.Decision() {
		sourceOf[mv.To] = mv.From
		inMove[mv.From], inMove[mv.To] = true, true
	}
	for _, c := range delivered {
		rc := rollout.Cluster{Name: c, Group: groups[c]}
		succeeded := given(c, &rc)
		if from, ok := sourceOf[c]; ok && records[c] == nil && !listed[c] {
			var src rollout.Cluster
			succeeded = given(from, &src)
			rc.Given, rc.GivenAt = src.Given, src.GivenAt
		}
		_, held := moving[c]
		rc.Moving = held || inMove[c]
		if rep := s.in.Reports[c]; rep != nil && s.in.Clusters[c].Available == metav1.ConditionTrue {
			if rep.ObservedGeneration >= rep.Generation {
				rc.Running = rep.Revision
			}
			// A VM the fleet keeps stopped is as healthy as it gets once
			// stopped on its revision.
			stoppable := fvm.Spec.RunStrategy == fleetv1alpha1.RunStrategyHalted || fvm.Spec.RunStrategy == fleetv1alpha1.RunStrategyManual
			rc.Ready = rep.Ready || (stoppable && rep.PrintableStatus == string(kubevirtv1.VirtualMachineStatusStopped))
			rc.RestartRequired = strings.Contains(rep.Conditions, "RestartRequired=True")
			if status.FailedStatus(rep.PrintableStatus) {
				rc.Failure = rep.PrintableStatus
			}
		}
		switch {
		case rc.Running != rc.Given || !rc.Ready || rc.Failure != "" || rc.RestartRequired:
			if rec := records[c]; rec != nil && rec.State == string(rollout.Soaking) && rec.ReadySince != nil {
				r.Recorder.Eventf(fvm, "Normal", "RolloutSoakRestarted", "cluster %s: the soak of revision %d starts over: %s",
					c, rc.Given, soakBroken(rc, s.in.Reports[c], s.in.Clusters[c].Available))
			}
			rc.ReadySince = time.Time{}
		case succeeded:
			// Its soak passed when it succeeded.
			rc.ReadySince = time.Unix(0, 0)
		case rc.ReadySince.IsZero():
			rc.ReadySince = now
		}
		in.Clusters = append(in.Clusters, rc)
	}
	decided := rollout.Decide(in)

	byNumber := map[int64]*delivery.Revision{latest.Number: latest}
	out := &rolloutPlan{
		given:     map[string]*delivery.Revision{},
		restart:   map[string]bool{},
		recheckAt: decided.RecheckAt,
		record: &status.Rollout{
			Status: fleetv1alpha1.RolloutStatus{
				Revision: latest.Number, PreviousRevision: previous, Hash: hash,
				Phase: fleetv1alpha1.RolloutPhase(decided.Phase), Failures: int32(decided.Failures),
				Message: decided.Message,
			},
			Clusters: map[string]*fleetv1alpha1.ClusterRollout{},
		},
	}
	clusters := map[string]rollout.Cluster{}
	for _, c := range in.Clusters {
		clusters[c.Name] = c
	}
	for _, p := range decided.Clusters {
		rc := clusters[p.Name]
		rev := byNumber[p.Revision]
		if rev == nil {
			if history == nil {
				if history, err = r.revisionHistory(ctx, fvm); err != nil {
					return nil, err
				}
			}
			if rev, err = revisionNumbered(history, p.Revision); err != nil {
				return nil, fmt.Errorf("cluster %s: %w", p.Name, err)
			}
			byNumber[p.Revision] = rev
		}
		out.given[p.Name] = rev
		// A VM of runStrategy Manual or Halted is not started again by
		// its run strategy: its restart is its operator's.
		if p.Restart && (fvm.Spec.RunStrategy == fleetv1alpha1.RunStrategyAlways || fvm.Spec.RunStrategy == fleetv1alpha1.RunStrategyRerunOnFailure) {
			out.restart[p.Name] = true
		}
		switch p.State {
		case rollout.Done:
			out.record.Status.Updated++
			if p.Revision == latest.Number {
				continue // no record: succeeded on status.rollout.revision
			}
		case rollout.ToApply:
			out.record.Clusters[p.Name] = &fleetv1alpha1.ClusterRollout{Revision: p.Revision, State: string(p.State)}
			continue
		}
		rec := &fleetv1alpha1.ClusterRollout{Revision: p.Revision, State: string(p.State)}
		since := metav1.NewTime(rc.GivenAt)
		if p.Revision != rc.Given || rc.GivenAt.IsZero() {
			since = s.now
		}
		rec.Since = &since
		if !rc.ReadySince.IsZero() && p.Revision == rc.Given && p.State == rollout.Soaking {
			t := metav1.NewTime(rc.ReadySince)
			rec.ReadySince = &t
		}
		out.record.Clusters[p.Name] = rec
	}
	return out, nil
}

// soakBroken says why a soaking cluster is not counted ready on its
// revision: what an operator reads in the RolloutSoakRestarted event.
func soakBroken(rc rollout.Cluster, rep *fleetv1alpha1.VMState, available metav1.ConditionStatus) string {
	switch {
	case rep == nil:
		return "its cluster's agent reports no VM"
	case available != metav1.ConditionTrue:
		return fmt.Sprintf("its cluster is not available (%s): the report is not fresh", cmp.Or(string(available), "unknown"))
	case rep.ObservedGeneration < rep.Generation:
		return fmt.Sprintf("KubeVirt has not observed the VM's spec yet (generation %d, observed %d)", rep.Generation, rep.ObservedGeneration)
	case rc.Running != rc.Given:
		return fmt.Sprintf("its VM runs revision %d", rc.Running)
	case rc.Failure != "":
		return "its VM reports " + rc.Failure
	case rc.RestartRequired:
		return "its VM needs a restart (RestartRequired)"
	default:
		return fmt.Sprintf("its VM is not ready (%s)", cmp.Or(rep.PrintableStatus, "no status"))
	}
}

// decisionGroups are the decision groups of the clusters the VM is
// delivered to (spec.placement.decisionStrategy, as OCM divides a
// Placement's decision), from their ManagedClusters' labels and claims.
func decisionGroups(s *scope, delivered []string) (map[string]rollout.Group, error) {
	members := make([]rollout.Member, 0, len(delivered))
	for _, c := range delivered {
		members = append(members, rollout.MemberOf(c, s.obs.Facts[c].Cluster))
	}
	groups, err := rollout.Groups(s.fvm.Spec.Placement.DecisionStrategy, members)
	if err != nil {
		return nil, fmt.Errorf("spec.placement.decisionStrategy: %w", err)
	}
	return groups, nil
}

// revisionHistory lists the FleetVirtualMachine's ControllerRevisions,
// from the API server: the hub does not cache them.
func (r *Reconciler) revisionHistory(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine) ([]appsv1.ControllerRevision, error) {
	list := &appsv1.ControllerRevisionList{}
	if err := r.reader().List(ctx, list, client.InNamespace(fvm.Namespace), client.MatchingLabels(delivery.OwnerLabels(fvm))); err != nil {
		return nil, fmt.Errorf("list revisions: %w", err)
	}
	out := list.Items[:0]
	for _, cr := range list.Items {
		if metav1.IsControlledBy(&cr, fvm) {
			out = append(out, cr)
		}
	}
	return out, nil
}

func (r *Reconciler) reader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

// annotationRevisionHash on a ControllerRevision is the hash of its
// content (delivery.Revision.Hash).
const annotationRevisionHash = "fleetvm.io/revision-hash"

// writeRevision records latest as a ControllerRevision and returns its
// number: the one it was written with before when that is newer than
// previous (this reconcile's status write was refused), otherwise one
// above every revision kept. Content seen before (an undo) is a new
// revision, as a Deployment's rollback is: the clusters given the old
// number keep theirs. It prunes the revisions beyond the history limit
// that no cluster is given.
func (r *Reconciler) writeRevision(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, latest *delivery.Revision, hash string, history []appsv1.ControllerRevision, previous int64) (int64, error) {
	next := previous + 1
	for _, cr := range history {
		if cr.Annotations[annotationRevisionHash] == hash && cr.Revision > previous {
			return cr.Revision, nil
		}
		next = max(next, cr.Revision+1)
	}
	data, err := json.Marshal(latest)
	if err != nil {
		return 0, fmt.Errorf("encode revision: %w", err)
	}
	cr := &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			// "<FleetVM>-<UID>-<hash>-<number>": unique per content and
			// number, and per FleetVM of that name: the revisions of one
			// deleted a moment ago (or restored from a backup) may still
			// be there until the garbage collector takes them.
			Name:        fmt.Sprintf("%s-%.8s-%s-%d", fvm.Name, fvm.UID, hash[:8], next),
			Namespace:   fvm.Namespace,
			Labels:      delivery.OwnerLabels(fvm),
			Annotations: map[string]string{annotationRevisionHash: hash},
		},
		Data:     runtime.RawExtension{Raw: data},
		Revision: next,
	}
	if err := controllerutil.SetControllerReference(fvm, cr, r.Client.Scheme()); err != nil {
		return 0, err
	}
	created, err := write.CreateOnly(ctx, r.Client, cr)
	if err != nil {
		return 0, fmt.Errorf("write revision %s: %w", cr.Name, err)
	}
	if !created {
		// Written before (a refused status write), or someone else's.
		got := &appsv1.ControllerRevision{}
		if err := r.reader().Get(ctx, client.ObjectKeyFromObject(cr), got); err != nil {
			return 0, fmt.Errorf("read revision %s: %w", cr.Name, err)
		}
		if !metav1.IsControlledBy(got, fvm) || got.Revision != next {
			return 0, fmt.Errorf("ControllerRevision %s/%s exists and is not this FleetVirtualMachine's revision %d", cr.Namespace, cr.Name, next)
		}
	}
	return next, r.pruneRevisions(ctx, fvm, history)
}

// pruneRevisions deletes the oldest revisions beyond revisionHistoryLimit
// that no cluster is given.
func (r *Reconciler) pruneRevisions(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, history []appsv1.ControllerRevision) error {
	given := map[int64]bool{}
	for _, c := range fvm.Status.Clusters {
		if c.Rollout != nil {
			given[c.Rollout.Revision] = true
		}
	}
	slices.SortFunc(history, func(a, b appsv1.ControllerRevision) int { return int(b.Revision - a.Revision) })
	kept := 0
	for i := range history {
		if given[history[i].Revision] {
			continue
		}
		if kept++; kept <= revisionHistoryLimit {
			continue
		}
		if err := r.Client.Delete(ctx, &history[i]); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("prune revision %s: %w", history[i].Name, err)
		}
	}
	return nil
}

// revisionNumbered reads revision n from the history.
func revisionNumbered(history []appsv1.ControllerRevision, n int64) (*delivery.Revision, error) {
	for _, cr := range history {
		if cr.Revision != n {
			continue
		}
		rev := &delivery.Revision{}
		if err := json.Unmarshal(cr.Data.Raw, rev); err != nil {
			return nil, fmt.Errorf("decode revision %d (%s): %w", n, cr.Name, err)
		}
		rev.Number = n
		return rev, nil
	}
	return nil, fmt.Errorf("revision %d is given and no longer kept", n)
}

// lookAgain is how long until the plan changes with nothing reported; 0
// when nothing is timed (or no rollout).
func (p *rolloutPlan) lookAgain(now time.Time) time.Duration {
	if p == nil || p.recheckAt.IsZero() {
		return 0
	}
	return max(p.recheckAt.Sub(now), time.Millisecond)
}
