package rollout

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
)

func TestGroups(t *testing.T) {
	region := func(r string) map[string]string { return map[string]string{"region": r} }
	members := []Member{
		{Name: "eu-2", Labels: region("eu")},
		{Name: "us-1", Labels: region("us")},
		{Name: "eu-1", Labels: region("eu"), Claims: map[string]string{"tier": "canary"}},
		{Name: "us-2", Labels: region("us")},
		{Name: "ap-1", Labels: region("ap")},
	}
	byLabel := func(name, r string) clusterv1beta1.DecisionGroup {
		return clusterv1beta1.DecisionGroup{GroupName: name, ClusterSelector: clusterv1beta1.GroupClusterSelector{
			LabelSelector: metav1.LabelSelector{MatchLabels: region(r)}}}
	}
	strategy := func(per intstr.IntOrString, groups ...clusterv1beta1.DecisionGroup) *clusterv1beta1.DecisionStrategy {
		return &clusterv1beta1.DecisionStrategy{GroupStrategy: clusterv1beta1.GroupStrategy{DecisionGroups: groups, ClustersPerDecisionGroup: per}}
	}
	for name, tc := range map[string]struct {
		s    *clusterv1beta1.DecisionStrategy
		want map[string]Group
	}{
		"no strategy: one group": {
			want: map[string]Group{"ap-1": {}, "eu-1": {}, "eu-2": {}, "us-1": {}, "us-2": {}},
		},
		"named groups first, in their order, the rest unnamed": {
			s: strategy(intstr.IntOrString{}, byLabel("us", "us"), byLabel("eu", "eu")),
			want: map[string]Group{
				"us-1": {Name: "us", Index: 0}, "us-2": {Name: "us", Index: 0},
				"eu-1": {Name: "eu", Index: 1}, "eu-2": {Name: "eu", Index: 1},
				"ap-1": {Index: 2},
			},
		},
		"a cluster is in the first group that matches it": {
			s: strategy(intstr.IntOrString{}, byLabel("eu", "eu"),
				clusterv1beta1.DecisionGroup{GroupName: "everything"}),
			want: map[string]Group{
				"eu-1": {Name: "eu"}, "eu-2": {Name: "eu"},
				"ap-1": {Name: "everything", Index: 1}, "us-1": {Name: "everything", Index: 1}, "us-2": {Name: "everything", Index: 1},
			},
		},
		"a group that matches nothing takes no index": {
			s:    strategy(intstr.IntOrString{}, byLabel("moon", "moon"), byLabel("eu", "eu")),
			want: map[string]Group{"eu-1": {Name: "eu"}, "eu-2": {Name: "eu"}, "ap-1": {Index: 1}, "us-1": {Index: 1}, "us-2": {Index: 1}},
		},
		"clustersPerDecisionGroup splits every group in name order": {
			s: strategy(intstr.FromInt32(2), byLabel("eu", "eu")),
			want: map[string]Group{
				"eu-1": {Name: "eu", Index: 0}, "eu-2": {Name: "eu", Index: 0},
				"ap-1": {Index: 1}, "us-1": {Index: 1}, "us-2": {Index: 2},
			},
		},
		"a percentage of all the clusters, rounded up": {
			s: strategy(intstr.FromString("20%")),
			want: map[string]Group{
				"ap-1": {Index: 0}, "eu-1": {Index: 1}, "eu-2": {Index: 2}, "us-1": {Index: 3}, "us-2": {Index: 4},
			},
		},
		"a claim selector": {
			s: strategy(intstr.IntOrString{}, clusterv1beta1.DecisionGroup{GroupName: "canary", ClusterSelector: clusterv1beta1.GroupClusterSelector{
				ClaimSelector: clusterv1beta1.ClusterClaimSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"canary"}},
				}}}}),
			want: map[string]Group{
				"eu-1": {Name: "canary"},
				"ap-1": {Index: 1}, "eu-2": {Index: 1}, "us-1": {Index: 1}, "us-2": {Index: 1},
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Groups(tc.s, members)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("groups (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDecidePerGroup: ProgressivePerGroup over the groups Groups makes
// gives a group the revision once every cluster of the group before it
// succeeded, and a mandatory group goes first.
func TestDecidePerGroup(t *testing.T) {
	members := []Member{
		{Name: "a", Labels: map[string]string{"ring": "canary"}},
		{Name: "b"}, {Name: "c"}, {Name: "d"},
	}
	groups, err := Groups(&clusterv1beta1.DecisionStrategy{GroupStrategy: clusterv1beta1.GroupStrategy{
		ClustersPerDecisionGroup: intstr.FromInt32(2),
		DecisionGroups: []clusterv1beta1.DecisionGroup{{GroupName: "canary", ClusterSelector: clusterv1beta1.GroupClusterSelector{
			LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"ring": "canary"}}}}},
	}}, members)
	if err != nil {
		t.Fatal(err)
	}
	in := Input{
		Strategy: clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.ProgressivePerGroup, ProgressivePerGroup: &clusterv1alpha1.RolloutProgressivePerGroup{
			MandatoryDecisionGroups: clusterv1alpha1.MandatoryDecisionGroups{MandatoryDecisionGroups: []clusterv1alpha1.MandatoryDecisionGroup{{GroupName: "canary"}}},
		}},
		Target: 2, Previous: 1, Now: t0,
	}
	for _, m := range members {
		in.Clusters = append(in.Clusters, Cluster{Name: m.Name, Group: groups[m.Name], Given: 1, Running: 1, Ready: true, ReadySince: t0})
	}
	states := func(p Plan) map[string]State {
		out := map[string]State{}
		for _, c := range p.Clusters {
			out[c.Name] = c.State
		}
		return out
	}
	plan := Decide(in)
	if diff := cmp.Diff(map[string]State{"a": Applying, "b": ToApply, "c": ToApply, "d": ToApply}, states(plan)); diff != "" {
		t.Fatalf("the canary group first (-want +got):\n%s", diff)
	}
	if !strings.Contains(plan.Message, "canary") {
		t.Errorf("message %q does not name the group it waits for", plan.Message)
	}
	// The canary runs it: the next group (b and c, two per group) takes it.
	in.Clusters[0] = Cluster{Name: "a", Group: groups["a"], Given: 2, Running: 2, Ready: true, ReadySince: t0}
	plan = Decide(in)
	if diff := cmp.Diff(map[string]State{"a": Done, "b": Applying, "c": Applying, "d": ToApply}, states(plan)); diff != "" {
		t.Fatalf("then group 1 (-want +got):\n%s", diff)
	}
	for _, c := range plan.Clusters {
		if c.Name == "d" && !strings.Contains(c.Reason, "decision group 1") {
			t.Errorf("d's reason %q does not name the group it waits for", c.Reason)
		}
	}
}

func TestValidateDecisionStrategy(t *testing.T) {
	group := func(name string, sel clusterv1beta1.GroupClusterSelector) clusterv1beta1.DecisionGroup {
		return clusterv1beta1.DecisionGroup{GroupName: name, ClusterSelector: sel}
	}
	strategy := func(per intstr.IntOrString, groups ...clusterv1beta1.DecisionGroup) *clusterv1beta1.DecisionStrategy {
		return &clusterv1beta1.DecisionStrategy{GroupStrategy: clusterv1beta1.GroupStrategy{DecisionGroups: groups, ClustersPerDecisionGroup: per}}
	}
	mandatory := func(names ...string) *clusterv1alpha1.RolloutStrategy {
		s := &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.ProgressivePerGroup, ProgressivePerGroup: &clusterv1alpha1.RolloutProgressivePerGroup{}}
		for _, n := range names {
			s.ProgressivePerGroup.MandatoryDecisionGroups.MandatoryDecisionGroups = append(s.ProgressivePerGroup.MandatoryDecisionGroups.MandatoryDecisionGroups,
				clusterv1alpha1.MandatoryDecisionGroup{GroupName: n})
		}
		return s
	}
	for name, tc := range map[string]struct {
		s       *clusterv1beta1.DecisionStrategy
		rollout *clusterv1alpha1.RolloutStrategy
		want    map[string]string
	}{
		"none":                 {},
		"a count per group":    {s: strategy(intstr.FromInt32(3))},
		"a percentage":         {s: strategy(intstr.FromString("25%"), group("canary", clusterv1beta1.GroupClusterSelector{}))},
		"a mandatory group":    {s: strategy(intstr.IntOrString{}, group("canary", clusterv1beta1.GroupClusterSelector{})), rollout: mandatory("canary")},
		"a mandatory by index": {rollout: &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.ProgressivePerGroup, ProgressivePerGroup: &clusterv1alpha1.RolloutProgressivePerGroup{MandatoryDecisionGroups: clusterv1alpha1.MandatoryDecisionGroups{MandatoryDecisionGroups: []clusterv1alpha1.MandatoryDecisionGroup{{GroupIndex: 0}}}}}},

		"a group with no name": {s: strategy(intstr.IntOrString{}, group("", clusterv1beta1.GroupClusterSelector{})),
			want: map[string]string{"placement.decisionStrategy.groupStrategy.decisionGroups[0].groupName": "names the group"}},
		"a name OCM refuses": {s: strategy(intstr.IntOrString{}, group("-canary", clusterv1beta1.GroupClusterSelector{})),
			want: map[string]string{"placement.decisionStrategy.groupStrategy.decisionGroups[0].groupName": "OCM's rule"}},
		"a label selector that does not parse": {s: strategy(intstr.IntOrString{}, group("canary", clusterv1beta1.GroupClusterSelector{
			LabelSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "ring", Operator: "Near"}}}})),
			want: map[string]string{"placement.decisionStrategy.groupStrategy.decisionGroups[0].groupClusterSelector.labelSelector.matchExpressions[0].operator": "Near"}},
		"a claim selector In with no values": {s: strategy(intstr.IntOrString{}, group("canary", clusterv1beta1.GroupClusterSelector{
			ClaimSelector: clusterv1beta1.ClusterClaimSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn}}}})),
			want: map[string]string{"placement.decisionStrategy.groupStrategy.decisionGroups[0].groupClusterSelector.claimSelector.matchExpressions[0].values": "must be specified"}},
		"0 clusters per group": {s: strategy(intstr.FromInt32(0)),
			want: map[string]string{}}, // unset: the zero value is "all in one group", as OCM defaults it
		"-1 clusters per group": {s: strategy(intstr.FromInt32(-1)),
			want: map[string]string{"placement.decisionStrategy.groupStrategy.clustersPerDecisionGroup": "at least 1"}},
		"0% per group": {s: strategy(intstr.FromString("0%")),
			want: map[string]string{"placement.decisionStrategy.groupStrategy.clustersPerDecisionGroup": "from 1% to 100%"}},
		"150% per group": {s: strategy(intstr.FromString("150%")),
			want: map[string]string{"placement.decisionStrategy.groupStrategy.clustersPerDecisionGroup": "from 1% to 100%"}},
		"a mandatory group that is no group": {s: strategy(intstr.IntOrString{}, group("canary", clusterv1beta1.GroupClusterSelector{})), rollout: mandatory("canary", "canery"),
			want: map[string]string{"rollout.progressivePerGroup.mandatoryDecisionGroups[1].groupName": "names no group"}},
		"a mandatory group with no strategy": {rollout: mandatory("canary"),
			want: map[string]string{"rollout.progressivePerGroup.mandatoryDecisionGroups[0].groupName": "match no cluster"}},
	} {
		t.Run(name, func(t *testing.T) {
			errs := ValidateDecisionStrategy(tc.s, tc.rollout, field.NewPath("placement", "decisionStrategy"), field.NewPath("rollout"))
			got := map[string]string{}
			for _, e := range errs {
				got[e.Field] = e.Error()
			}
			if len(got) != len(tc.want) {
				t.Fatalf("errors %v, want fields %v", got, tc.want)
			}
			for f, word := range tc.want {
				if !strings.Contains(got[f], word) {
					t.Errorf("error of %s is %q, want it to say %q", f, got[f], word)
				}
			}
		})
	}
}
