package status

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/placement"
)

func TestComputeStatus(t *testing.T) {
	now := metav1.NewTime(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	running := &fleetv1alpha1.VMState{PrintableStatus: "Running", Ready: true, Node: "n1", IPAddresses: []string{"10.128.0.7"}}
	stopped := &fleetv1alpha1.VMState{PrintableStatus: "Stopped"}
	up := ClusterInfo{Environment: "prod", Available: metav1.ConditionTrue}
	base := func() Inputs {
		return Inputs{
			Spec:               fleetv1alpha1.FleetVirtualMachineSpec{RunStrategy: fleetv1alpha1.RunStrategyAlways},
			Generation:         3,
			PlacementScheduled: true,
			AppSetExists:       true,
			GracePeriod:        5 * time.Minute,
			Decision:           []string{"a", "b"},
			Outcome:            placed("a", "b"),
			Apps:               map[string]AppState{"a": {Sync: "Synced", Health: "Healthy"}, "b": {Sync: "Synced", Health: "Healthy"}},
			Clusters:           map[string]ClusterInfo{"a": up, "b": up},
			Reports:            map[string]*fleetv1alpha1.VMState{"a": running, "b": running},
			Now:                now,
		}
	}
	type want struct {
		phases     map[string]fleetv1alpha1.ClusterPhase
		summary    fleetv1alpha1.FleetSummary
		conditions map[string]string // type -> "Status/Reason"
	}
	cases := map[string]struct {
		mutate func(*Inputs)
		want   want
	}{
		"ready on both clusters": {
			mutate: func(*Inputs) {},
			want: want{
				phases:  map[string]fleetv1alpha1.ClusterPhase{"a": "Running", "b": "Running"},
				summary: fleetv1alpha1.FleetSummary{Desired: 2, Placed: 2, Ready: 2, Running: 2},
				conditions: map[string]string{"Placed": "True/ClustersDecided", "Delivered": "True/ApplicationSetReady",
					"Ready": "True/AllReady", "Available": "True/AllReady", "Degraded": "False/AsExpected"},
			},
		},
		"unavailable cluster shows Unknown, never its stale Running report": {
			mutate: func(in *Inputs) { in.Clusters["b"] = ClusterInfo{Available: metav1.ConditionUnknown} },
			want: want{
				phases:  map[string]fleetv1alpha1.ClusterPhase{"a": "Running", "b": "Unknown"},
				summary: fleetv1alpha1.FleetSummary{Desired: 2, Placed: 2, Ready: 1, Running: 1, Unknown: 1},
				conditions: map[string]string{"Placed": "True/ClustersDecided", "Delivered": "True/ApplicationSetReady",
					"Ready": "False/SomeNotReady", "Available": "True/SomeNotReady", "Degraded": "True/ClustersUnknown"},
			},
		},
		"halted and stopped everywhere is Ready": {
			mutate: func(in *Inputs) {
				in.Spec.RunStrategy = fleetv1alpha1.RunStrategyHalted
				in.Reports = map[string]*fleetv1alpha1.VMState{"a": stopped, "b": stopped}
			},
			want: want{
				phases:  map[string]fleetv1alpha1.ClusterPhase{"a": "Stopped", "b": "Stopped"},
				summary: fleetv1alpha1.FleetSummary{Desired: 2, Placed: 2, Stopped: 2},
				conditions: map[string]string{"Placed": "True/ClustersDecided", "Delivered": "True/ApplicationSetReady",
					"Ready": "True/Stopped", "Available": "False/Stopped", "Degraded": "False/AsExpected"},
			},
		},
		"missing Application and no report yet": {
			mutate: func(in *Inputs) {
				delete(in.Apps, "b")
				delete(in.Reports, "a")
			},
			want: want{
				phases:  map[string]fleetv1alpha1.ClusterPhase{"a": "Pending", "b": "Pending"},
				summary: fleetv1alpha1.FleetSummary{Desired: 2, Placed: 2},
				conditions: map[string]string{"Placed": "True/ClustersDecided", "Delivered": "False/ApplicationsMissing",
					"Ready": "False/SomeNotReady", "Available": "False/NoneReady", "Degraded": "False/AsExpected"},
			},
		},
		"fewer clusters than asked for, one leaving: not AllReady": {
			mutate: func(in *Inputs) {
				in.Spec.Placement.Clusters = ptr.To(int32(3))
				in.Decision = []string{"a"}
				in.Outcome.Clusters["b"] = placement.Plan{State: placement.Leaving, Since: &now, Reason: "its env label is \"dev\", not \"prod\""}
			},
			want: want{
				phases:  map[string]fleetv1alpha1.ClusterPhase{"a": "Running", "b": "Leaving"},
				summary: fleetv1alpha1.FleetSummary{Desired: 3, Placed: 1, Ready: 1, Running: 1},
				conditions: map[string]string{"Placed": "False/NotEnoughClusters", "Delivered": "True/ApplicationSetReady",
					"Ready": "False/NotEnoughReady", "Available": "True/SomeNotReady", "Degraded": "False/AsExpected"},
			},
		},
		"1 of 2 placed is not AllReady": {
			mutate: func(in *Inputs) {
				in.Spec.Placement.Clusters = ptr.To(int32(2))
				in.Outcome = placed("a")
			},
			want: want{
				phases:  map[string]fleetv1alpha1.ClusterPhase{"a": "Running"},
				summary: fleetv1alpha1.FleetSummary{Desired: 2, Placed: 1, Ready: 1, Running: 1},
				conditions: map[string]string{"Placed": "False/NotEnoughClusters", "Delivered": "True/ApplicationSetReady",
					"Ready": "False/NotEnoughReady", "Available": "True/SomeNotReady", "Degraded": "False/AsExpected"},
			},
		},
		"unavailable cluster out of the scheduler's decision stays placed, Unknown": {
			mutate: func(in *Inputs) {
				in.Decision = []string{"a"}
				in.Clusters["b"] = ClusterInfo{Environment: "prod", Available: metav1.ConditionFalse}
			},
			want: want{
				phases:  map[string]fleetv1alpha1.ClusterPhase{"a": "Running", "b": "Unknown"},
				summary: fleetv1alpha1.FleetSummary{Desired: 2, Placed: 2, Ready: 1, Running: 1, Unknown: 1},
				conditions: map[string]string{"Placed": "True/ClustersDecided", "Delivered": "True/ApplicationSetReady",
					"Ready": "False/SomeNotReady", "Available": "True/SomeNotReady", "Degraded": "True/ClustersUnknown"},
			},
		},
		"removal not confirmed: Application gone, VM still reported": {
			mutate: func(in *Inputs) {
				in.Outcome.Clusters["b"] = placement.Plan{State: placement.Removing, Since: &now}
				delete(in.Apps, "b")
			},
			want: want{
				phases:  map[string]fleetv1alpha1.ClusterPhase{"a": "Running", "b": "Removing"},
				summary: fleetv1alpha1.FleetSummary{Desired: 1, Placed: 1, Ready: 1, Running: 1},
				conditions: map[string]string{"Placed": "True/ClustersDecided", "Delivered": "True/ApplicationSetReady",
					"Ready": "True/AllReady", "Available": "True/AllReady", "Degraded": "True/RemovalUnconfirmed"},
			},
		},
		"Argo CD cannot render: its message in Delivered": {
			mutate: func(in *Inputs) {
				in.Apps["b"] = AppState{Sync: "Unknown", Health: "Missing", Error: "helm template: release name is invalid"}
				delete(in.Reports, "b")
			},
			want: want{
				phases:  map[string]fleetv1alpha1.ClusterPhase{"a": "Running", "b": "Pending"},
				summary: fleetv1alpha1.FleetSummary{Desired: 2, Placed: 2, Ready: 1, Running: 1},
				conditions: map[string]string{"Placed": "True/ClustersDecided", "Delivered": "False/DeliveryFailed",
					"Ready": "False/SomeNotReady", "Available": "True/SomeNotReady", "Degraded": "True/ClustersFailed"},
			},
		},
		"another FleetVM delivers the VM": {
			mutate: func(in *Inputs) {
				in.Conflict = "other/web"
				in.Outcome = placed()
			},
			want: want{
				phases:  map[string]fleetv1alpha1.ClusterPhase{},
				summary: fleetv1alpha1.FleetSummary{},
				conditions: map[string]string{"Placed": "False/Conflict", "Delivered": "False/Conflict",
					"Ready": "False/Conflict", "Available": "False/NoneReady", "Degraded": "True/Conflict"},
			},
		},
		// Applications left from an earlier ApplicationSet do not count.
		"ApplicationSet created right after this status: waiting for Argo CD": {
			mutate: func(in *Inputs) {
				in.AppSetExists = false
				in.Reports = map[string]*fleetv1alpha1.VMState{}
			},
			want: want{
				phases:  map[string]fleetv1alpha1.ClusterPhase{"a": "Pending", "b": "Pending"},
				summary: fleetv1alpha1.FleetSummary{Desired: 2, Placed: 2},
				conditions: map[string]string{"Placed": "True/ClustersDecided", "Delivered": "False/ApplicationsMissing",
					"Ready": "False/SomeNotReady", "Available": "False/NoneReady", "Degraded": "False/AsExpected"},
			},
		},
		"scheduler has not decided": {
			mutate: func(in *Inputs) {
				in.PlacementScheduled = false
				in.Decision = nil
				in.Outcome = placed()
			},
			want: want{
				phases:  map[string]fleetv1alpha1.ClusterPhase{},
				summary: fleetv1alpha1.FleetSummary{},
				conditions: map[string]string{"Placed": "Unknown/PlacementPending", "Delivered": "Unknown/PlacementPending",
					"Ready": "False/NoneReady", "Available": "False/NoneReady", "Degraded": "False/AsExpected"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := base()
			tc.mutate(&in)
			st := Compute(in)
			got := want{phases: map[string]fleetv1alpha1.ClusterPhase{}, summary: st.Summary, conditions: map[string]string{}}
			for _, c := range st.Clusters {
				got.phases[c.Cluster] = c.Phase
			}
			for _, c := range st.Conditions {
				if c.Type == fleetv1alpha1.ConditionConfined {
					continue // TestConfinedCondition
				}
				got.conditions[c.Type] = string(c.Status) + "/" + c.Reason
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("status (-want,+got):\n%s", diff)
			}
			if st.ObservedGeneration != 3 {
				t.Errorf("observedGeneration = %d, want 3", st.ObservedGeneration)
			}
		})
	}
}

// TestDecidedClustersWithTheSchedule: the scheduler's decision shows once
// OCM has marked the Placement scheduled (it writes the decision first):
// until then the status keeps the clusters it showed, so the two arrive
// in one status write.
func TestDecidedClustersWithTheSchedule(t *testing.T) {
	in := Inputs{
		Spec:         fleetv1alpha1.FleetVirtualMachineSpec{RunStrategy: fleetv1alpha1.RunStrategyAlways},
		Generation:   1,
		PlacementRef: &fleetv1alpha1.PlacementStatus{Namespace: "argocd", Name: "p"},
		Decision:     []string{"a", "b"},
		Outcome:      placed(),
	}
	decided := func(st fleetv1alpha1.FleetVirtualMachineStatus) []string {
		if st.Placement == nil {
			return nil
		}
		return st.Placement.DecidedClusters
	}
	if got := decided(Compute(in)); got != nil {
		t.Errorf("new Placement, decision written, not marked scheduled: decidedClusters %v, want none", got)
	}
	in.PlacementScheduled = true
	first := Compute(in)
	if got := decided(first); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("scheduled: decidedClusters %v, want [a b]", got)
	}
	// The Placement rewritten: the new decision waits for its schedule.
	in.Previous, in.PlacementScheduled, in.Decision = first, false, []string{"a", "c"}
	if got := decided(Compute(in)); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("rescheduling: decidedClusters %v, want the scheduled [a b]", got)
	}
	in.PlacementScheduled = true
	if got := decided(Compute(in)); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("rescheduled: decidedClusters %v, want [a c]", got)
	}
}

// TestComputeStatusKeepsTransitionTimes: recomputing an unchanged status
// yields an equal status, so the reconciler writes nothing.
func TestComputeStatusKeepsTransitionTimes(t *testing.T) {
	in := Inputs{
		Spec:               fleetv1alpha1.FleetVirtualMachineSpec{RunStrategy: fleetv1alpha1.RunStrategyAlways},
		PlacementScheduled: true, AppSetExists: true, Decision: []string{"a"}, Outcome: placed("a"),
		Apps:     map[string]AppState{"a": {}},
		Clusters: map[string]ClusterInfo{"a": {Available: metav1.ConditionTrue}},
		Now:      metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
	}
	first := Compute(in)
	in.Previous = first
	in.Now = metav1.NewTime(in.Now.Add(time.Hour))
	second := Compute(in)
	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("an hour later with nothing changed, the status changed (-first,+second):\n%s", diff)
	}
	if c := meta.FindStatusCondition(second.Conditions, "Ready"); c == nil || !c.LastTransitionTime.Equal(&first.Conditions[2].LastTransitionTime) {
		t.Errorf("Ready lastTransitionTime moved")
	}
}

// placed is an outcome with the clusters placed.
func placed(clusters ...string) placement.Outcome {
	o := placement.Outcome{Clusters: map[string]placement.Plan{}}
	for _, c := range clusters {
		o.Clusters[c] = placement.Plan{State: placement.Placed}
	}
	return o
}

// TestPlacedSaysWhyClustersAreLeftOut: when no cluster or too few
// qualify, the Placed message counts the reasons and names the clusters,
// not just "no cluster qualifies"; the status keeps the counts.
func TestPlacedSaysWhyClustersAreLeftOut(t *testing.T) {
	excluded := []fleetv1alpha1.ExclusionCount{
		{Reason: "Environment", Count: 1, Clusters: []string{"dev-a"}, Detail: `env="dev", not "prod"`},
		{Reason: "MissingNetwork", Count: 1, Clusters: []string{"prod-b"}, Detail: "network default/vlan2003 is on no node"},
		{Reason: "NoRoom", Count: 4, Clusters: []string{"prod-a", "prod-c", "prod-d"}, Detail: "no node has room for 4 CPU and 8Gi memory"},
	}
	cases := map[string]struct {
		clusters *int32
		placed   []string
		reason   string
		message  string
	}{
		"none qualifies": {
			reason: fleetv1alpha1.ReasonNoClusters,
			message: `no cluster qualifies: 1 Environment (dev-a); 1 MissingNetwork (prod-b: network default/vlan2003 is on no node); ` +
				`4 NoRoom (prod-a, prod-c, prod-d, ...: no node has room for 4 CPU and 8Gi memory). `,
		},
		"fewer than asked": {
			clusters: ptr.To[int32](2), placed: []string{"prod-e"}, reason: fleetv1alpha1.ReasonNotEnoughClusters,
			message: `placed on 1 of 2 clusters (prod-e): 1 Environment (dev-a); 1 MissingNetwork (prod-b: network default/vlan2003 is on no node); ` +
				`4 NoRoom (prod-a, prod-c, prod-d, ...: no node has room for 4 CPU and 8Gi memory)`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := Inputs{
				Spec:               fleetv1alpha1.FleetVirtualMachineSpec{Placement: fleetv1alpha1.FleetPlacement{Clusters: tc.clusters}},
				PlacementRef:       &fleetv1alpha1.PlacementStatus{Name: "p"},
				PlacementScheduled: true, PlacementMessage: "0/7 clusters selected",
				Decision: tc.placed, Outcome: placed(tc.placed...), Excluded: excluded,
			}
			st := Compute(in)
			c := meta.FindStatusCondition(st.Conditions, fleetv1alpha1.ConditionPlaced)
			if c == nil || c.Reason != tc.reason || !strings.HasPrefix(c.Message, tc.message) {
				t.Fatalf("Placed = %+v, want reason %s and a message starting %q", c, tc.reason, tc.message)
			}
			if diff := cmp.Diff(excluded, st.Placement.Excluded); diff != "" {
				t.Errorf("status.placement.excluded (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestPlacedSaysWhereSurplusCopiesRun: more copies found running than
// asked: Placed says how many run, where, and that none is removed.
func TestPlacedSaysWhereSurplusCopiesRun(t *testing.T) {
	out := placed("a", "b")
	out.Surplus = []string{"b"}
	in := Inputs{
		Spec:               fleetv1alpha1.FleetVirtualMachineSpec{Placement: fleetv1alpha1.FleetPlacement{Clusters: ptr.To[int32](1)}},
		PlacementRef:       &fleetv1alpha1.PlacementStatus{Name: "p"},
		PlacementScheduled: true, Decision: []string{"a"}, Outcome: out,
	}
	c := meta.FindStatusCondition(Compute(in).Conditions, fleetv1alpha1.ConditionPlaced)
	want := "placed on a, b; 2 copies run where 1 are asked (found running on the clusters; b beyond the count): none is removed on its own"
	if c == nil || !strings.HasPrefix(c.Message, want) {
		t.Fatalf("Placed = %+v, want a message starting %q", c, want)
	}
}

// TestConfinedCondition: Confined follows argocd-cm's impersonation key,
// says what a git repository can still do when it is off, and is Unknown
// when argocd-cm cannot be read.
func TestConfinedCondition(t *testing.T) {
	cases := map[string]struct {
		imp           Impersonation
		project       string
		want          string
		wantInMessage []string
	}{
		"on, the namespace's own project": {
			imp: Impersonation{Known: true, Enabled: true}, project: "fleetvm-team-a",
			want: "True/SyncImpersonated", wantInMessage: []string{"ServiceAccount team-a/fleetvm-tenant", "clone authorization"},
		},
		"on, another project serving the namespace": {
			imp: Impersonation{Known: true, Enabled: true}, project: "shared",
			want: "True/SyncImpersonated", wantInMessage: []string{"AppProject shared", "destinationServiceAccounts"},
		},
		"off": {
			imp: Impersonation{Known: true}, project: "fleetvm-team-a",
			want: "False/ImpersonationOff", wantInMessage: []string{ImpersonationKey, "own rights", "clone another namespace's disk", "another team's disk image"},
		},
		"argocd-cm missing": {
			imp:  Impersonation{Problem: "ConfigMap argocd/argocd-cm not found"},
			want: "Unknown/ArgoCDSettingsUnknown", wantInMessage: []string{"argocd-cm not found"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := Inputs{Impersonation: tc.imp, Namespace: "team-a", Project: tc.project}
			c := confinedCondition(in)
			if got := string(c.Status) + "/" + c.Reason; got != tc.want {
				t.Errorf("Confined = %s, want %s (%s)", got, tc.want, c.Message)
			}
			for _, w := range tc.wantInMessage {
				if !strings.Contains(c.Message, w) {
					t.Errorf("message %q does not say %q", c.Message, w)
				}
			}
			if len(c.Message) > MaxConditionMessage {
				t.Errorf("message is %d long, more than %d", len(c.Message), MaxConditionMessage)
			}
		})
	}
}

// TestConsoleLinks: each entry links to its VM's page on the console its
// cluster claims: the VM the agent reports there, else the one the hub
// delivers; none without a claimed console or a known VM.
func TestConsoleLinks(t *testing.T) {
	const console = "https://console-openshift-console.apps.a.example.com"
	up := ClusterInfo{Available: metav1.ConditionTrue, Console: console}
	delivered := types.NamespacedName{Namespace: "vms", Name: "web"}
	cases := map[string]struct {
		vm     types.NamespacedName
		info   ClusterInfo
		report *fleetv1alpha1.VMState
		plan   placement.Plan
		want   string
	}{
		"the delivered VM, not reported yet": {vm: delivered, info: up,
			want: console + "/k8s/ns/vms/kubevirt.io~v1~VirtualMachine/web"},
		"the VM the agent reports (a git source's)": {info: up,
			report: &fleetv1alpha1.VMState{Namespace: "vms", Name: "from-git", PrintableStatus: "Running"},
			want:   console + "/k8s/ns/vms/kubevirt.io~v1~VirtualMachine/from-git"},
		"a git source's VM not reported yet": {info: up},
		"no console claimed":                 {vm: delivered, info: ClusterInfo{Available: metav1.ConditionTrue}},
		"cluster unavailable: the link stays": {vm: delivered, info: ClusterInfo{Available: metav1.ConditionUnknown, Console: console},
			want: console + "/k8s/ns/vms/kubevirt.io~v1~VirtualMachine/web"},
		"leaving: the link stays": {vm: delivered, info: up, plan: placement.Plan{State: placement.Leaving, Since: &metav1.Time{}},
			want: console + "/k8s/ns/vms/kubevirt.io~v1~VirtualMachine/web"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			plan := tc.plan
			if plan.State == "" {
				plan.State = placement.Placed
			}
			in := Inputs{
				Spec: fleetv1alpha1.FleetVirtualMachineSpec{RunStrategy: fleetv1alpha1.RunStrategyAlways},
				VM:   tc.vm, AppSetExists: true, PlacementScheduled: true, Decision: []string{"a"},
				Outcome:  placement.Outcome{Clusters: map[string]placement.Plan{"a": plan}},
				Apps:     map[string]AppState{"a": {Sync: "Synced", Health: "Healthy"}},
				Clusters: map[string]ClusterInfo{"a": tc.info},
				Reports:  map[string]*fleetv1alpha1.VMState{},
			}
			if tc.report != nil {
				in.Reports["a"] = tc.report
			}
			st := Compute(in)
			if diff := cmp.Diff(tc.want, st.Clusters[0].ConsoleURL); diff != "" {
				t.Errorf("consoleURL (-want,+got):\n%s", diff)
			}
		})
	}
}
