package kubectlfleetvm

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

var now = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(-d)); return &t }

// lines trims the trailing spaces tabwriter leaves, so expectations can be
// written as plain text.
func lines(s string) string {
	ls := strings.Split(s, "\n")
	for i, l := range ls {
		ls[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(ls, "\n")
}

func TestCell(t *testing.T) {
	for name, tc := range map[string]struct{ in, want string }{
		"empty":            {"", "-"},
		"spaces only":      {"  ", "-"},
		"plain":            {"Running", "Running"},
		"tabs and newline": {"a\tb\nc\r", "a b c"},
		"escape sequence":  {"ok\x1b[31mred", "ok[31mred"},
	} {
		t.Run(name, func(t *testing.T) {
			if got := cell(tc.in); got != tc.want {
				t.Errorf("cell(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestWriteStatus(t *testing.T) {
	fvm := func(mut func(*fleetv1alpha1.FleetVirtualMachine)) *fleetv1alpha1.FleetVirtualMachine {
		f := &fleetv1alpha1.FleetVirtualMachine{
			ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "web", Generation: 2},
			Spec:       fleetv1alpha1.FleetVirtualMachineSpec{RunStrategy: fleetv1alpha1.RunStrategyAlways},
		}
		mut(f)
		return f
	}
	for name, tc := range map[string]struct {
		fvm  *fleetv1alpha1.FleetVirtualMachine
		want string
	}{
		"no status yet": {
			fvm: fvm(func(*fleetv1alpha1.FleetVirtualMachine) {}),
			want: `FleetVirtualMachine vms/web  runStrategy Always  generation 2, status observed 0
No status yet: the FleetVM hub controller has not reconciled this object.
`,
		},
		"two clusters, one starting": {
			fvm: fvm(func(f *fleetv1alpha1.FleetVirtualMachine) {
				f.Status = fleetv1alpha1.FleetVirtualMachineStatus{
					ObservedGeneration: 2,
					Clusters: []fleetv1alpha1.ClusterStatus{
						{Cluster: "prod-a", Environment: "prod", Phase: fleetv1alpha1.ClusterPhaseRunning, Ready: true, Node: "node-1",
							IPAddresses: []string{"10.0.0.5", "fd00::5"}, SyncStatus: "Synced", Health: "Healthy", LastTransitionTime: ago(5 * time.Minute)},
						{Cluster: "prod-b", Environment: "prod", Phase: fleetv1alpha1.ClusterPhaseStarting, SyncStatus: "Synced", Health: "Progressing",
							Message: "virt-launcher\tstarting", LastTransitionTime: ago(30 * time.Second)},
					},
					Summary: fleetv1alpha1.FleetSummary{Desired: 2, Placed: 2, Ready: 1, Running: 1},
					Conditions: []metav1.Condition{
						{Type: fleetv1alpha1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: "AsExpected", Message: "no cluster reports a problem"},
						{Type: fleetv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "SomeNotReady", Message: "not ready on prod-b (Starting)"},
						{Type: fleetv1alpha1.ConditionPlaced, Status: metav1.ConditionTrue, Reason: "ClustersDecided", Message: "placed on prod-a, prod-b"},
					},
				}
			}),
			want: `FleetVirtualMachine vms/web  runStrategy Always  generation 2, status observed 2

CLUSTER  ENV   PHASE     READY  NODE    IPS               SYNC/HEALTH         SINCE  MESSAGE
prod-a   prod  Running   true   node-1  10.0.0.5,fd00::5  Synced/Healthy      5m     -
prod-b   prod  Starting  false  -       -                 Synced/Progressing  30s    virt-launcher starting

Summary: desired 2, placed 2, ready 1, running 1, stopped 0, failed 0, unknown 0

CONDITION  STATUS  REASON           MESSAGE
Ready      False   SomeNotReady     not ready on prod-b (Starting)
Placed     True    ClustersDecided  placed on prod-a, prod-b
Degraded   False   AsExpected       no cluster reports a problem
`,
		},
		"stale status, nothing decided": {
			fvm: fvm(func(f *fleetv1alpha1.FleetVirtualMachine) {
				f.Status = fleetv1alpha1.FleetVirtualMachineStatus{
					ObservedGeneration: 1,
					Conditions: []metav1.Condition{
						{Type: fleetv1alpha1.ConditionPlaced, Status: metav1.ConditionFalse, Reason: "NoMatchingClusters", Message: "no cluster qualifies"},
					},
				}
			}),
			want: `FleetVirtualMachine vms/web  runStrategy Always  generation 2, status observed 1
The status below is for generation 1: the hub controller has not caught up with generation 2 yet.

No clusters: the placement has decided none yet.

Summary: desired 0, placed 0, ready 0, running 0, stopped 0, failed 0, unknown 0

CONDITION  STATUS  REASON              MESSAGE
Placed     False   NoMatchingClusters  no cluster qualifies
`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if err := writeStatus(&out, tc.fvm, now); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, lines(out.String())); diff != "" {
				t.Errorf("output (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestWriteList(t *testing.T) {
	items := []fleetv1alpha1.FleetVirtualMachine{
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "web", Generation: 3, CreationTimestamp: *ago(2 * time.Hour)},
			Spec:       fleetv1alpha1.FleetVirtualMachineSpec{RunStrategy: fleetv1alpha1.RunStrategyHalted},
			Status: fleetv1alpha1.FleetVirtualMachineStatus{
				ObservedGeneration: 2,
				Summary:            fleetv1alpha1.FleetSummary{Desired: 2, Placed: 2, Running: 2, Ready: 2},
				Conditions:         []metav1.Condition{{Type: fleetv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "AllReady"}},
			},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "db", Generation: 1, CreationTimestamp: *ago(90 * time.Second)},
		},
	}
	for name, tc := range map[string]struct {
		all  bool
		want string
	}{
		"one namespace": {want: `NAME  RUNSTRATEGY  DESIRED  PLACED  READY  RUNNING  STOPPED  FAILED  UNKNOWN  STATUS               AGE
db    Always       0        0       0      0        0        0       0        NoStatus             90s
web   Halted       2        2       2      2        0        0       0        AllReady (outdated)  120m
`},
		"all namespaces": {all: true, want: `NAMESPACE  NAME  RUNSTRATEGY  DESIRED  PLACED  READY  RUNNING  STOPPED  FAILED  UNKNOWN  STATUS               AGE
apps       db    Always       0        0       0      0        0        0       0        NoStatus             90s
vms        web   Halted       2        2       2      2        0        0       0        AllReady (outdated)  120m
`},
	} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if err := writeList(&out, items, tc.all, now); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, lines(out.String())); diff != "" {
				t.Errorf("output (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestWriteImages(t *testing.T) {
	images := []fleetv1alpha1.FleetDiskImage{
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "win10"},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "rhel9"},
			Status: fleetv1alpha1.FleetDiskImageStatus{
				Clusters: []fleetv1alpha1.ImageClusterStatus{
					{Cluster: "prod-b", Phase: fleetv1alpha1.ImagePhaseImporting, Progress: "45.5%"},
					{Cluster: "prod-a", Phase: fleetv1alpha1.ImagePhaseReady, References: 3, Users: []string{"vms/web", "vms/db"},
						LastReferencedTime: ago(3 * time.Minute)},
				},
				Totals:     fleetv1alpha1.DiskImageTotals{Clusters: 2, Ready: 1, References: 3},
				Conditions: []metav1.Condition{{Type: fleetv1alpha1.ConditionInUse, Status: metav1.ConditionTrue, Reason: "Referenced"}},
			},
		},
	}
	var out bytes.Buffer
	if err := writeImages(&out, images, false, now); err != nil {
		t.Fatal(err)
	}
	want := `IMAGE  CLUSTER  PHASE            PROGRESS  REFERENCES  LAST USED  USED BY
rhel9  prod-a   Ready            -         3           3m         vms/web,vms/db and 1 more
rhel9  prod-b   Importing        45.5%     0           -          -
win10  -        NotOnAnyCluster  -         0           -          -

IMAGE  CLUSTERS  READY  REFERENCES  IN USE
rhel9  2         1      3           True
win10  0         0      0           -

Total: 2 images, 3 references
`
	if diff := cmp.Diff(want, lines(out.String())); diff != "" {
		t.Errorf("output (-want,+got):\n%s", diff)
	}
}

func TestProgress(t *testing.T) {
	entry := func(name string, phase fleetv1alpha1.ClusterPhase, ready bool) fleetv1alpha1.ClusterStatus {
		return fleetv1alpha1.ClusterStatus{Cluster: name, Phase: phase, Ready: ready}
	}
	leaving := entry("old", fleetv1alpha1.ClusterPhaseUnknown, false)
	leaving.LeavingSince = ago(time.Minute)
	for name, tc := range map[string]struct {
		observed    int64
		clusters    []fleetv1alpha1.ClusterStatus
		target      target
		wantDone    bool
		wantPending []string
	}{
		"status behind the patch": {
			observed: 4, clusters: []fleetv1alpha1.ClusterStatus{entry("a", fleetv1alpha1.ClusterPhaseStopped, false)},
			target:      targetStopped,
			wantPending: []string{"the hub controller to observe generation 5 (status is at 4)"},
		},
		"all stopped, a leaving cluster is not waited for": {
			observed: 5, clusters: []fleetv1alpha1.ClusterStatus{entry("a", fleetv1alpha1.ClusterPhaseStopped, false), leaving,
				entry("gone", fleetv1alpha1.ClusterPhaseLeaving, true)},
			target: targetStopped, wantDone: true,
		},
		"one still stopping, one unknown": {
			observed: 5, clusters: []fleetv1alpha1.ClusterStatus{entry("a", fleetv1alpha1.ClusterPhaseStopped, false),
				entry("b", fleetv1alpha1.ClusterPhaseStopping, false), entry("c", fleetv1alpha1.ClusterPhaseUnknown, false)},
			target: targetStopped, wantPending: []string{"b (Stopping)", "c (Unknown)"},
		},
		"running but not ready": {
			observed: 6, clusters: []fleetv1alpha1.ClusterStatus{entry("a", fleetv1alpha1.ClusterPhaseRunning, true),
				entry("b", fleetv1alpha1.ClusterPhaseRunning, false)},
			target: targetRunning, wantPending: []string{"b (Running)"},
		},
		"running and ready everywhere": {
			observed: 5, clusters: []fleetv1alpha1.ClusterStatus{entry("a", fleetv1alpha1.ClusterPhaseRunning, true)},
			target: targetRunning, wantDone: true,
		},
		"nothing placed: stopped, not running": {
			observed: 5, target: targetRunning, wantPending: []string{"a cluster to be placed on"},
		},
		"nothing placed counts as stopped": {
			observed: 5, target: targetStopped, wantDone: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			fvm := &fleetv1alpha1.FleetVirtualMachine{Status: fleetv1alpha1.FleetVirtualMachineStatus{ObservedGeneration: tc.observed, Clusters: tc.clusters}}
			done, pending := progress(fvm, 5, tc.target)
			if done != tc.wantDone {
				t.Errorf("done = %v, want %v", done, tc.wantDone)
			}
			if diff := cmp.Diff(tc.wantPending, pending); diff != "" {
				t.Errorf("pending (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestRunStrategyPatch(t *testing.T) {
	for name, tc := range map[string]struct {
		rv   string
		want string
	}{
		"plain":           {want: `{"spec":{"runStrategy":"Halted"}}`},
		"optimistic lock": {rv: "42", want: `{"metadata":{"resourceVersion":"42"},"spec":{"runStrategy":"Halted"}}`},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := runStrategyPatch(fleetv1alpha1.RunStrategyHalted, tc.rv)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("patch (-want,+got):\n%s", diff)
			}
		})
	}
}
