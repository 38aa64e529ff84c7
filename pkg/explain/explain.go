// Package explain says, for every cluster a FleetVirtualMachine could use,
// why the OCM scheduler chose it or not. It works from the inputs the
// scheduler sees (the cluster's labels and taints, the fleetvm agent's
// capacity score, the Placement's decision), never from the decision's
// own message, so "no cluster qualifies" always comes with the reason for
// each cluster.
package explain

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"

	"github.com/fleetvm/fleetvm/pkg/capacity"
)

// Reason is why a cluster was or was not chosen.
type Reason string

// The reasons, in the order they are checked: the first that applies is
// the cluster's.
const (
	// Chosen: the scheduler placed the VM there.
	Chosen Reason = "Chosen"
	// Runs: the VM runs there and stays, whatever the scheduler says.
	Runs Reason = "RunsThere"
	// Environment: the cluster's environment label is another.
	Environment Reason = "Environment"
	// Selector: spec.placement.clusterSelector does not match.
	Selector Reason = "Selector"
	// Taint: a NoSelect taint the FleetVirtualMachine does not tolerate
	// (an unavailable or unreachable cluster has one).
	Taint Reason = "Taint"
	// NoAgent: no fleetvm-capacity score (no agent, or it has not
	// reported yet), or one whose validUntil has passed (the agent stopped
	// renewing it). OCM's CEL predicate still reads an expired score; the
	// hub does not pick a new cluster by it.
	NoAgent Reason = "AgentNotReporting"
	// Network: a network the VM needs is on no node of the cluster.
	Network Reason = "MissingNetwork"
	// NoRoom: no single node has room for the VM (with its networks).
	NoRoom Reason = "NoRoom"
	// NotNeeded: the cluster qualifies; spec.placement.clusters was
	// reached with others.
	NotNeeded Reason = "NotNeeded"
)

// Cluster is what the scheduler sees of one cluster.
type Cluster struct {
	Name   string
	Labels map[string]string
	Taints []clusterv1.Taint
	// Scores are the fleetvm-capacity scores; nil when the cluster has
	// none.
	Scores map[string]int32
	// ValidUntil is when the scores expire (zero: never).
	ValidUntil time.Time
}

// Expired tells whether the scores' validUntil has come by now
// (capacity.Expired): the hub's pick reads them as no score.
func (c Cluster) Expired(now time.Time) bool {
	return !c.ValidUntil.IsZero() && !now.Before(c.ValidUntil)
}

// Input is one FleetVirtualMachine's placement, and the clusters of the
// sets it may use.
type Input struct {
	// EnvironmentLabel is the label key of environments ("env").
	EnvironmentLabel string
	Environment      string
	Selector         *metav1.LabelSelector
	Tolerations      []clusterv1beta1.Toleration
	// Shape is what the VM needs of one node; nil: no fit predicate (a
	// VM from git without required networks).
	Shape *capacity.Shape
	// Decided are the clusters the scheduler chose; Running those the VM
	// runs on.
	Decided, Running []string
	Clusters         []Cluster
	Now              time.Time
	// Arriving, when set, says how many VMs of the shape the copies on
	// their way to a cluster take from the room its score shows (the
	// hub's placement.Arriving); nil: none are counted.
	Arriving func(cluster string) int32
}

// Verdict is one cluster's reason, with the detail that makes it
// actionable.
type Verdict struct {
	Cluster string
	Reason  Reason
	Detail  string
}

// Explain returns one verdict per cluster, sorted by cluster name.
func Explain(in Input) ([]Verdict, error) {
	sel := labels.Everything()
	if in.Selector != nil {
		s, err := metav1.LabelSelectorAsSelector(in.Selector)
		if err != nil {
			return nil, fmt.Errorf("spec.placement.clusterSelector: %w", err)
		}
		sel = s
	}
	out := make([]Verdict, 0, len(in.Clusters))
	for _, c := range in.Clusters {
		out = append(out, verdict(in, c, sel))
	}
	slices.SortFunc(out, func(a, b Verdict) int { return strings.Compare(a.Cluster, b.Cluster) })
	return out, nil
}

func verdict(in Input, c Cluster, sel labels.Selector) Verdict {
	v := Verdict{Cluster: c.Name}
	switch {
	case slices.Contains(in.Decided, c.Name):
		v.Reason, v.Detail = Chosen, "chosen by the scheduler"
	case slices.Contains(in.Running, c.Name):
		v.Reason, v.Detail = Runs, "the VM runs here and stays"
	case in.Environment != "" && c.Labels[in.EnvironmentLabel] != in.Environment:
		v.Reason, v.Detail = Environment, fmt.Sprintf("%s=%q, not %q", in.EnvironmentLabel, c.Labels[in.EnvironmentLabel], in.Environment)
	case !sel.Matches(labels.Set(c.Labels)):
		v.Reason, v.Detail = Selector, fmt.Sprintf("labels do not match spec.placement.clusterSelector (%s)", sel.String())
	default:
		if t, ok := untolerated(c.Taints, in.Tolerations, in.Now); ok {
			v.Reason, v.Detail = Taint, fmt.Sprintf("taint %s=%s:%s not tolerated", t.Key, t.Value, t.Effect)
			return v
		}
		if in.Shape == nil {
			v.Reason, v.Detail = NotNeeded, "qualifies; enough clusters were chosen"
			return v
		}
		if c.Scores == nil {
			v.Reason, v.Detail = NoAgent, "no fleetvm-capacity score: the fleetvm agent has not reported"
			return v
		}
		// As the hub's pick: an expired score is no score.
		if c.Expired(in.Now) {
			v.Reason, v.Detail = NoAgent, fmt.Sprintf("the fleetvm-capacity score expired at %s: the fleetvm agent is not renewing it", c.ValidUntil.UTC().Format(time.RFC3339))
			return v
		}
		v = byScores(in, c, v)
	}
	return v
}

// byScores judges a cluster by the agent's scores: a network on no node,
// no node with room, or it qualifies.
func byScores(in Input, c Cluster, v Verdict) Verdict {
	for _, n := range in.Shape.Networks {
		if c.Scores[capacity.NetworkScoreName(n)] < 1 {
			v.Reason, v.Detail = Network, fmt.Sprintf("network %s is on no node (no NetworkAttachmentDefinition, or no node has its resource)", n)
			return v
		}
	}
	if c.Scores[in.Shape.Name()] < 1 {
		what := fmt.Sprintf("%s CPU and %s memory", in.Shape.CPU.String(), in.Shape.Memory.String())
		if len(in.Shape.Networks) > 0 {
			what += " with " + strings.Join(in.Shape.Networks, ", ")
		}
		v.Reason, v.Detail = NoRoom, "no node has room for "+what
		return v
	}
	if fit := c.Scores[in.Shape.Name()]; in.Arriving != nil && fit < capacity.MaxScore {
		if taken := in.Arriving(c.Name); fit-taken < 1 {
			v.Reason, v.Detail = NoRoom, fmt.Sprintf("its score has room for %d, all taken by %d on their way there", fit, taken)
			return v
		}
	}
	v.Reason, v.Detail = NotNeeded, "qualifies; enough clusters were chosen"
	return v
}

// untolerated returns the first NoSelect taint no toleration matches.
// OCM's PreferNoSelect taints only lower a cluster's rank.
func untolerated(taints []clusterv1.Taint, tolerations []clusterv1beta1.Toleration, now time.Time) (clusterv1.Taint, bool) {
	for _, t := range taints {
		if t.Effect != clusterv1.TaintEffectNoSelect && t.Effect != clusterv1.TaintEffectNoSelectIfNew {
			continue
		}
		if !slices.ContainsFunc(tolerations, func(tol clusterv1beta1.Toleration) bool { return tolerates(tol, t, now) }) {
			return t, true
		}
	}
	return clusterv1.Taint{}, false
}

func tolerates(tol clusterv1beta1.Toleration, t clusterv1.Taint, now time.Time) bool {
	if tol.Effect != "" && tol.Effect != t.Effect {
		return false
	}
	if tol.Key != "" && tol.Key != t.Key {
		return false
	}
	switch tol.Operator {
	case clusterv1beta1.TolerationOpExists:
	case "", clusterv1beta1.TolerationOpEqual:
		if tol.Value != t.Value {
			return false
		}
	default:
		return false
	}
	if tol.TolerationSeconds != nil && !t.TimeAdded.IsZero() {
		return now.Before(t.TimeAdded.Add(time.Duration(*tol.TolerationSeconds) * time.Second))
	}
	return true
}

// Count is how many clusters share a reason, and the first few of them.
type Count struct {
	Reason   Reason
	Count    int
	Clusters []string
	// Detail is the first cluster's detail.
	Detail string
}

// Summarize counts the verdicts by reason, in the order of the reasons,
// naming at most first clusters of each.
func Summarize(verdicts []Verdict, first int) []Count {
	order := []Reason{Chosen, Runs, Environment, Selector, Taint, NoAgent, Network, NoRoom, NotNeeded}
	by := map[Reason]*Count{}
	for _, v := range verdicts {
		c := by[v.Reason]
		if c == nil {
			c = &Count{Reason: v.Reason, Detail: v.Detail}
			by[v.Reason] = c
		}
		c.Count++
		if len(c.Clusters) < first {
			c.Clusters = append(c.Clusters, v.Cluster)
		}
	}
	var out []Count
	for _, r := range order {
		if c := by[r]; c != nil {
			out = append(out, *c)
		}
	}
	return out
}

// Message renders counts in one line: "1 Chosen (prod-a); 2 Environment
// (dev-a, dev-b); 1 MissingNetwork (prod-c: network ...)", "..." when a
// reason has more clusters than named. The detail is shown where it names
// what is missing (a network, room, a toleration).
func Message(counts []Count) string {
	parts := make([]string, 0, len(counts))
	for _, c := range counts {
		names := strings.Join(c.Clusters, ", ")
		if c.Count > len(c.Clusters) {
			names += ", ..."
		}
		if c.Detail != "" && (c.Reason == Network || c.Reason == NoRoom || c.Reason == Taint) {
			names += ": " + c.Detail
		}
		parts = append(parts, fmt.Sprintf("%d %s (%s)", c.Count, c.Reason, names))
	}
	if len(parts) == 0 {
		return "no cluster in the cluster sets bound to the namespace"
	}
	return strings.Join(parts, "; ")
}
