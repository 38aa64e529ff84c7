package placement

import (
	"fmt"
	"maps"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// This file holds the one rule that decides where the VM is: who stays, who
// leaves, who is removed now, who is added, and when to look again. It is a
// pure function of explicit inputs (the clock included) so that every case
// is unit-tested and fuzzed without a client.
//
// The rule: a VM leaves a cluster only when the user's intent excludes that
// cluster (the FleetVirtualMachine's spec, the cluster's labels, its
// cluster-set membership, the cluster deleted), and only after the grace
// period. What the OCM scheduler decides only chooses where new copies go:
// missing capacity, an expired score, an unavailable or unreachable
// cluster, a restarted scheduler or a Placement deleted by hand never
// remove a VM, and a lost cluster's copy is not replaced elsewhere (a VM is
// not a stateless replica: two copies of one server must not run when the
// cluster comes back).

// IntentKind says whether the FleetVirtualMachine's intent includes a
// cluster.
type IntentKind int

const (
	// IntentUnknown: the cluster's facts could not be read. Keep the VM,
	// start no clock, remove nothing.
	IntentUnknown IntentKind = iota
	IntentIncluded
	IntentExcluded
	// IntentGone: the ManagedCluster does not exist. Excluded; once the
	// grace period passes the VM cannot be reached to be removed, so its
	// Application is let go and the cluster forgotten.
	IntentGone
)

// Intent is the intent for one cluster, with the reason when it
// excludes it.
type Intent struct {
	Kind   IntentKind
	Reason string
}

// AppPresence is what the hub holds of a cluster's Argo CD Application.
type AppPresence int

const (
	AppNone AppPresence = iota
	AppLive
	AppDeleting
)

// presence is what the hub knows of the VM on one cluster.
type Presence struct {
	// Recorded: status.clusters has an entry: FleetVM placed the VM there.
	Recorded     bool
	LeavingSince *metav1.Time
	// LeavingForSurplus: it leaves because the user lowered
	// spec.placement.clusters (the status's message says so).
	LeavingForSurplus bool
	RemovingSince     *metav1.Time
	App               AppPresence
	// AppBlocked is why Argo CD could not remove the VM if FleetVM deleted
	// the Application now (Argo CD reports the Application invalid, for
	// instance when it has no cluster secret for the destination: it would
	// drop its resources finalizer and leave the VM). Empty when it can.
	AppBlocked string
	// Reported: the cluster's agent reports the VM there.
	Reported bool
}

// present tells whether the VM is on the cluster: FleetVM recorded it
// there, an Application delivers it, or the cluster's agent reports it.
// The clusters are the truth: a copy only reported (left running by an
// earlier FleetVirtualMachine deleted with Orphan, after a hub restore,
// on a cluster imported again) is adopted: it stays, counts toward
// spec.placement.clusters and follows the same grace-period rule as any
// other.
func (p Presence) Present() bool { return p.Recorded || p.App != AppNone || p.Reported }

// Input is everything the decision reads.
type Input struct {
	Now         time.Time
	GracePeriod time.Duration
	// Desired is spec.placement.clusters; nil means every cluster that
	// qualifies.
	Desired *int32
	// DesiredBefore is the number of copies the status last said were
	// desired (nil: no status yet, as for a FleetVirtualMachine created or
	// restored from a backup). Only a Desired lower than it makes copies
	// leave for being too many: copies found running beyond Desired are the
	// clusters' truth, kept and shown, not removed (Surplus).
	DesiredBefore *int32
	// Scheduled says Decision is the OCM scheduler's answer to the
	// Placement as it is now; until then nothing is added.
	Scheduled bool
	// Decision are the clusters the OCM scheduler selected.
	Decision []string
	// Clusters: what the hub knows of the VM on every cluster it may be on
	// (status, Applications, reports).
	Clusters map[string]Presence
	// Intent of every cluster in Clusters and Decision; a cluster missing
	// here is IntentUnknown.
	Intent map[string]Intent
	// Moves are the intended moves under way (FleetVirtualMachineMoves).
	Moves []Move
}

// Move is what an intended move asks of the decision now (move.Step).
type Move struct {
	// Name of the FleetVirtualMachineMove.
	Name     string
	From, To string
	// To holds the moving VM: it is delivered there, as the same copy, not
	// another one (it neither counts as surplus nor lets another copy in).
	// RemoveFrom: the VM is ready on To; From's copy is removed now,
	// without a grace period: the move is the intent. RemoveTo: the move
	// rolled back; To's copy is removed now.
	RemoveFrom, RemoveTo bool
}

// State is where a cluster stands in FleetVM's record.
type State string

const (
	Placed   State = "Placed"
	Leaving  State = "Leaving"
	Removing State = "Removing"
)

// Plan is the decision for one cluster.
type Plan struct {
	State State
	// Since is when the cluster started leaving or removal started.
	Since *metav1.Time
	// Reason is why it leaves, or why its removal waits.
	Reason string
	// Added: the cluster is new in this decision.
	Added bool
	// Blocked: the grace period passed but the VM cannot be removed yet.
	Blocked bool
}

// Outcome is the decision.
type Outcome struct {
	// Clusters is FleetVM's record afterwards: one plan per cluster the VM
	// is on or goes to.
	Clusters map[string]Plan
	// Remove: delete these clusters' Applications now, with Argo CD's
	// resources finalizer, so Argo CD deletes the VM.
	Remove []string
	// Release: delete these clusters' Applications without it: the
	// ManagedCluster is gone, nothing can reach the VM.
	Release []string
	// Dropped: clusters no longer recorded (their VM is confirmed gone, or
	// the cluster is).
	Dropped []string
	// LookAgain is when a leaving cluster's grace period ends (0: none).
	LookAgain time.Duration
	// Surplus are placed clusters beyond spec.placement.clusters that are
	// kept: more copies run than asked (found on the clusters), and the
	// user's intent did not lower the count. Nothing removes them on its
	// own; the status says where they run.
	Surplus []string
}

// Delivered are the clusters the ApplicationSet delivers to, sorted:
// placed and leaving ones (a leaving cluster's VM is kept up to date until
// it is removed).
func (o Outcome) Delivered() []string {
	var out []string
	for c, p := range o.Clusters {
		if p.State != Removing {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// InState returns the clusters in a state, sorted.
func (o Outcome) InState(s State) []string {
	var out []string
	for c, p := range o.Clusters {
		if p.State == s {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

func (in Input) intent(cluster string) Intent {
	if i, ok := in.Intent[cluster]; ok {
		return i
	}
	return Intent{Kind: IntentUnknown}
}

// Decide applies the rule.
func Decide(in Input) Outcome {
	out := Outcome{Clusters: map[string]Plan{}}
	now := metav1.NewTime(in.Now)
	inDecision := map[string]bool{}
	for _, c := range in.Decision {
		inDecision[c] = true
	}

	// Moves come first: their target is the moving copy, and a source
	// whose VM is ready on the target is removed now.
	moving := map[string]bool{}
	now0 := in
	now0.GracePeriod = 0
	for _, m := range in.Moves {
		moving[m.To] = true
		p := in.Clusters[m.To]
		switch {
		case p.RemovingSince != nil:
			moving[m.To] = false // runs to its end below
		case m.RemoveTo:
			if p.Present() {
				out.leave(now0, m.To, p, Intent{Kind: IntentExcluded, Reason: "move " + m.Name + " rolled back"}, now)
			}
		default:
			out.Clusters[m.To] = Plan{State: Placed, Added: !p.Present(), Reason: "receives the VM moved from " + m.From + " (move " + m.Name + ")"}
		}
		if m.RemoveFrom {
			if p := in.Clusters[m.From]; p.Present() && p.RemovingSince == nil {
				moving[m.From] = true
				out.leave(now0, m.From, p, Intent{Kind: IntentExcluded, Reason: "moved to " + m.To + " (move " + m.Name + ")"}, now)
			}
		}
	}

	// Clusters the VM is on, in a stable order.
	var placed []string
	for _, c := range slices.Sorted(maps.Keys(in.Clusters)) {
		p := in.Clusters[c]
		if !p.Present() || moving[c] {
			continue
		}
		if p.RemovingSince != nil {
			// A removal that started runs to its end: confirmed once no
			// Application is left and the agent no longer reports the VM.
			if p.App == AppNone && !p.Reported {
				out.Dropped = append(out.Dropped, c)
				continue
			}
			plan := Plan{State: Removing, Since: p.RemovingSince}
			if p.App == AppLive {
				// Recreated (a generator that had not seen the change yet):
				// remove it again.
				out.Remove = append(out.Remove, c)
			}
			out.Clusters[c] = plan
			continue
		}
		switch i := in.intent(c); i.Kind {
		case IntentIncluded:
			out.Clusters[c] = Plan{State: Placed}
			placed = append(placed, c)
		case IntentUnknown:
			// Keep; a cluster that was leaving keeps its clock, but
			// nothing is removed on facts that cannot be read.
			if p.LeavingSince != nil {
				out.Clusters[c] = Plan{State: Leaving, Since: p.LeavingSince, Blocked: true,
					Reason: "the cluster's labels and cluster sets cannot be read; nothing is removed until they can"}
				continue
			}
			out.Clusters[c] = Plan{State: Placed}
			placed = append(placed, c)
		default:
			out.leave(in, c, p, i, now)
		}
	}

	// Fewer copies asked for than placed. When the user lowered
	// spec.placement.clusters, the surplus leaves: clusters already
	// leaving go first (so the choice does not flap), then those the
	// scheduler no longer picks, then by name. Otherwise (copies found
	// running, none asked away) only those already leaving go on leaving;
	// the others are kept and reported as surplus.
	lowered := in.Desired != nil && in.DesiredBefore != nil && *in.Desired < *in.DesiredBefore
	if in.Desired != nil && len(placed) > int(*in.Desired) {
		slices.SortStableFunc(placed, func(a, b string) int {
			la, lb := in.Clusters[a].LeavingSince != nil, in.Clusters[b].LeavingSince != nil
			if la != lb {
				return boolOrder(la, lb)
			}
			if inDecision[a] != inDecision[b] {
				return boolOrder(!inDecision[a], !inDecision[b])
			}
			return 0
		})
		for _, c := range placed[int(*in.Desired):] {
			if p := in.Clusters[c]; !lowered && (p.LeavingSince == nil || !p.LeavingForSurplus) {
				out.Surplus = append(out.Surplus, c)
				continue
			}
			out.leave(in, c, in.Clusters[c], Intent{
				Kind: IntentExcluded, Reason: fmt.Sprintf("%s %d", SurplusReason, *in.Desired),
			}, now)
		}
		slices.Sort(out.Surplus)
	}

	// New copies go where the scheduler decided, to clusters the intent
	// includes, while copies are missing. Every copy that exists counts,
	// leaving and removing ones too: a move starts the new copy only once
	// the old one is gone.
	if in.Scheduled {
		copies := len(out.Clusters)
		for _, c := range slices.Sorted(slices.Values(in.Decision)) {
			if _, ok := out.Clusters[c]; ok || in.Clusters[c].Present() {
				continue
			}
			if in.intent(c).Kind != IntentIncluded {
				continue
			}
			if in.Desired != nil && copies >= int(*in.Desired) {
				break
			}
			out.Clusters[c] = Plan{State: Placed, Added: true}
			copies++
		}
	}
	slices.Sort(out.Remove)
	slices.Sort(out.Release)
	slices.Sort(out.Dropped)
	return out
}

// leave records a cluster the intent excludes: leaving until the grace
// period has passed, then removed, released or dropped.
func (o *Outcome) leave(in Input, c string, p Presence, i Intent, now metav1.Time) {
	// The status keeps whole seconds: the time recorded is rounded up, so
	// the grace period read back from it is never short.
	since := metav1.NewTime(now.Truncate(time.Second))
	if since.Before(&now) {
		since = metav1.NewTime(since.Add(time.Second))
	}
	if p.LeavingSince != nil {
		since = *p.LeavingSince
	}
	plan := Plan{State: Leaving, Since: &since, Reason: i.Reason}
	left := in.GracePeriod - in.Now.Sub(since.Time)
	if left > 0 && in.GracePeriod > 0 { // none: a move removes at once
		o.Clusters[c] = plan
		if o.LookAgain == 0 || left < o.LookAgain {
			o.LookAgain = left
		}
		return
	}
	switch {
	case i.Kind == IntentGone:
		if p.App != AppNone {
			o.Release = append(o.Release, c)
		}
		o.Dropped = append(o.Dropped, c)
	case p.App == AppLive && p.AppBlocked != "":
		plan.Blocked = true
		plan.Reason = i.Reason + "; the grace period is over but the VM is not removed: " + p.AppBlocked
		o.Clusters[c] = plan
	case p.App == AppLive:
		o.Clusters[c] = Plan{State: Removing, Since: &now, Reason: i.Reason}
		o.Remove = append(o.Remove, c)
	case p.App == AppNone && !p.Reported:
		// Nothing is there to remove.
		o.Dropped = append(o.Dropped, c)
	default:
		// The Application is missing (deleted by hand, not regenerated
		// yet) or being deleted by someone else: only an Application makes
		// Argo CD remove the VM, so wait for it.
		plan.Blocked = true
		plan.Reason = i.Reason + "; the grace period is over: waiting for Argo CD's Application to remove the VM"
		o.Clusters[c] = plan
	}
}

// SurplusReason starts the reason of a copy that leaves because the user
// lowered spec.placement.clusters.
const SurplusReason = "spec.placement.clusters asks for"

// boolOrder sorts false before true.
func boolOrder(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	default:
		return 1
	}
}
