package rollout

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
)

// Member is what the decision groups read of one cluster: its
// ManagedCluster's labels and cluster claims (status.clusterClaims).
type Member struct {
	Name   string
	Labels map[string]string
	Claims map[string]string
}

// MemberOf is what the decision groups read of cluster name, from its
// ManagedCluster (nil when it is gone: no labels, no claims).
func MemberOf(name string, mc *clusterv1.ManagedCluster) Member {
	m := Member{Name: name}
	if mc != nil {
		m.Labels = mc.Labels
		m.Claims = make(map[string]string, len(mc.Status.ClusterClaims))
		for _, claim := range mc.Status.ClusterClaims {
			m.Claims[claim.Name] = claim.Value
		}
	}
	return m
}

// Groups divides the clusters into decision groups as OCM's scheduler
// divides a Placement's decision by its spec.decisionStrategy: each of
// decisionGroups, in order, takes the clusters its groupClusterSelector
// matches that no group before it took; the clusters left make groups
// with no name; a group with more clusters than clustersPerDecisionGroup
// (a count, or a percentage of all the clusters rounded up; all of them
// when unset) is split into several of that name, in cluster name order.
// Groups are indexed from 0 in that order. A nil strategy puts every
// cluster in group 0. The groups are those of the FleetVirtualMachine's
// own clusters, as OCM's are those of its Placement's decision; they
// change as clusters join and leave.
//
// ValidateDecisionStrategy must have accepted s; a selector it cannot
// read is an error.
func Groups(s *clusterv1beta1.DecisionStrategy, clusters []Member) (map[string]Group, error) {
	out := make(map[string]Group, len(clusters))
	if s == nil {
		for _, c := range clusters {
			out[c.Name] = Group{}
		}
		return out, nil
	}
	gs := s.GroupStrategy
	length := len(clusters)
	if !isUnset(gs.ClustersPerDecisionGroup) {
		length = max(size(gs.ClustersPerDecisionGroup, func(of int) int { return of })(len(clusters)), 1)
	}
	sorted := slices.Clone(clusters)
	slices.SortFunc(sorted, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	taken := make(map[string]bool, len(clusters))
	index := int32(0)
	divide := func(name string, matched []Member) {
		for i, c := range matched {
			if i > 0 && i%length == 0 {
				index++
			}
			out[c.Name] = Group{Name: name, Index: index}
		}
		if len(matched) > 0 {
			index++
		}
	}
	for i, g := range gs.DecisionGroups {
		matches, err := groupSelector(g.ClusterSelector)
		if err != nil {
			return nil, fmt.Errorf("decisionGroups[%d] (%s): %w", i, g.GroupName, err)
		}
		var matched []Member
		for _, c := range sorted {
			if !taken[c.Name] && matches(c) {
				taken[c.Name] = true
				matched = append(matched, c)
			}
		}
		divide(g.GroupName, matched)
	}
	var rest []Member
	for _, c := range sorted {
		if !taken[c.Name] {
			rest = append(rest, c)
		}
	}
	divide("", rest)
	return out, nil
}

// groupSelector reads a groupClusterSelector: its label selector and its
// claim selector (claims read as labels), both to match; empty, it
// matches every cluster.
func groupSelector(s clusterv1beta1.GroupClusterSelector) (func(Member) bool, error) {
	bylabel, err := metav1.LabelSelectorAsSelector(&s.LabelSelector)
	if err != nil {
		return nil, fmt.Errorf("labelSelector: %w", err)
	}
	byclaim, err := metav1.LabelSelectorAsSelector(&metav1.LabelSelector{MatchExpressions: s.ClaimSelector.MatchExpressions})
	if err != nil {
		return nil, fmt.Errorf("claimSelector: %w", err)
	}
	return func(m Member) bool {
		return bylabel.Matches(labels.Set(m.Labels)) && byclaim.Matches(labels.Set(m.Claims))
	}, nil
}

// ValidateDecisionStrategy refuses a decisionStrategy OCM's scheduler
// would refuse or misread: a decision group without a name or with one
// OCM's pattern refuses, a selector that does not parse, a
// clustersPerDecisionGroup that is neither a count from 1 nor a whole
// percentage from 1% to 100% (OCM puts every cluster in one group for
// some). rollout, when set, is the FleetVirtualMachine's strategy: a
// mandatory decision group it names must be one of decisionGroups, or it
// would match no cluster and hold nothing first.
func ValidateDecisionStrategy(s *clusterv1beta1.DecisionStrategy, rollout *clusterv1alpha1.RolloutStrategy, path, rolloutPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := map[string]bool{}
	if s != nil {
		gs := path.Child("groupStrategy")
		for i, g := range s.GroupStrategy.DecisionGroups {
			p := gs.Child("decisionGroups").Index(i)
			switch {
			case g.GroupName == "":
				errs = append(errs, field.Required(p.Child("groupName"), "names the group, as mandatoryDecisionGroups and the rollout's messages name it"))
			case !groupNameRule.MatchString(g.GroupName):
				errs = append(errs, field.Invalid(p.Child("groupName"), g.GroupName, "must be 2 to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit (OCM's rule)"))
			}
			names[g.GroupName] = true
			sel := p.Child("groupClusterSelector")
			errs = append(errs, metav1validation.ValidateLabelSelector(&g.ClusterSelector.LabelSelector,
				metav1validation.LabelSelectorValidationOptions{}, sel.Child("labelSelector"))...)
			for j, e := range g.ClusterSelector.ClaimSelector.MatchExpressions {
				errs = append(errs, metav1validation.ValidateLabelSelectorRequirement(e,
					metav1validation.LabelSelectorValidationOptions{}, sel.Child("claimSelector", "matchExpressions").Index(j))...)
			}
		}
		if v := s.GroupStrategy.ClustersPerDecisionGroup; !isUnset(v) {
			p := gs.Child("clustersPerDecisionGroup")
			switch {
			case v.Type == intstr.Int && v.IntVal < 1:
				errs = append(errs, field.Invalid(p, v.IntVal, "must be at least 1"))
			case v.Type == intstr.String && !clustersPerGroup.MatchString(v.StrVal):
				errs = append(errs, field.Invalid(p, v.StrVal, "must be a count from 1 or a whole percentage from 1% to 100%"))
			}
		}
	}
	if rollout == nil {
		return errs
	}
	var mandatory []clusterv1alpha1.MandatoryDecisionGroup
	var mpath *field.Path
	switch {
	case rollout.Type == clusterv1alpha1.Progressive && rollout.Progressive != nil:
		mandatory, mpath = rollout.Progressive.MandatoryDecisionGroups.MandatoryDecisionGroups, rolloutPath.Child("progressive", "mandatoryDecisionGroups")
	case rollout.Type == clusterv1alpha1.ProgressivePerGroup && rollout.ProgressivePerGroup != nil:
		mandatory, mpath = rollout.ProgressivePerGroup.MandatoryDecisionGroups.MandatoryDecisionGroups, rolloutPath.Child("progressivePerGroup", "mandatoryDecisionGroups")
	}
	for i, m := range mandatory {
		if m.GroupName != "" && !names[m.GroupName] {
			errs = append(errs, field.Invalid(mpath.Index(i).Child("groupName"), m.GroupName,
				fmt.Sprintf("names no group of %s: it would match no cluster", path.Child("groupStrategy", "decisionGroups"))))
		}
	}
	return errs
}

// groupNameRule is OCM's pattern for a decision group's name.
var groupNameRule = regexp.MustCompile(`^[a-zA-Z0-9][-A-Za-z0-9_.]{0,61}[a-zA-Z0-9]$`)

// clustersPerGroup is OCM's pattern for clustersPerDecisionGroup: a
// count from 1, or a whole percentage from 1% to 100%.
var clustersPerGroup = regexp.MustCompile(`^((100|[1-9][0-9]{0,1})%|[1-9][0-9]*)$`)
