package kubectlfleetvm

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

// registerClusters registers the ManagedClusters in a cluster set of their
// own, env=prod, so other tests' FleetVMs and clusters stay out of the way.
func registerClusters(t *testing.T, set string, names ...string) {
	t.Helper()
	for _, n := range names {
		err := fleet.RegisterManagedCluster(t.Context(), fleetenv.ManagedCluster{Name: n, ClusterSet: set, Labels: map[string]string{"env": "prod"}})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func cluster(t *testing.T, name string) *clusterv1.ManagedCluster {
	t.Helper()
	mc := &clusterv1.ManagedCluster{}
	if err := fleet.Hub.Client.Get(t.Context(), client.ObjectKey{Name: name}, mc); err != nil {
		t.Fatal(err)
	}
	return mc
}

func setTaints(t *testing.T, name string, taints ...clusterv1.Taint) {
	t.Helper()
	mc := cluster(t, name)
	mc.Spec.Taints = taints
	if err := fleet.Hub.Client.Update(t.Context(), mc); err != nil {
		t.Fatal(err)
	}
}

func taintString(t clusterv1.Taint) string {
	return t.Key + "=" + t.Value + ":" + string(t.Effect) + " added " + t.TimeAdded.UTC().Format(time.RFC3339)
}

// taintStrings makes taints comparable whatever the time zone they were
// read in.
func taintStrings(taints []clusterv1.Taint) []string {
	var out []string
	for _, t := range taints {
		out = append(out, taintString(t))
	}
	return out
}

// TestDrainUndrain: drain adds the taint once, keeping the others, and
// prints the copies and the drain's moves; with --wait it follows them to
// the end, an error when a copy could not move; undrain takes the taint
// off, once.
func TestDrainUndrain(t *testing.T) {
	registerClusters(t, "maint", "maint-a", "maint-b")
	other := clusterv1.Taint{Key: "example.com/maintenance-window", Value: "sunday", Effect: clusterv1.TaintEffectPreferNoSelect,
		TimeAdded: metav1.NewTime(time.Date(2025, 5, 1, 8, 0, 0, 0, time.UTC))}
	setTaints(t, "maint-a", other)
	ns := namespace(t, "drain-maint")
	for _, name := range []string{"web", "api"} {
		create(t, utiltesting.MakeFleetVM(ns, name).ClusterSets("maint").Obj())
	}
	placeOn(t, ns, "web", copyOn("maint-a", "node-1"))
	placeOn(t, ns, "api", copyOn("maint-a", "node-2"))
	// The hub's drain controller does not run here: the test makes the
	// move it would.
	mv := &fleetv1alpha1.FleetVirtualMachineMove{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "maint-a.web", Labels: map[string]string{fleetv1alpha1.LabelDrain: "maint-a"}},
		Spec:       fleetv1alpha1.FleetVirtualMachineMoveSpec{FleetVirtualMachine: "web", From: "maint-a"},
	}
	create(t, mv)
	mv.Status = fleetv1alpha1.FleetVirtualMachineMoveStatus{Phase: fleetv1alpha1.MovePreparing, Method: fleetv1alpha1.MoveMethodRestart,
		To: "maint-b", Message: "creating the VM stopped on maint-b"}
	if err := fleet.Hub.Client.Status().Update(t.Context(), mv); err != nil {
		t.Fatal(err)
	}

	// drainer has the permissions the guide lists for drain and undrain;
	// watcher has them but patch, so whatever it runs writes nothing.
	grantCluster(t, "drainer", writeDrain)
	grantCluster(t, "watcher", readDrain)
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	r := kubectl(t, now, "drain", "maint-a", "--as", "drainer")
	if r.err != nil {
		t.Fatalf("drain: %v\n%s", r.err, r.errOut)
	}
	want := `managedcluster.cluster.open-cluster-management.io/maint-a draining: taint fleetvm.io/drain:NoSelectIfNew added; the hub moves its FleetVM copies off it, a few at a time

NAMESPACE    FLEETVM  NODE    TO       METHOD   PHASE      MESSAGE
drain-maint  api      node-2  -        -        Waiting    no move yet: the hub starts a few at a time
drain-maint  web      node-1  maint-b  Restart  Preparing  creating the VM stopped on maint-b

Summary: moved 0, moving 1, waiting 1, failed 0
`
	if diff := cmp.Diff(want, lines(r.out)); diff != "" {
		t.Errorf("drain printed (-want,+got):\n%s", diff)
	}
	drained := cluster(t, "maint-a")
	wantTaints := []string{taintString(other), "fleetvm.io/drain=:NoSelectIfNew added 2025-06-01T12:00:00Z"}
	if diff := cmp.Diff(wantTaints, taintStrings(drained.Spec.Taints)); diff != "" {
		t.Errorf("taints (-want,+got):\n%s", diff)
	}

	r = kubectl(t, now.Add(time.Hour), "drain", "maint-a", "--as", "watcher")
	if r.err != nil || !strings.HasPrefix(r.out, "managedcluster.cluster.open-cluster-management.io/maint-a is draining already (taint fleetvm.io/drain)\n") {
		t.Errorf("second drain: err %v, printed %q", r.err, r.out)
	}
	if rv := cluster(t, "maint-a").ResourceVersion; rv != drained.ResourceVersion {
		t.Errorf("a second drain wrote the cluster: resourceVersion %s, want %s", rv, drained.ResourceVersion)
	}

	// --wait follows the drain while the test plays the hub: web moves;
	// api's move fails, and its copy stays. The hub does not try a failed
	// move again, so the drain has ended, with a copy left: an error.
	w := start(t.Context(), now, "drain", "maint-a", "--wait", "--timeout", "1m", "--as", "watcher")
	w.wrote(t, "Summary: moved 0, moving 1, waiting 1, failed 0")
	mv.Status.Phase, mv.Status.Message = fleetv1alpha1.MoveSucceeded, "ready on maint-b"
	if err := fleet.Hub.Client.Status().Update(t.Context(), mv); err != nil {
		t.Fatal(err)
	}
	placeOn(t, ns, "web", copyOn("maint-b", "node-1"))
	w.wrote(t, "Summary: moved 1, moving 0, waiting 1, failed 0")
	failed := &fleetv1alpha1.FleetVirtualMachineMove{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "maint-a.api", Labels: map[string]string{fleetv1alpha1.LabelDrain: "maint-a"}},
		Spec:       fleetv1alpha1.FleetVirtualMachineMoveSpec{FleetVirtualMachine: "api", From: "maint-a"},
	}
	create(t, failed)
	failed.Status = fleetv1alpha1.FleetVirtualMachineMoveStatus{Phase: fleetv1alpha1.MoveFailed, Message: "no cluster qualifies: the VM stays on maint-a"}
	if err := fleet.Hub.Client.Status().Update(t.Context(), failed); err != nil {
		t.Fatal(err)
	}
	w.wait(t)
	wantErr := "the drain of maint-a ended with 1 copy still on it whose moves failed (see MESSAGE): the hub does not try them again; " +
		"kubectl fleetvm undrain maint-a, then drain it again, tries them again"
	if w.err == nil || w.err.Error() != wantErr {
		t.Errorf("drain --wait: error %v, want %q", w.err, wantErr)
	}
	if want := "Summary: moved 1, moving 0, waiting 0, failed 1\n"; !strings.HasSuffix(w.out.String(), want) {
		t.Errorf("drain --wait printed:\n%s\nwant it to end with %q", w.out, want)
	}

	// Once api is off the cluster too, drain says the cluster is drained.
	placeOn(t, ns, "api", copyOn("maint-b", "node-2"))
	r = kubectl(t, now, "drain", "maint-a", "--as", "watcher")
	if want := "maint-a is drained: no FleetVM copy left on it, no move running. kubectl fleetvm undrain maint-a lets copies be placed on it again.\n"; r.err != nil || !strings.HasSuffix(r.out, want) {
		t.Errorf("drain of an empty cluster: err %v, printed:\n%s\nwant it to end with %q", r.err, r.out, want)
	}

	r = kubectl(t, now, "undrain", "maint-a", "--as", "drainer")
	if want := "managedcluster.cluster.open-cluster-management.io/maint-a undrained: taint fleetvm.io/drain removed. The hub starts no new move: " +
		"moves not started yet are deleted, moves under way finish (kubectl get fleetvirtualmachinemoves -A -l fleetvm.io/drain=maint-a), " +
		"and new copies may be placed on it again.\n"; r.err != nil || r.out != want {
		t.Errorf("undrain: err %v, printed %q, want %q", r.err, r.out, want)
	}
	undrained := cluster(t, "maint-a")
	if diff := cmp.Diff([]string{taintString(other)}, taintStrings(undrained.Spec.Taints)); diff != "" {
		t.Errorf("taints after undrain (-want,+got):\n%s", diff)
	}
	r = kubectl(t, now, "undrain", "maint-a", "--as", "watcher")
	if want := "managedcluster.cluster.open-cluster-management.io/maint-a is not draining (no taint fleetvm.io/drain): nothing to do\n"; r.err != nil || r.out != want {
		t.Errorf("second undrain: err %v, printed %q, want %q", r.err, r.out, want)
	}
	if rv := cluster(t, "maint-a").ResourceVersion; rv != undrained.ResourceVersion {
		t.Errorf("a second undrain wrote the cluster: resourceVersion %s, want %s", rv, undrained.ResourceVersion)
	}

	r = kubectl(t, now, "drain", "nope")
	if want := `add the taint fleetvm.io/drain to ManagedCluster nope: ManagedCluster "nope" not found (kubectl get managedclusters lists them)`; r.err == nil || r.err.Error() != want {
		t.Errorf("drain of a missing cluster: error %v, want %q", r.err, want)
	}
}
