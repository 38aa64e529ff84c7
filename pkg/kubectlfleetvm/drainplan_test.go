package kubectlfleetvm

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/capacity"
	"github.com/fleetvm/fleetvm/pkg/controller/drain"
	"github.com/fleetvm/fleetvm/pkg/explain"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

// pvcTemplate is a VM whose disk is a PersistentVolumeClaim: data of its
// own, which a Restart move would lose.
const pvcTemplate = `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","spec":{"template":{"spec":{
"domain":{"cpu":{"cores":1},"memory":{"guest":"1Gi"},"devices":{}},
"volumes":[{"name":"data","persistentVolumeClaim":{"claimName":"db-data"}}]}}}}`

// placed is a FleetVM with a copy on each cluster given (node n1 on a,
// n2 for apps/cache), the ones marked leaving too.
func placed(ns, name string, clusters ...string) fleetv1alpha1.FleetVirtualMachine {
	fvm := utiltesting.MakeFleetVM(ns, name).Obj()
	for _, c := range clusters {
		entry := fleetv1alpha1.ClusterStatus{Cluster: c, Phase: fleetv1alpha1.ClusterPhaseRunning, Ready: true}
		if c == "b (leaving)" {
			entry.Cluster, entry.Phase, entry.LeavingSince = "b", fleetv1alpha1.ClusterPhaseLeaving, ago(time.Minute)
		}
		if c == "a" {
			entry.Node = "n1"
			if ns == "apps" {
				entry.Node = "n2"
			}
		}
		fvm.Status.Clusters = append(fvm.Status.Clusters, entry)
	}
	return *fvm
}

func verdicts(reasons map[string]explain.Reason) []explain.Verdict {
	var out []explain.Verdict
	for c, r := range reasons {
		out = append(out, explain.Verdict{Cluster: c, Reason: r})
	}
	return out
}

// TestPlanDrain: the waves keep the limits; the target is a qualifying
// cluster (the fewest FleetVMs, the copies planned before counted: api
// takes d, then c and d are equal for web), never one holding a copy (a
// leaving one too) or one draining; a VM with data of its own and one with
// nowhere to go say why.
func TestPlanDrain(t *testing.T) {
	db := placed("vms", "db", "a")
	db.Spec.Template = &runtime.RawExtension{Raw: []byte(pvcTemplate)}
	in := planInput{
		Cluster: "a",
		Limits:  drain.Limits{PerCluster: 2, PerNode: 1},
		FVMs: []fleetv1alpha1.FleetVirtualMachine{
			placed("vms", "web", "a", "b (leaving)"),
			db,
			placed("vms", "api", "a"),
			placed("apps", "cache", "a"),
			placed("vms", "filler", "c"),
		},
		Verdicts: map[types.NamespacedName][]explain.Verdict{
			{Namespace: "vms", Name: "web"}: verdicts(map[string]explain.Reason{
				"a": explain.Runs, "b": explain.NotNeeded, "c": explain.NotNeeded, "d": explain.NotNeeded, "e": explain.Taint}),
			{Namespace: "vms", Name: "db"}: verdicts(map[string]explain.Reason{"a": explain.Runs, "c": explain.NotNeeded}),
			{Namespace: "vms", Name: "api"}: verdicts(map[string]explain.Reason{
				"a": explain.Runs, "b": explain.NoRoom, "c": explain.NotNeeded, "d": explain.NotNeeded}),
			{Namespace: "apps", Name: "cache"}: verdicts(map[string]explain.Reason{
				"a": explain.Runs, "b": explain.Selector, "e": explain.NotNeeded}),
		},
		Draining: map[string]bool{"e": true},
	}
	var out bytes.Buffer
	if err := writeDrainPlan(&out, "a", in.Limits, planDrain(in)); err != nil {
		t.Fatal(err)
	}
	want := `Dry run, nothing changed. Draining a would move 4 copies in 3 waves (at most 2 at a time, 1 from one node).

WAVE  NAMESPACE  FLEETVM  NODE  METHOD   TO  REASON
1     apps       cache    n2    Restart  -   no other cluster qualifies (kubectl fleetvm explain cache -n apps)
1     vms        api      n1    Restart  d   -
2     vms        db       n1    -        -   the VM keeps data of its own that no method can move: volume data: PersistentVolumeClaim db-data is not made by the VM, so the target cannot make it
3     vms        web      n1    Restart  c   -

Summary: 4 copies, 2 with a target, 2 cannot move
`
	if diff := cmp.Diff(want, lines(out.String())); diff != "" {
		t.Errorf("output (-want,+got):\n%s", diff)
	}

	out.Reset()
	in.Cluster = "z"
	if err := writeDrainPlan(&out, "z", in.Limits, planDrain(in)); err != nil {
		t.Fatal(err)
	}
	if want := "Dry run, nothing changed: no FleetVirtualMachine has a copy on z, so draining it moves nothing.\n"; out.String() != want {
		t.Errorf("plan of an empty cluster = %q, want %q", out.String(), want)
	}
}

// TestMemoReader: explaining many FleetVMs of a namespace reads each
// binding, set, member list and score once, and each gets its own copy.
func TestMemoReader(t *testing.T) {
	set := &clusterv1beta2.ManagedClusterSet{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: clusterv1beta2.ManagedClusterSetSpec{ClusterSelector: clusterv1beta2.ManagedClusterSelector{SelectorType: clusterv1beta2.ExclusiveClusterSetLabel}}}
	binding := &clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "default"},
		Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: "default"}}
	member := func(name string) *clusterv1.ManagedCluster {
		return &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			clusterv1beta2.ClusterSetLabel: "default", "env": "prod"}}}
	}
	reads := 0
	c := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(set, binding, member("a"), member("b")).
		WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				reads++
				return c.Get(ctx, key, obj, opts...)
			},
			List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				reads++
				return c.List(ctx, list, opts...)
			},
		}).Build()
	m := newMemoReader(c)
	var got [][]explain.Cluster
	for _, name := range []string{"web", "api", "db"} {
		in, err := explain.Read(t.Context(), m, utiltesting.MakeFleetVM("vms", name).Obj(), "env")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, in.Clusters)
		if name == "api" {
			in.Clusters[0].Labels["changed"] = "by the caller"
		}
	}
	// binding, set, member list, two scores (NotFound, remembered too)
	if reads != 5 {
		t.Errorf("reads = %d, want 5: one per distinct object or list", reads)
	}
	if diff := cmp.Diff(got[0], got[2]); diff != "" {
		t.Errorf("a later read differs (-first,+third):\n%s", diff)
	}
	if _, ok := got[2][0].Labels["changed"]; ok {
		t.Error("a change to what one caller read shows in what the next one reads")
	}
	if len(got[2]) != 2 {
		t.Errorf("clusters read = %d, want 2", len(got[2]))
	}
}

// TestPlanDrainLiveOrCold: a VM whose DataVolume keeps data of its own
// moves Live when the drained cluster and its target both offer
// decentralized live migration, Cold otherwise, as the hub decides.
func TestPlanDrainLiveOrCold(t *testing.T) {
	const ownDV = `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","spec":{
		"dataVolumeTemplates":[{"metadata":{"name":"d"},"spec":{"source":{"blank":{}}}}],
		"template":{"spec":{"domain":{},"volumes":[{"name":"data","dataVolume":{"name":"d"}}]}}}}`
	for _, tc := range []struct {
		live map[string]bool
		want fleetv1alpha1.MoveMethod
	}{
		{live: map[string]bool{"a": true, "c": true}, want: fleetv1alpha1.MoveMethodLive},
		{live: map[string]bool{"a": true}, want: fleetv1alpha1.MoveMethodCold},
	} {
		db := placed("vms", "db", "a")
		db.Spec.Template = &runtime.RawExtension{Raw: []byte(ownDV)}
		rows := planDrain(planInput{
			Cluster: "a", Limits: drain.DefaultLimits, FVMs: []fleetv1alpha1.FleetVirtualMachine{db},
			Verdicts: map[types.NamespacedName][]explain.Verdict{
				{Namespace: "vms", Name: "db"}: verdicts(map[string]explain.Reason{"a": explain.Runs, "c": explain.NotNeeded}),
			},
			Live: tc.live,
		})
		if len(rows) != 1 || rows[0].Method != tc.want || rows[0].To != "c" {
			t.Errorf("live %v: %+v, want %s to c", tc.live, rows, tc.want)
		}
	}
}

// TestPlanDrainRanksAsTheHub: the likely target is the first of
// placement.Pick's ranking, as the hub picks a move's target, where the
// earlier rule (fewest copies, then by name) picked another: ties go by a
// hash of the FleetVM's key, FreeCapacity ranks by the agents' free CPU
// and memory before load, and a copy planned before counts on its target.
func TestPlanDrainRanksAsTheHub(t *testing.T) {
	freeCapacity := func(f fleetv1alpha1.FleetVirtualMachine) fleetv1alpha1.FleetVirtualMachine {
		f.Spec.Placement.Prioritizer = fleetv1alpha1.PrioritizerFreeCapacity
		return f
	}
	free := func(cpu, memory int32) map[string]int32 {
		return map[string]int32{capacity.ScoreCPUFree: cpu, capacity.ScoreMemoryFree: memory}
	}
	cases := map[string]struct {
		fvms   []fleetv1alpha1.FleetVirtualMachine
		scores map[string]map[string]int32
		// want is the target of each FleetVM on a, by name.
		want map[string]string
	}{
		// The hash of vms/web ranks c before b (fewest copies, then by
		// name: b).
		"equal loads: the hash of the key, not the name": {
			fvms: []fleetv1alpha1.FleetVirtualMachine{placed("vms", "web", "a")},
			want: map[string]string{"web": "c"},
		},
		// b holds two FleetVMs, c none (fewest copies: c), and the hash
		// of vms/web ranks c first too: only free capacity picks b.
		"FreeCapacity: most free CPU and memory first, whatever the load": {
			fvms: []fleetv1alpha1.FleetVirtualMachine{freeCapacity(placed("vms", "web", "a")),
				placed("vms", "f1", "b"), placed("vms", "f2", "b")},
			scores: map[string]map[string]int32{"b": free(30, 20), "c": free(10, 10)},
			want:   map[string]string{"web": "b"},
		},
		"FreeCapacity: equal free capacity goes by load": {
			fvms:   []fleetv1alpha1.FleetVirtualMachine{freeCapacity(placed("vms", "web", "a")), placed("vms", "f1", "c")},
			scores: map[string]map[string]int32{"b": free(10, 10), "c": free(15, 5)},
			want:   map[string]string{"web": "b"},
		},
		"FreeCapacity: a cluster without a valid score ranks last": {
			fvms:   []fleetv1alpha1.FleetVirtualMachine{freeCapacity(placed("vms", "web", "a")), placed("vms", "f1", "b")},
			scores: map[string]map[string]int32{"b": free(1, 0)},
			want:   map[string]string{"web": "b"},
		},
		"Balance: free capacity does not rank": {
			fvms:   []fleetv1alpha1.FleetVirtualMachine{placed("vms", "web", "a"), placed("vms", "f1", "b")},
			scores: map[string]map[string]int32{"b": free(90, 90), "c": free(1, 1)},
			want:   map[string]string{"web": "c"},
		},
		// api goes to b (its hash ranks b first); the hash of vms/svc
		// ranks b first too, but api's planned copy makes b the fuller.
		"a copy planned before counts on its target": {
			fvms: []fleetv1alpha1.FleetVirtualMachine{placed("vms", "api", "a"), placed("vms", "svc", "a")},
			want: map[string]string{"api": "b", "svc": "c"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := planInput{Cluster: "a", Limits: drain.DefaultLimits, FVMs: tc.fvms, Scores: tc.scores,
				Verdicts: map[types.NamespacedName][]explain.Verdict{}}
			for _, f := range tc.fvms {
				in.Verdicts[types.NamespacedName{Namespace: f.Namespace, Name: f.Name}] = verdicts(map[string]explain.Reason{
					"a": explain.Runs, "b": explain.NotNeeded, "c": explain.NotNeeded})
			}
			got := map[string]string{}
			for _, r := range planDrain(in) {
				got[r.FleetVM] = r.To
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("targets (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestDrainPlanReadsScores: drain --dry-run reads the agents' scores for
// the hub's ranking: a FreeCapacity FleetVM's likely target is the
// qualifying cluster with the most free CPU and memory (b), where the
// fewest copies, or the hash of its key alone, would say c; a cluster
// whose score expired does not qualify (d).
func TestDrainPlanReadsScores(t *testing.T) {
	set := &clusterv1beta2.ManagedClusterSet{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: clusterv1beta2.ManagedClusterSetSpec{ClusterSelector: clusterv1beta2.ManagedClusterSelector{SelectorType: clusterv1beta2.ExclusiveClusterSetLabel}}}
	binding := &clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "default"},
		Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: "default"}}
	objs := []client.Object{set, binding}
	for _, name := range []string{"a", "b", "c", "d"} {
		objs = append(objs, &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			clusterv1beta2.ClusterSetLabel: "default", "env": "prod"}}})
	}
	web := placed("vms", "web", "a")
	web.Spec.Placement.Prioritizer = fleetv1alpha1.PrioritizerFreeCapacity
	shape, ok := capacity.ShapeOf(&web)
	if !ok {
		t.Fatal("web has no shape")
	}
	score := func(cluster string, free int32, validUntil time.Time) *clusterv1alpha1.AddOnPlacementScore {
		until := metav1.NewTime(validUntil)
		return &clusterv1alpha1.AddOnPlacementScore{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: fleetv1alpha1.CapacityScoreName},
			Status: clusterv1alpha1.AddOnPlacementScoreStatus{ValidUntil: &until, Scores: []clusterv1alpha1.AddOnPlacementScoreItem{
				{Name: shape.Name(), Value: 3}, {Name: capacity.ScoreCPUFree, Value: free}, {Name: capacity.ScoreMemoryFree, Value: free}}}}
	}
	objs = append(objs, score("b", 30, now.Add(time.Hour)), score("c", 5, now.Add(time.Hour)), score("d", 90, now.Add(-time.Second)))
	filler := placed("vms", "filler", "b")
	objs = append(objs, &web, &filler)
	c := fake.NewClientBuilder().WithScheme(Scheme()).WithObjects(objs...).Build()
	var out bytes.Buffer
	o := &options{client: c, out: &out, now: func() time.Time { return now }}
	if err := o.drainPlan(t.Context(), "a", &drainOptions{limits: drain.DefaultLimits, envLabel: "env"}); err != nil {
		t.Fatal(err)
	}
	want := `Dry run, nothing changed. Draining a would move 1 copy in 1 wave (at most 5 at a time, 2 from one node).

WAVE  NAMESPACE  FLEETVM  NODE  METHOD   TO  REASON
1     vms        web      n1    Restart  b   -

Summary: 1 copy, 1 with a target, 0 cannot move
`
	if diff := cmp.Diff(want, lines(out.String())); diff != "" {
		t.Errorf("plan (-want,+got):\n%s", diff)
	}
}
