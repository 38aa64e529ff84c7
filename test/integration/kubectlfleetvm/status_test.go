package kubectlfleetvm

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

func condition(typ string, status metav1.ConditionStatus, reason, message string, at metav1.Time) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message, LastTransitionTime: at}
}

func TestStatus(t *testing.T) {
	ns := namespace(t, "status")
	web := newFVM(ns, "web", fleetv1alpha1.RunStrategyAlways)
	create(t, web)
	create(t, newFVM(ns, "db", fleetv1alpha1.RunStrategyHalted))
	base := get(t, ns, "web").CreationTimestamp
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(base.Add(d)); return &t }
	now := base.Add(30 * time.Minute)

	err := setStatus(t.Context(), ns, "web", func(f *fleetv1alpha1.FleetVirtualMachine) {
		f.Status.Clusters = []fleetv1alpha1.ClusterStatus{
			{Cluster: "prod-a", Environment: "prod", Phase: fleetv1alpha1.ClusterPhaseRunning, PrintableStatus: "Running", Ready: true,
				Node: "node-1", IPAddresses: []string{"10.0.0.5"}, SyncStatus: "Synced", Health: "Healthy", LastTransitionTime: at(20 * time.Minute)},
			{Cluster: "prod-b", Environment: "prod", Phase: fleetv1alpha1.ClusterPhaseFailed, PrintableStatus: "ErrorUnschedulable",
				SyncStatus: "Synced", Health: "Degraded", Message: "0/3 nodes are available", LastTransitionTime: at(29 * time.Minute)},
		}
		f.Status.Summary = fleetv1alpha1.FleetSummary{Desired: 2, Placed: 2, Ready: 1, Running: 1, Failed: 1}
		f.Status.Conditions = []metav1.Condition{
			condition(fleetv1alpha1.ConditionReady, metav1.ConditionFalse, fleetv1alpha1.ReasonSomeNotReady, "not ready on prod-b (Failed)", *at(29 * time.Minute)),
			condition(fleetv1alpha1.ConditionDegraded, metav1.ConditionTrue, fleetv1alpha1.ReasonClustersFailed, "failed on prod-b", *at(29 * time.Minute)),
		}
	})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("one FleetVirtualMachine, cluster by cluster", func(t *testing.T) {
		r := kubectl(t, now, "status", "-n", ns, "web")
		if r.err != nil {
			t.Fatalf("status: %v\n%s", r.err, r.errOut)
		}
		want := `FleetVirtualMachine status/web  runStrategy Always  generation 1, status observed 1

CLUSTER  ENV   PHASE    READY  NODE    IPS       SYNC/HEALTH      SINCE  MESSAGE
prod-a   prod  Running  true   node-1  10.0.0.5  Synced/Healthy   10m    -
prod-b   prod  Failed   false  -       -         Synced/Degraded  60s    0/3 nodes are available

Summary: desired 2, placed 2, ready 1, running 1, stopped 0, failed 1, unknown 0

CONDITION  STATUS  REASON          MESSAGE
Ready      False   SomeNotReady    not ready on prod-b (Failed)
Degraded   True    ClustersFailed  failed on prod-b
`
		if diff := cmp.Diff(want, lines(r.out)); diff != "" {
			t.Errorf("output (-want,+got):\n%s", diff)
		}
	})

	t.Run("the namespace, one line each", func(t *testing.T) {
		r := kubectl(t, now, "status", "--namespace", ns)
		if r.err != nil {
			t.Fatalf("status: %v\n%s", r.err, r.errOut)
		}
		want := `NAME  RUNSTRATEGY  DESIRED  PLACED  READY  RUNNING  STOPPED  FAILED  UNKNOWN  STATUS        AGE
db    Halted       0        0       0      0        0        0       0        NoStatus      30m
web   Always       2        2       1      1        0        1       0        SomeNotReady  30m
`
		if diff := cmp.Diff(want, lines(r.out)); diff != "" {
			t.Errorf("output (-want,+got):\n%s", diff)
		}
	})

	t.Run("all namespaces", func(t *testing.T) {
		r := kubectl(t, now, "status", "-A")
		if r.err != nil {
			t.Fatalf("status -A: %v\n%s", r.err, r.errOut)
		}
		// Other tests' objects may be listed too: compare this namespace's rows.
		var got [][]string
		for i, l := range strings.Split(strings.TrimSpace(r.out), "\n") {
			f := strings.Fields(l)
			if i == 0 || f[0] == ns {
				got = append(got, f)
			}
		}
		want := [][]string{
			strings.Fields("NAMESPACE NAME RUNSTRATEGY DESIRED PLACED READY RUNNING STOPPED FAILED UNKNOWN STATUS AGE"),
			strings.Fields("status db Halted 0 0 0 0 0 0 0 NoStatus 30m"),
			strings.Fields("status web Always 2 2 1 1 0 1 0 SomeNotReady 30m"),
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("rows (-want,+got):\n%s", diff)
		}
	})

	t.Run("not found names the object", func(t *testing.T) {
		r := kubectl(t, now, "status", "-n", ns, "nope")
		want := `FleetVirtualMachine "nope" not found in namespace "status"`
		if r.err == nil || r.err.Error() != want {
			t.Errorf("error = %v, want %q", r.err, want)
		}
	})

	t.Run("empty namespace", func(t *testing.T) {
		r := kubectl(t, now, "status", "-n", namespace(t, "status-empty"))
		if r.err != nil || r.out != "" || r.errOut != "No FleetVirtualMachines found in namespace \"status-empty\".\n" {
			t.Errorf("got err %v, out %q, errOut %q", r.err, r.out, r.errOut)
		}
	})
}

func TestImages(t *testing.T) {
	ns := namespace(t, "images")
	var base metav1.Time
	for _, name := range []string{"rhel9", "win10"} {
		fdi := &fleetv1alpha1.FleetDiskImage{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: fleetv1alpha1.FleetDiskImageSpec{
				Source:  fleetv1alpha1.DiskImageSource{HTTP: &fleetv1alpha1.HTTPSource{URL: "https://images.example.com/" + name + ".qcow2"}},
				Storage: fleetv1alpha1.DiskImageStorage{Size: resource.MustParse("30Gi")},
			},
		}
		create(t, fdi)
		base = fdi.CreationTimestamp
	}
	used := metav1.NewTime(base.Add(-5 * time.Minute))
	rhel9 := &fleetv1alpha1.FleetDiskImage{}
	if err := fleet.Hub.Client.Get(t.Context(), key(ns, "rhel9"), rhel9); err != nil {
		t.Fatal(err)
	}
	rhel9.Status = fleetv1alpha1.FleetDiskImageStatus{
		ObservedGeneration: rhel9.Generation,
		Clusters: []fleetv1alpha1.ImageClusterStatus{
			{Cluster: "prod-a", Phase: fleetv1alpha1.ImagePhaseReady, Progress: "100.0%", References: 2,
				Users: []string{"vms/web", "default/legacy"}, LastReferencedTime: &used},
			{Cluster: "prod-b", Phase: fleetv1alpha1.ImagePhaseImporting, Progress: "45.5%"},
		},
		Totals: fleetv1alpha1.DiskImageTotals{Clusters: 2, Ready: 1, References: 2},
		Conditions: []metav1.Condition{
			condition(fleetv1alpha1.ConditionInUse, metav1.ConditionTrue, fleetv1alpha1.ReasonReferenced, "used by 2 VMs", used),
		},
	}
	if err := fleet.Hub.Client.Status().Update(t.Context(), rhel9); err != nil {
		t.Fatal(err)
	}

	r := kubectl(t, base.Time, "images", "-n", ns)
	if r.err != nil {
		t.Fatalf("images: %v\n%s", r.err, r.errOut)
	}
	want := `IMAGE  CLUSTER  PHASE            PROGRESS  REFERENCES  LAST USED  USED BY
rhel9  prod-a   Ready            100.0%    2           5m         vms/web,default/legacy
rhel9  prod-b   Importing        45.5%     0           -          -
win10  -        NotOnAnyCluster  -         0           -          -

IMAGE  CLUSTERS  READY  REFERENCES  IN USE
rhel9  2         1      2           True
win10  0         0      0           -

Total: 2 images, 2 references
`
	if diff := cmp.Diff(want, lines(r.out)); diff != "" {
		t.Errorf("output (-want,+got):\n%s", diff)
	}

	r = kubectl(t, base.Time, "images", "-n", ns, "centos")
	if want := `FleetDiskImage "centos" not found in namespace "images"`; r.err == nil || r.err.Error() != want {
		t.Errorf("error = %v, want %q", r.err, want)
	}
}
