package explain

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"

	"github.com/fleetvm/fleetvm/pkg/capacity"
)

// TestExplain: every cluster of the bound sets gets the first reason that
// keeps it out, named so an operator can act on it.
func TestExplain(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	shape := capacity.Shape{CPU: resource.MustParse("4"), Memory: resource.MustParse("8Gi"), Networks: []string{"default/vlan2003"}}
	vlan := capacity.NetworkScoreName("default/vlan2003")
	scores := func(fit, net int32) map[string]int32 { return map[string]int32{shape.Name(): fit, vlan: net} }
	prod := map[string]string{"env": "prod", "region": "eu"}
	in := Input{
		EnvironmentLabel: "env", Environment: "prod",
		Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"}},
		Tolerations: []clusterv1beta1.Toleration{{Key: "maintenance", Operator: clusterv1beta1.TolerationOpExists}},
		Shape:       &shape, Decided: []string{"prod-a"}, Running: []string{"prod-old"}, Now: now,
		Clusters: []Cluster{
			{Name: "prod-a", Labels: prod, Scores: scores(3, 2)},
			{Name: "prod-old", Labels: prod, Scores: scores(0, 0)},
			{Name: "dev-a", Labels: map[string]string{"env": "dev", "region": "eu"}},
			{Name: "prod-us", Labels: map[string]string{"env": "prod", "region": "us"}, Scores: scores(9, 9)},
			{Name: "prod-down", Labels: prod, Scores: scores(9, 9), Taints: []clusterv1.Taint{
				{Key: "cluster.open-cluster-management.io/unreachable", Effect: clusterv1.TaintEffectNoSelect}}},
			{Name: "prod-maint", Labels: prod, Scores: scores(9, 9), Taints: []clusterv1.Taint{
				{Key: "maintenance", Value: "yes", Effect: clusterv1.TaintEffectNoSelect}}},
			{Name: "prod-noagent", Labels: prod},
			{Name: "prod-stale", Labels: prod, Scores: scores(9, 9), ValidUntil: now.Add(-time.Second)},
			{Name: "prod-stale-now", Labels: prod, Scores: scores(9, 9), ValidUntil: now},
			{Name: "prod-valid", Labels: prod, Scores: scores(9, 9), ValidUntil: now.Add(time.Second)},
			{Name: "prod-b", Labels: prod, Scores: scores(0, 0)},
			{Name: "prod-full", Labels: prod, Scores: scores(0, 3)},
		},
	}
	got, err := Explain(in)
	if err != nil {
		t.Fatal(err)
	}
	want := []Verdict{
		{"dev-a", Environment, `env="dev", not "prod"`},
		{"prod-a", Chosen, "chosen by the scheduler"},
		{"prod-b", Network, "network default/vlan2003 is on no node (no NetworkAttachmentDefinition, or no node has its resource)"},
		{"prod-down", Taint, "taint cluster.open-cluster-management.io/unreachable=:NoSelect not tolerated"},
		{"prod-full", NoRoom, "no node has room for 4 CPU and 8Gi memory with default/vlan2003"},
		{"prod-maint", NotNeeded, "qualifies; enough clusters were chosen"},
		{"prod-noagent", NoAgent, "no fleetvm-capacity score: the fleetvm agent has not reported"},
		{"prod-old", Runs, "the VM runs here and stays"},
		{"prod-stale", NoAgent, "the fleetvm-capacity score expired at " +
			now.Add(-time.Second).UTC().Format(time.RFC3339) + ": the fleetvm agent is not renewing it"},
		{"prod-stale-now", NoAgent, "the fleetvm-capacity score expired at " +
			now.UTC().Format(time.RFC3339) + ": the fleetvm agent is not renewing it"},
		{"prod-us", Selector, "labels do not match spec.placement.clusterSelector (region=eu)"},
		{"prod-valid", NotNeeded, "qualifies; enough clusters were chosen"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Explain (-want,+got):\n%s", diff)
	}

	counts := Summarize(got, 1)
	if diff := cmp.Diff("1 Chosen (prod-a); 1 RunsThere (prod-old); 1 Environment (dev-a); 1 Selector (prod-us); "+
		"1 Taint (prod-down: taint cluster.open-cluster-management.io/unreachable=:NoSelect not tolerated); "+
		"3 AgentNotReporting (prod-noagent, ...); "+
		"1 MissingNetwork (prod-b: network default/vlan2003 is on no node (no NetworkAttachmentDefinition, or no node has its resource)); "+
		"1 NoRoom (prod-full: no node has room for 4 CPU and 8Gi memory with default/vlan2003); "+
		"2 NotNeeded (prod-maint, ...)", Message(counts)); diff != "" {
		t.Errorf("Message (-want,+got):\n%s", diff)
	}
}

// TestTolerations: a toleration matches by key, value and effect, and
// only for its seconds after the taint was added.
func TestTolerations(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	taint := clusterv1.Taint{Key: "k", Value: "v", Effect: clusterv1.TaintEffectNoSelect, TimeAdded: metav1.NewTime(now.Add(-time.Minute))}
	for name, tc := range map[string]struct {
		tol  clusterv1beta1.Toleration
		want bool
	}{
		"equal":                {clusterv1beta1.Toleration{Key: "k", Value: "v"}, true},
		"other value":          {clusterv1beta1.Toleration{Key: "k", Value: "w"}, false},
		"exists":               {clusterv1beta1.Toleration{Key: "k", Operator: clusterv1beta1.TolerationOpExists}, true},
		"other effect":         {clusterv1beta1.Toleration{Key: "k", Value: "v", Effect: clusterv1.TaintEffectPreferNoSelect}, false},
		"empty key and exists": {clusterv1beta1.Toleration{Operator: clusterv1beta1.TolerationOpExists}, true},
		"still within seconds": {clusterv1beta1.Toleration{Key: "k", Value: "v", TolerationSeconds: ptr.To[int64](120)}, true},
		"seconds passed":       {clusterv1beta1.Toleration{Key: "k", Value: "v", TolerationSeconds: ptr.To[int64](30)}, false},
	} {
		t.Run(name, func(t *testing.T) {
			if got := tolerates(tc.tol, taint, now); got != tc.want {
				t.Errorf("tolerates = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestExplainArriving: a cluster whose room the copies on their way there
// have taken says so, not "qualifies"; one with room left, or at the
// score's cap, still qualifies.
func TestExplainArriving(t *testing.T) {
	shape := capacity.Shape{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi")}
	prod := map[string]string{"env": "prod"}
	fit := func(n int32) map[string]int32 { return map[string]int32{shape.Name(): n} }
	in := Input{
		EnvironmentLabel: "env", Environment: "prod", Shape: &shape,
		Clusters: []Cluster{
			{Name: "taken", Labels: prod, Scores: fit(80)},
			{Name: "room", Labels: prod, Scores: fit(81)},
			{Name: "capped", Labels: prod, Scores: fit(capacity.MaxScore)},
		},
		Arriving: func(string) int32 { return 80 },
	}
	got, err := Explain(in)
	if err != nil {
		t.Fatal(err)
	}
	want := []Verdict{
		{"capped", NotNeeded, "qualifies; enough clusters were chosen"},
		{"room", NotNeeded, "qualifies; enough clusters were chosen"},
		{"taken", NoRoom, "its score has room for 80, all taken by 80 on their way there"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Explain (-want,+got):\n%s", diff)
	}
}
