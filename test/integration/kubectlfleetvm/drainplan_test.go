package kubectlfleetvm

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/capacity"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

// publishFit writes the fleetvm-capacity score of a cluster as its agent
// would, saying n VMs of fvm's shape fit there.
func publishFit(t *testing.T, cluster string, fvm *fleetv1alpha1.FleetVirtualMachine, n int32) {
	t.Helper()
	shape, ok := capacity.ShapeOf(fvm)
	if !ok {
		t.Fatalf("%s/%s has no shape", fvm.Namespace, fvm.Name)
	}
	score := &clusterv1alpha1.AddOnPlacementScore{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: fleetv1alpha1.CapacityScoreName}}
	if err := fleet.Hub.Client.Get(t.Context(), client.ObjectKeyFromObject(score), score); err != nil {
		create(t, score)
	}
	score.Status.Scores = append(score.Status.Scores, clusterv1alpha1.AddOnPlacementScoreItem{Name: shape.Name(), Value: n})
	valid := metav1.NewTime(time.Now().Add(time.Hour))
	score.Status.ValidUntil = &valid
	if err := fleet.Hub.Client.Status().Update(t.Context(), score); err != nil {
		t.Fatal(err)
	}
}

// TestDrainDryRun: the plan names, for each copy on the cluster, its wave,
// its method and the qualifying cluster the hub's pick ranks first (not
// one draining, not one holding a copy already), or why it cannot move;
// and nothing is written. plan-c and plan-e hold no copy: the hash of
// api's key ranks plan-e first (fewest copies, then by name, said
// plan-c), and web, whose hash ranks plan-e first too, goes to plan-c
// because api's copy planned before counts on plan-e.
func TestDrainDryRun(t *testing.T) {
	registerClusters(t, "plan", "plan-a", "plan-b", "plan-c", "plan-d", "plan-e")
	ns := namespace(t, "drain-plan")
	if err := fleet.Hub.Tenant(t.Context(), ns, "plan"); err != nil {
		t.Fatal(err)
	}
	// plan-d is draining too: no copy goes there.
	setTaints(t, "plan-d", clusterv1.Taint{Key: fleetv1alpha1.DrainTaintKey, Effect: clusterv1.TaintEffectNoSelectIfNew, TimeAdded: metav1.Now()})
	mk := func(name string) *fleetv1alpha1.FleetVirtualMachine {
		return utiltesting.MakeFleetVM(ns, name).ClusterSets("plan").Clusters(1).VM(2, "4Gi").ContainerDisk("quay.io/containerdisks/fedora:41").Obj()
	}
	db := mk("db")
	db.Spec.Template = &runtime.RawExtension{Raw: []byte(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","spec":{"template":{"spec":{
"domain":{"cpu":{"cores":2},"memory":{"guest":"4Gi"},"devices":{}},
"volumes":[{"name":"data","persistentVolumeClaim":{"claimName":"db-data"}}]}}}}`)}
	// lonely fits nowhere else: no cluster scores its shape.
	lonely := utiltesting.MakeFleetVM(ns, "lonely").ClusterSets("plan").Clusters(1).VM(16, "64Gi").Obj()
	for _, f := range []*fleetv1alpha1.FleetVirtualMachine{mk("web"), mk("api"), db, lonely} {
		create(t, f)
	}
	for _, c := range []string{"plan-b", "plan-c", "plan-d", "plan-e"} {
		publishFit(t, c, mk("web"), 3)
	}
	placeOn(t, ns, "web", copyOn("plan-a", "node-1"), copyOn("plan-b", "node-2"))
	placeOn(t, ns, "api", copyOn("plan-a", "node-1"))
	placeOn(t, ns, "db", copyOn("plan-a", "node-2"))
	placeOn(t, ns, "lonely", copyOn("plan-a", "node-1"))

	versions := func() map[string]string {
		out := map[string]string{"ManagedCluster plan-a": cluster(t, "plan-a").ResourceVersion}
		for _, name := range []string{"web", "api", "db", "lonely"} {
			out["FleetVirtualMachine "+name] = get(t, ns, name).ResourceVersion
		}
		moves := &fleetv1alpha1.FleetVirtualMachineMoveList{}
		if err := fleet.Hub.Client.List(t.Context(), moves); err != nil {
			t.Fatal(err)
		}
		for _, m := range moves.Items {
			out["FleetVirtualMachineMove "+m.Namespace+"/"+m.Name] = m.ResourceVersion
		}
		return out
	}
	before := versions()

	// As a user who may read but not write: a write would be refused.
	grantCluster(t, "planner", readDrain)
	r := kubectl(t, time.Time{}, "drain", "plan-a", "--dry-run", "--per-node", "1", "--as", "planner")
	if r.err != nil {
		t.Fatalf("drain --dry-run: %v\n%s", r.err, r.errOut)
	}
	want := `Dry run, nothing changed. Draining plan-a would move 4 copies in 3 waves (at most 5 at a time, 1 from one node).

WAVE  NAMESPACE   FLEETVM  NODE    METHOD   TO      REASON
1     drain-plan  api      node-1  Restart  plan-e  -
1     drain-plan  db       node-2  -        -       the VM keeps data of its own that no method can move: volume data: PersistentVolumeClaim db-data is not made by the VM, so the target cannot make it
2     drain-plan  lonely   node-1  Restart  -       no other cluster qualifies (kubectl fleetvm explain lonely -n drain-plan)
3     drain-plan  web      node-1  Restart  plan-c  -

Summary: 4 copies, 2 with a target, 2 cannot move
`
	if diff := cmp.Diff(want, lines(r.out)); diff != "" {
		t.Errorf("plan (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(before, versions()); diff != "" {
		t.Errorf("a dry run wrote (-before,+after):\n%s", diff)
	}

	r = kubectl(t, time.Time{}, "drain", "nope", "--dry-run")
	if want := `ManagedCluster "nope" not found (kubectl get managedclusters lists them)`; r.err == nil || r.err.Error() != want {
		t.Errorf("dry run of a missing cluster: error %v, want %q", r.err, want)
	}
}
