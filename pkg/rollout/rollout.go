// Package rollout decides how a FleetVirtualMachine's change reaches its
// clusters: which cluster is given which revision now, and where the
// rollout stands. It reads OCM's RolloutStrategy
// (cluster.open-cluster-management.io/v1alpha1) with the meanings OCM
// gives its fields, and differs from OCM's helper
// (open-cluster-management.io/sdk-go .../cluster/v1alpha1) where that
// would silently do something else with a VM (Decide's comment lists each
// difference; Validate refuses what the helper maps to defaults).
//
// Decide is a pure function of the strategy, the revisions and what the
// clusters report, with the clock passed in, so a hub that records its
// result in the FleetVM's status plans the same after a restart. Not
// wired to the API yet.
package rollout

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
)

// Phase is where a rollout stands.
type Phase string

const (
	// Progressing: clusters wait for the new revision or are taking it.
	Progressing Phase = "Progressing"
	// Paused: no cluster is given the new revision until resumed; those
	// given it keep it.
	Paused Phase = "Paused"
	// Succeeded: every cluster runs the new revision, ready, past its
	// soak; at least one cluster does (a rollout over none is
	// Progressing).
	Succeeded Phase = "Succeeded"
	// Failed: more clusters failed than maxFailures allows (or one in a
	// mandatory decision group): no cluster is given the new revision any
	// more; those not given it keep the previous one.
	Failed Phase = "Failed"
	// RolledBack: the rollout was aborted and every cluster given the new
	// revision has the previous one again.
	RolledBack Phase = "RolledBack"
)

// noCluster is the message of a rollout Progressing over no cluster: the
// VM is delivered nowhere yet, so no cluster runs the revision.
const noCluster = "no cluster is decided yet: each copy starts on the revision as its cluster is decided"

// State is where one cluster stands in the rollout.
type State string

const (
	// ToApply: the cluster runs the previous revision and waits its turn.
	ToApply State = "ToApply"
	// Applying: the cluster was given the new revision and its VM does not
	// run it ready yet.
	Applying State = "Applying"
	// Soaking: the VM runs the new revision ready, for less than
	// minSuccessTime.
	Soaking State = "Soaking"
	// Done: the VM has run the new revision ready for minSuccessTime.
	Done State = "Succeeded"
	// ClusterFailed: the VM reports a failure on the new revision.
	ClusterFailed State = "Failed"
	// TimedOut: the VM did not run the new revision ready within
	// progressDeadline of being given it.
	TimedOut State = "TimedOut"
	// Reverting: the rollout was aborted and the cluster is given the
	// previous revision again.
	Reverting State = "Reverting"
)

// failed reports whether s counts against maxFailures.
func (s State) failed() bool { return s == ClusterFailed || s == TimedOut }

// inFlight reports whether s holds one of maxConcurrency's places.
func (s State) inFlight() bool { return s == Applying || s == Soaking }

// Group is a cluster's decision group: OCM's
// cluster.open-cluster-management.io/decision-group-name and -index labels
// of the PlacementDecision that holds it.
type Group struct {
	Name  string
	Index int32
}

// Cluster is what the rollout knows of one cluster of the FleetVM.
type Cluster struct {
	Name  string
	Group Group
	// Given is the revision the cluster is given now (the FleetVM's
	// status); 0 for a cluster that has no copy yet.
	Given int64
	// GivenAt is when it was given Given.
	GivenAt time.Time
	// Running is the revision the cluster's VM reports it runs; 0 when
	// unknown (no fresh report).
	Running int64
	// Ready: the VM reports ready.
	Ready bool
	// Failure is the VM's failure, as KubeVirt or Argo CD reports it
	// (ErrorUnschedulable, CrashLoopBackOff, a failed sync); empty when
	// none.
	Failure string
	// ReadySince is when the VM was first seen ready on Running, by the
	// hub's clock; zero while not ready.
	ReadySince time.Time
	// RestartRequired: KubeVirt says the running VM needs a restart to
	// take its spec (the RestartRequired condition).
	RestartRequired bool
	// Reverting: an abort gave the cluster the previous revision back
	// (its record says Reverting): the rollout is rolled back only once
	// its VM runs that revision ready again.
	Reverting bool
	// Moving: a move or a drain has the cluster's copy in hand. The
	// rollout does not give it the revision until the move ended: one
	// change at a time per VM.
	Moving bool
}

// Input is what Plan decides from.
type Input struct {
	Strategy clusterv1alpha1.RolloutStrategy
	// Target is the revision being rolled out; Previous the one it
	// replaces (0 for a FleetVM's first revision).
	Target, Previous int64
	Clusters         []Cluster
	// Paused and Aborted are the operator's verbs.
	Paused, Aborted bool
	// Failed: the rollout had failed on an earlier pass (status). A
	// failed rollout stays failed until a new target or an undo, even if
	// the failed clusters recover.
	Failed bool
	Now    time.Time
}

// ClusterPlan is one cluster's part of the plan.
type ClusterPlan struct {
	Name  string
	State State
	// Revision is the revision the cluster is given now.
	Revision int64
	// Restart: the VM is to be restarted to take Revision (KubeVirt's
	// RestartRequired, in this cluster's turn).
	Restart bool
	// Reason says why a cluster waits, or what failed.
	Reason string
}

// Plan is the rollout's decision.
type Plan struct {
	Phase    Phase
	Clusters []ClusterPlan
	// Failures is how many clusters failed or timed out on the target.
	Failures int
	// RecheckAt is when the plan changes with no report changing (a soak
	// ends, a deadline passes); zero when nothing is timed.
	RecheckAt time.Time
	// Message says what the rollout waits for.
	Message string
}

// Decide plans the rollout of in.Target over in.Clusters. Where it
// differs from OCM's helper:
//
//   - Clusters are taken in decision-group order (mandatory groups first,
//     then by group index), then by name, not by name alone; a cluster
//     with no copy yet is given the target at once, even past
//     maxConcurrency (it has nothing to disrupt), and its failure counts.
//   - A failed cluster counts against maxFailures as soon as its VM
//     reports the failure and gives up its place in maxConcurrency; OCM
//     holds the place until progressDeadline.
//   - A soak counts from when the hub first saw the VM ready on the new
//     revision (ReadySince); a cluster without that time has not started
//     its soak, where OCM's helper would never advance.
//   - Once failed, a rollout gives no cluster the target again until the
//     target changes (Input.Failed), even if a failed VM recovers; the
//     clusters that had not taken it keep the previous revision.
//   - A VM that needs a restart to take the revision (RestartRequired) is
//     restarted in its cluster's turn, so at most maxConcurrency restart
//     at once.
//
// Validate must have accepted in.Strategy; Decide reads a strategy it
// cannot parse as All.
func Decide(in Input) Plan {
	cfg := configOf(in.Strategy)
	clusters := slices.Clone(in.Clusters)
	mandatory := func(g Group) bool {
		for _, m := range cfg.mandatory {
			if (m.GroupName != "" && m.GroupName == g.Name) || (m.GroupName == "" && m.GroupIndex == g.Index) {
				return true
			}
		}
		return false
	}
	slices.SortFunc(clusters, func(a, b Cluster) int {
		ma, mb := mandatory(a.Group), mandatory(b.Group)
		if ma != mb {
			if ma {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(a.Group.Index, b.Group.Index), strings.Compare(a.Name, b.Name))
	})

	plan := Plan{Clusters: make([]ClusterPlan, len(clusters))}
	var recheck []time.Time
	for i, c := range clusters {
		p := ClusterPlan{Name: c.Name, Revision: c.Given}
		p.State, p.Reason = stateOf(c, in.Target, cfg, in.Now, &recheck)
		if p.State.failed() {
			plan.Failures++
		}
		plan.Clusters[i] = p
	}

	if in.Aborted {
		return abort(in, clusters, plan)
	}

	failed := in.Failed || breached(clusters, plan.Clusters, cfg, mandatory)
	inFlight := 0
	for i, c := range clusters {
		p := &plan.Clusters[i]
		if p.State.inFlight() {
			inFlight++
		}
		if c.Given == 0 {
			// No copy yet: nothing to disrupt. It starts on the target
			// unless the rollout stopped, then on the revision that works.
			give(p, in.Target)
			p.Reason = "a new copy starts on the revision"
			if failed && in.Previous != 0 {
				p.Revision = in.Previous
				p.State, p.Reason = ToApply, "the rollout failed: a new copy starts on the previous revision"
			}
		}
	}

	switch {
	case failed:
		plan.Phase = Failed
		plan.Message = fmt.Sprintf("%d of %d clusters failed the revision: no other cluster is given it", plan.Failures, len(clusters))
	case in.Paused:
		plan.Phase = Paused
		plan.Message = "paused: no other cluster is given the revision until resumed"
	default:
		plan.Phase = Progressing
		admit(clusters, &plan, in.Target, cfg, mandatory, inFlight)
	}
	for i := range plan.Clusters {
		p := &plan.Clusters[i]
		if p.State.inFlight() && clusters[i].RestartRequired && clusters[i].Running == in.Target {
			p.Restart = true
		}
		if (plan.Phase == Failed || plan.Phase == Paused) && p.State == ToApply && p.Reason == "" {
			p.Reason = string(plan.Phase)
		}
	}
	switch {
	case plan.Phase != Progressing:
	case len(plan.Clusters) == 0:
		// Nothing runs the revision yet: a rollout over no cluster has
		// not succeeded (the placement has decided none so far).
		plan.Message = noCluster
	case allDone(plan.Clusters):
		plan.Phase, plan.Message = Succeeded, ""
	}
	plan.RecheckAt = earliest(recheck)
	return plan
}

// config is a strategy read once: what Decide needs of whichever of All,
// Progressive and ProgressivePerGroup it is.
type config struct {
	typ            clusterv1alpha1.RolloutType
	minSuccessTime time.Duration
	deadline       time.Duration // 0: none
	maxFailures    func(of int) int
	maxConcurrency func(of int) int
	mandatory      []clusterv1alpha1.MandatoryDecisionGroup
}

func configOf(s clusterv1alpha1.RolloutStrategy) config {
	all := func(of int) int { return of }
	none := func(int) int { return 0 }
	c := config{typ: clusterv1alpha1.All, maxFailures: all, maxConcurrency: all}
	var rc clusterv1alpha1.RolloutConfig
	switch {
	case s.Type == clusterv1alpha1.Progressive && s.Progressive != nil:
		rc = s.Progressive.RolloutConfig
		c.typ, c.mandatory = s.Type, s.Progressive.MandatoryDecisionGroups.MandatoryDecisionGroups
		c.maxConcurrency = size(s.Progressive.MaxConcurrency, all)
		c.maxFailures = size(rc.MaxFailures, none)
	case s.Type == clusterv1alpha1.ProgressivePerGroup:
		c.typ = s.Type
		if s.ProgressivePerGroup != nil {
			rc = s.ProgressivePerGroup.RolloutConfig
			c.mandatory = s.ProgressivePerGroup.MandatoryDecisionGroups.MandatoryDecisionGroups
		}
		c.maxFailures = size(rc.MaxFailures, none)
	case s.All != nil:
		rc = s.All.RolloutConfig
	}
	c.minSuccessTime = rc.MinSuccessTime.Duration
	if d, err := parseDeadline(rc.ProgressDeadline); err == nil {
		c.deadline = d
	}
	if c.typ == clusterv1alpha1.All {
		// OCM reads neither for All.
		c.minSuccessTime = 0
		c.maxFailures = all
	}
	return c
}

// stateOf is where cluster c stands toward target, and the time its state
// changes with nothing reported (appended to recheck).
func stateOf(c Cluster, target int64, cfg config, now time.Time, recheck *[]time.Time) (State, string) {
	if c.Given != target {
		return ToApply, ""
	}
	if c.Running == target && c.Failure == "" && c.Ready && !c.RestartRequired {
		if c.ReadySince.IsZero() {
			return Soaking, "ready; its soak starts when the hub records the time"
		}
		if end := c.ReadySince.Add(cfg.minSuccessTime); now.Before(end) {
			*recheck = append(*recheck, end)
			return Soaking, fmt.Sprintf("ready, soaking until %s", end.UTC().Format(time.RFC3339))
		}
		return Done, ""
	}
	if c.Running == target && c.Failure != "" {
		return ClusterFailed, c.Failure
	}
	if cfg.deadline > 0 && !c.GivenAt.IsZero() {
		end := c.GivenAt.Add(cfg.deadline)
		if !now.Before(end) {
			return TimedOut, fmt.Sprintf("not ready on the revision within progressDeadline (%s)", cfg.deadline)
		}
		*recheck = append(*recheck, end)
	}
	switch {
	case c.Running != target:
		return Applying, "its VM does not run the revision yet"
	case c.RestartRequired:
		return Applying, "its VM needs a restart to take the revision"
	}
	return Applying, "its VM runs the revision, not ready yet"
}

// breached reports whether the failures stop the rollout: any in a
// mandatory decision group, or more than maxFailures of the others (of
// all of them for Progressive, of each group for ProgressivePerGroup).
func breached(clusters []Cluster, plans []ClusterPlan, cfg config, mandatory func(Group) bool) bool {
	if cfg.typ == clusterv1alpha1.All {
		return false
	}
	total := map[Group]int{}
	failures := map[Group]int{}
	for i, c := range clusters {
		g := c.Group
		if mandatory(g) {
			if plans[i].State.failed() {
				return true
			}
			continue
		}
		if cfg.typ == clusterv1alpha1.Progressive {
			g = Group{} // one pool
		}
		total[g]++
		if plans[i].State.failed() {
			failures[g]++
		}
	}
	for g, n := range failures {
		if n > cfg.maxFailures(total[g]) {
			return true
		}
	}
	return false
}

// admit gives the target to the clusters whose turn it is: in a mandatory
// group, group by group with every cluster of a group at once; then for
// Progressive up to maxConcurrency in flight, for ProgressivePerGroup the
// next group once every cluster before it is done or failed within
// maxFailures, for All every cluster.
func admit(clusters []Cluster, plan *Plan, target int64, cfg config, mandatory func(Group) bool, inFlight int) {
	// Mandatory groups first, each whole, the next once the one before
	// is done.
	var waiting string
	groupDone := func(g Group) bool {
		for i, c := range clusters {
			if c.Group == g && plan.Clusters[i].State != Done {
				return false
			}
		}
		return true
	}
	var current *Group
	for i, c := range clusters {
		if !mandatory(c.Group) {
			continue
		}
		if current != nil && *current != c.Group {
			if !groupDone(*current) {
				waiting = fmt.Sprintf("waits for mandatory decision group %s", groupName(*current))
				break
			}
		}
		g := c.Group
		current = &g
		if plan.Clusters[i].State == ToApply {
			turn(c, &plan.Clusters[i], target)
		}
	}
	if current != nil && waiting == "" && !groupDone(*current) {
		waiting = fmt.Sprintf("waits for mandatory decision group %s", groupName(*current))
	}
	if waiting != "" {
		markWaiting(plan, waiting)
		plan.Message = waiting
		return
	}

	switch cfg.typ {
	case clusterv1alpha1.All:
		for i, c := range clusters {
			if plan.Clusters[i].State == ToApply {
				turn(c, &plan.Clusters[i], target)
			}
		}
	case clusterv1alpha1.Progressive:
		var rest int
		for _, c := range clusters {
			if !mandatory(c.Group) {
				rest++
			}
		}
		limit := max(cfg.maxConcurrency(rest), 1)
		for i, c := range clusters {
			if mandatory(c.Group) || plan.Clusters[i].State != ToApply {
				continue
			}
			if inFlight >= limit {
				plan.Clusters[i].Reason = fmt.Sprintf("waits for a place: %d of maxConcurrency %d in flight", inFlight, limit)
				continue
			}
			if turn(c, &plan.Clusters[i], target) {
				inFlight++
			}
		}
	case clusterv1alpha1.ProgressivePerGroup:
		var blocking *Group
		for i, c := range clusters {
			if mandatory(c.Group) {
				continue
			}
			if blocking != nil && *blocking != c.Group {
				plan.Clusters[i].Reason = fmt.Sprintf("waits for decision group %s", groupName(*blocking))
				continue
			}
			if plan.Clusters[i].State == ToApply {
				turn(c, &plan.Clusters[i], target)
			}
			if st := plan.Clusters[i].State; st != Done && !st.failed() {
				g := c.Group
				blocking = &g
			}
		}
	}
	plan.Message = progressMessage(plan.Clusters)
}

// turn gives the target to a cluster whose turn it is, unless a move has
// its copy in hand; it reports whether it gave it.
func turn(c Cluster, p *ClusterPlan, target int64) bool {
	if c.Moving {
		p.Reason = "waits for the move of its copy to end"
		return false
	}
	give(p, target)
	return true
}

func give(p *ClusterPlan, target int64) {
	p.Revision = target
	p.State = Applying
	p.Reason = "given the revision"
}

func markWaiting(plan *Plan, why string) {
	for i := range plan.Clusters {
		if p := &plan.Clusters[i]; p.State == ToApply && p.Reason == "" {
			p.Reason = why
		}
	}
}

// abort gives the previous revision back to every cluster given the
// target, all at once, restarting those whose VM needs it to run the
// previous spec (RestartRequired): RolledBack once each runs it ready
// again, with nothing left to restart. A cluster stays Reverting across
// steps (Cluster.Reverting) until then.
func abort(in Input, clusters []Cluster, plan Plan) Plan {
	back := 0
	for i, c := range clusters {
		p := &plan.Clusters[i]
		if in.Previous == 0 || (c.Given != in.Target && c.Given != 0 && !c.Reverting) {
			continue
		}
		p.Revision = in.Previous
		switch {
		case c.Running == in.Previous && c.RestartRequired:
			p.State, p.Reason, p.Restart = Reverting, "aborted: restarted to run the previous revision", true
			back++
		case c.Running != in.Previous || !c.Ready || c.Failure != "":
			p.State, p.Reason = Reverting, "aborted: given the previous revision again"
			back++
		default:
			p.State, p.Reason = ToApply, "aborted: runs the previous revision"
		}
	}
	plan.Phase = RolledBack
	if back > 0 {
		plan.Phase = Progressing
		plan.Message = fmt.Sprintf("aborted: %d clusters return to revision %d", back, in.Previous)
	}
	return plan
}

func allDone(ps []ClusterPlan) bool {
	for _, p := range ps {
		if p.State != Done {
			return false
		}
	}
	return true
}

func progressMessage(ps []ClusterPlan) string {
	counts := map[State]int{}
	for _, p := range ps {
		counts[p.State]++
	}
	var parts []string
	for _, s := range []State{Done, Soaking, Applying, ToApply, ClusterFailed, TimedOut} {
		if counts[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[s], s))
		}
	}
	return strings.Join(parts, ", ")
}

func groupName(g Group) string {
	if g.Name != "" {
		return g.Name
	}
	return fmt.Sprintf("%d", g.Index)
}

func earliest(ts []time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if out.IsZero() || t.Before(out) {
			out = t
		}
	}
	return out
}
