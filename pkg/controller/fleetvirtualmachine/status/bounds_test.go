package status

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/consolelink"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/placement"
)

func TestFirstNames(t *testing.T) {
	cases := map[string]struct {
		names []string
		n     int
		want  string
	}{
		"none":            {names: nil, n: 3, want: ""},
		"fewer than n":    {names: []string{"a", "b"}, n: 3, want: "a, b"},
		"exactly n":       {names: []string{"a", "b", "c"}, n: 3, want: "a, b, c"},
		"more than n":     {names: []string{"a", "b", "c", "d", "e"}, n: 3, want: "a, b, c and 2 more"},
		"n zero counts":   {names: []string{"a", "b"}, n: 0, want: " and 2 more"},
		"600 of a fleet":  {names: clusterNames(600, 5), n: 3, want: "c0000, c0001, c0002 and 597 more"},
		"one name, n one": {names: []string{"a"}, n: 1, want: "a"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, firstNames(tc.names, tc.n)); diff != "" {
				t.Errorf("firstNames (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestTruncate(t *testing.T) {
	cases := map[string]struct {
		s    string
		max  int
		want string
	}{
		"short stays":             {s: "abc", max: 3, want: "abc"},
		"cut ends in an ellipsis": {s: "abcdef", max: 4, want: "abc…"},
		"counts characters":       {s: "ééééé", max: 5, want: "ééééé"},
		"never splits one":        {s: "éééééé", max: 3, want: "éé…"},
		"max one":                 {s: "abc", max: 1, want: "…"},
		"max zero":                {s: "abc", max: 0, want: ""},
		"empty":                   {s: "", max: 0, want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Truncate(tc.s, tc.max)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Truncate (-want,+got):\n%s", diff)
			}
			if n := utf8.RuneCountInString(got); n > tc.max {
				t.Errorf("Truncate(%q, %d) has %d characters", tc.s, tc.max, n)
			}
		})
	}
}

func TestCompactEntries(t *testing.T) {
	since := ptr.To(metav1.NewTime(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)))
	full := func(name string, phase fleetv1alpha1.ClusterPhase, ready bool) fleetv1alpha1.ClusterStatus {
		return fleetv1alpha1.ClusterStatus{Cluster: name, Environment: "prod", Phase: phase, Ready: ready,
			PrintableStatus: string(phase), Node: "n1", Message: "m", LastTransitionTime: since,
			ConsoleURL: "https://console.example.com/k8s/ns/vms/kubevirt.io~v1~VirtualMachine/web"}
	}
	compact := func(e fleetv1alpha1.ClusterStatus) fleetv1alpha1.ClusterStatus {
		c := fleetv1alpha1.ClusterStatus{Cluster: e.Cluster, Environment: e.Environment, Phase: e.Phase, Ready: e.Ready,
			LeavingSince: e.LeavingSince, RemovingSince: e.RemovingSince}
		if e.LeavingSince != nil {
			c.Message = e.Message // why it leaves: an input of the decision
		}
		return c
	}
	leaving := full("c-leaving", fleetv1alpha1.ClusterPhaseLeaving, true)
	leaving.LeavingSince = since
	a, b := full("a", fleetv1alpha1.ClusterPhaseRunning, true), full("b", fleetv1alpha1.ClusterPhaseRunning, true)
	failed := full("d-failed", fleetv1alpha1.ClusterPhaseFailed, false)
	unknown := full("e-unknown", fleetv1alpha1.ClusterPhaseUnknown, false)
	starting := full("f-starting", fleetv1alpha1.ClusterPhaseStarting, false)
	stopped := full("g-stopped", fleetv1alpha1.ClusterPhaseStopped, false)
	entries := []fleetv1alpha1.ClusterStatus{a, b, leaving, failed, unknown, starting, stopped}

	cases := map[string]struct {
		strategy fleetv1alpha1.RunStrategy
		detailed int
		want     []fleetv1alpha1.ClusterStatus
	}{
		"all fit": {strategy: fleetv1alpha1.RunStrategyAlways, detailed: 7, want: entries},
		"failed, unknown, leaving first, in the list's order": {
			strategy: fleetv1alpha1.RunStrategyAlways, detailed: 3,
			want: []fleetv1alpha1.ClusterStatus{compact(a), compact(b), leaving, failed, unknown, compact(starting), compact(stopped)},
		},
		"then what is not yet as runStrategy asks": {
			strategy: fleetv1alpha1.RunStrategyAlways, detailed: 5,
			want: []fleetv1alpha1.ClusterStatus{compact(a), compact(b), leaving, failed, unknown, starting, stopped},
		},
		"then the settled by name": {
			strategy: fleetv1alpha1.RunStrategyAlways, detailed: 6,
			want: []fleetv1alpha1.ClusterStatus{a, compact(b), leaving, failed, unknown, starting, stopped},
		},
		"Halted: a running copy needs attention, a stopped one not": {
			strategy: fleetv1alpha1.RunStrategyHalted, detailed: 6,
			want: []fleetv1alpha1.ClusterStatus{a, b, leaving, failed, unknown, starting, compact(stopped)},
		},
		"none detailed keeps every cluster": {
			strategy: fleetv1alpha1.RunStrategyAlways, detailed: 0,
			want: []fleetv1alpha1.ClusterStatus{compact(a), compact(b), compact(leaving), compact(failed), compact(unknown), compact(starting), compact(stopped)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, compactEntries(tc.strategy, entries, tc.detailed)); diff != "" {
				t.Errorf("compactEntries (-want,+got):\n%s", diff)
			}
		})
	}
}

// clusterNames makes n names of the given length, sorted.
func clusterNames(n, length int) []string {
	out := make([]string, n)
	for i := range out {
		id := fmt.Sprintf("%04d", i)
		out[i] = "c" + strings.Repeat("x", max(0, length-1-len(id))) + id
	}
	return out
}

// TestStatusFitsAtFleetScale: at 5,000 clusters with 63-character names,
// and with every text an agent, Argo CD or OCM hands in at its longest,
// every message and list stays within its CRD limit, the status stays
// well under etcd's limit, every cluster stays recorded, and the clusters
// that need attention are named. Every cluster claims an OpenShift console
// named after it (consoleurl claims run about 100 characters), and the
// VM's namespace and name are 63 characters long: only the detailed
// entries link to it.
func TestStatusFitsAtFleetScale(t *testing.T) {
	const n = 5000
	names := clusterNames(n, 63)
	now := metav1.NewTime(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	long := strings.Repeat("é", 2000)
	in := Inputs{
		Spec:               fleetv1alpha1.FleetVirtualMachineSpec{RunStrategy: fleetv1alpha1.RunStrategyAlways},
		Generation:         1,
		GracePeriod:        5 * time.Minute,
		PlacementRef:       &fleetv1alpha1.PlacementStatus{Namespace: "argocd", Name: "p"},
		PlacementScheduled: true,
		PlacementMessage:   long,
		AppSetExists:       true,
		Decision:           names,
		Outcome:            placement.Outcome{Clusters: map[string]placement.Plan{}},
		Apps:               map[string]AppState{},
		Clusters:           map[string]ClusterInfo{},
		Reports:            map[string]*fleetv1alpha1.VMState{},
		Excluded: []fleetv1alpha1.ExclusionCount{{
			Reason: "NoRoom", Count: 3, Clusters: names[:3], Detail: strings.Repeat("d", maxExclusionDetail)}},
		VM:  types.NamespacedName{Namespace: strings.Repeat("s", 63), Name: strings.Repeat("v", 63)},
		Now: now,
	}
	var networks []string
	for i := range 16 {
		networks = append(networks, fmt.Sprintf("%02d", i)+strings.Repeat("n", 315))
	}
	failed := map[string]bool{}
	for i, c := range names {
		in.Outcome.Clusters[c] = placement.Plan{State: placement.Placed}
		in.Apps[c] = AppState{Sync: "Synced", Health: "Healthy"}
		console := "https://console-openshift-console.apps." + c + ".example.com"
		in.Clusters[c] = ClusterInfo{Environment: strings.Repeat("e", 63), Available: metav1.ConditionTrue, Console: console}
		in.Reports[c] = &fleetv1alpha1.VMState{PrintableStatus: "Running", Ready: true, Node: strings.Repeat("n", 253),
			IPAddresses: []string{"10.0.0.1", "fd00::1"}}
		switch {
		case i%1000 == 7: // five failed, their messages at their longest
			failed[c] = true
			in.Reports[c] = &fleetv1alpha1.VMState{PrintableStatus: "CrashLoopBackOff", Conditions: strings.Repeat("c", 1024), MissingNetworks: networks}
			in.Apps[c] = AppState{Sync: "OutOfSync", Health: "Degraded", Error: strings.Repeat("a", 512)}
		case i%1000 == 9: // five unreachable
			in.Clusters[c] = ClusterInfo{Environment: strings.Repeat("e", 63), Available: metav1.ConditionUnknown, Console: console}
		case i >= n-300: // 300 not ready yet
			in.Reports[c] = &fleetv1alpha1.VMState{PrintableStatus: "Starting"}
		}
	}
	st := Compute(in)

	if len(st.Clusters) != n {
		t.Fatalf("status.clusters has %d entries, want every one of the %d clusters", len(st.Clusters), n)
	}
	detailed := 0
	for _, e := range st.Clusters {
		if n := utf8.RuneCountInString(e.Message); n > maxEntryMessage {
			t.Errorf("cluster %s: message of %d characters, the CRD allows %d", e.Cluster, n, maxEntryMessage)
		}
		if e.LastTransitionTime != nil {
			detailed++
		}
		if (e.LastTransitionTime != nil) != (e.ConsoleURL != "") {
			t.Errorf("cluster %s: consoleURL %q: want one in a detailed entry only", e.Cluster, e.ConsoleURL)
		}
		if (failed[e.Cluster] || e.Phase == fleetv1alpha1.ClusterPhaseUnknown) && e.Message == "" {
			t.Errorf("cluster %s (%s) needs attention and has no details", e.Cluster, e.Phase)
		}
	}
	if detailed != detailedEntries {
		t.Errorf("%d entries carry details, want %d", detailed, detailedEntries)
	}

	for _, c := range st.Conditions {
		if n := utf8.RuneCountInString(c.Message); n > 4096 {
			t.Errorf("condition %s: message of %d characters:\n%s", c.Type, n, c.Message)
		}
	}
	degraded := findCondition(t, st, fleetv1alpha1.ConditionDegraded)
	for c := range failed {
		if !strings.Contains(degraded.Message, c) {
			t.Errorf("Degraded does not name failed cluster %s: %s", c, degraded.Message)
		}
	}
	if got := len(st.Placement.DecidedClusters); got != maxDecidedNames || st.Placement.DecidedCount != n {
		t.Errorf("decidedClusters names %d of %d, want %d of %d", got, st.Placement.DecidedCount, maxDecidedNames, n)
	}
	if d := st.Placement.Excluded[0].Detail; utf8.RuneCountInString(d) > maxExclusionDetail {
		t.Errorf("excluded detail of %d characters", utf8.RuneCountInString(d))
	}
	if st.Summary.Placed != n || st.Summary.Failed != 5 || st.Summary.Unknown != 5 || st.Summary.Running != n-10-300 {
		t.Errorf("summary counts every cluster, got %+v", st.Summary)
	}
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("status of %d clusters with 63-character names and environments: %d bytes", n, len(raw))
	if len(raw) > 1<<20 {
		t.Errorf("status is %d bytes, want under 1 MiB (etcd refuses requests over 1.5 MiB)", len(raw))
	}

	// A rollout with every cluster in flight (type All): each cluster's
	// record, kept in compact entries too, at its longest.
	in.Rollout = &Rollout{
		Status:   fleetv1alpha1.RolloutStatus{Revision: 1 << 40, PreviousRevision: 1<<40 - 1, Hash: strings.Repeat("h", 32), Phase: "Progressing", Message: long},
		Clusters: map[string]*fleetv1alpha1.ClusterRollout{},
	}
	for _, c := range names {
		in.Rollout.Clusters[c] = &fleetv1alpha1.ClusterRollout{Revision: 1 << 40, Since: &now, State: "Applying"}
	}
	st = Compute(in)
	for _, e := range st.Clusters {
		if e.Rollout == nil || *e.Rollout != *in.Rollout.Clusters[e.Cluster] {
			t.Fatalf("cluster %s: rollout %v, want its record kept, compact or not", e.Cluster, e.Rollout)
		}
	}
	if st.Rollout == nil || st.Rollout.Revision != 1<<40 || utf8.RuneCountInString(st.Rollout.Message) > MaxConditionMessage {
		t.Errorf("status.rollout %v: want the revision, its message bounded", st.Rollout)
	}
	if raw, err = json.Marshal(st); err != nil {
		t.Fatal(err)
	}
	t.Logf("the same with every cluster applying a revision: %d bytes", len(raw))
	if len(raw) > 1400<<10 {
		t.Errorf("status is %d bytes mid-rollout, want under 1,400 KiB (etcd refuses requests over 1.5 MiB)", len(raw))
	}
}

func findCondition(t *testing.T, st fleetv1alpha1.FleetVirtualMachineStatus, typ string) metav1.Condition {
	t.Helper()
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c
		}
	}
	t.Fatalf("no condition %s", typ)
	return metav1.Condition{}
}

// TestBoundsMatchTheCRD: the limits the status is built to are those of
// the generated CRD.
func TestBoundsMatchTheCRD(t *testing.T) {
	raw, err := os.ReadFile("../../../../deploy/crds/fleetvm.io_fleetvirtualmachines.yaml")
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(raw, crd); err != nil {
		t.Fatal(err)
	}
	status := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"]
	placement := status.Properties["placement"]
	got := map[string]int64{
		"conditions[].message":          *status.Properties["conditions"].Items.Schema.Properties["message"].MaxLength,
		"clusters[].message":            *status.Properties["clusters"].Items.Schema.Properties["message"].MaxLength,
		"placement.excluded[].detail":   *placement.Properties["excluded"].Items.Schema.Properties["detail"].MaxLength,
		"placement.excluded[].clusters": *placement.Properties["excluded"].Items.Schema.Properties["clusters"].MaxItems,
		"placement.decidedClusters":     *placement.Properties["decidedClusters"].MaxItems,
		"clusters[].consoleURL":         *status.Properties["clusters"].Items.Schema.Properties["consoleURL"].MaxLength,
	}
	want := map[string]int64{
		"conditions[].message":          MaxConditionMessage,
		"clusters[].message":            maxEntryMessage,
		"placement.excluded[].detail":   maxExclusionDetail,
		"placement.excluded[].clusters": ExclusionNames,
		"placement.decidedClusters":     maxDecidedNames,
		"clusters[].consoleURL":         consolelink.MaxLength,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("CRD limits (-want,+got):\n%s", diff)
	}
}
