package safety

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/capacity"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/delivery"
	"github.com/fleetvm/fleetvm/pkg/vmclaim"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

// A VM of bigCores and bigMemory fills a cluster: no second one fits on its 16-CPU node.
const bigCores, bigMemory = 12, "16Gi"

// fitsOf reads how many VMs of the shape the cluster's agent says fit.
func fitsOf(t *testing.T, cluster string, cores int, memory string) (int32, bool) {
	t.Helper()
	shape := capacity.Shape{CPU: resource.MustParse(fmt.Sprint(cores)), Memory: resource.MustParse(memory)}
	var score clusterv1alpha1.AddOnPlacementScore
	if err := fleet.Hub.Client.Get(t.Context(), client.ObjectKey{Namespace: cluster, Name: fleetv1alpha1.CapacityScoreName}, &score); err != nil {
		return 0, false
	}
	for _, s := range score.Status.Scores {
		if s.Name == shape.Name() {
			return s.Value, true
		}
	}
	return 0, false
}

// TestShortFlapAfterFitFellToZero: the VM's own usage leaves its cluster no
// room for its shape (fit score 0, so the scheduler would not pick it
// again). The cluster's env label is removed and restored, once faster
// than the hub reacts and once after the hub shows it leaving; then ten
// grace periods pass. The VM stays where it is, and nothing is deleted.
func TestShortFlapAfterFitFellToZero(t *testing.T) {
	const ns = "flap"
	mark := vms.mark()
	fvm := utiltesting.MakeFleetVM(ns, "web").Clusters(1).VM(bigCores, bigMemory).DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
	create(t, fvm)
	key := client.ObjectKeyFromObject(fvm)
	got := waitFVM(t, key, "running on one cluster", running(1))
	on := names(got)[0]
	if err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		n, ok := fitsOf(t, on, bigCores, bigMemory)
		return ok && n == 0, nil
	}); err != nil {
		t.Fatalf("%s's agent never scored 0 for the VM's shape: %v", on, err)
	}

	// A flap faster than the hub.
	setLabel(t, on, "env", "")
	setLabel(t, on, "env", "prod")
	settle(t, key)
	// A flap the hub saw.
	setLabel(t, on, "env", "")
	waitFVM(t, key, on+" leaving", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return clustersOf(f)[on] == fleetv1alpha1.ClusterPhaseLeaving
	})
	setLabel(t, on, "env", "prod")
	waitFVM(t, key, on+" placed again", running(1))

	passGrace(t, 10, key)
	got = waitFVM(t, key, "still running on "+on, running(1))
	if n := names(got); !slices.Equal(n, []string{on}) {
		t.Errorf("placed on %v after the flaps, want [%s]", n, on)
	}
	if !vmOn(t, on, types.NamespacedName{Namespace: ns, Name: "web"}) {
		t.Errorf("the VM is gone from %s", on)
	}
	expectDeletions(t, mark, ns)
}

// TestLostCluster: a cluster goes unavailable (lease lost, OCM's
// unavailable taint), later unreachable (unreachable taint), each for ten
// grace periods. Its copy stays, shown Unknown; a FleetVM asking for one
// cluster is not moved, one asking for every cluster is not shrunk; when
// the cluster comes back, it runs there again. Nothing is deleted.
func TestLostCluster(t *testing.T) {
	const ns = "lost"
	mark := vms.mark()
	one := utiltesting.MakeFleetVM(ns, "one").Clusters(1).VM(1, "1Gi").DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
	every := utiltesting.MakeFleetVM(ns, "every").VM(1, "1Gi").DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
	create(t, one)
	create(t, every)
	keyOne, keyEvery := client.ObjectKeyFromObject(one), client.ObjectKeyFromObject(every)
	got := waitFVM(t, keyOne, "one running", running(1))
	waitFVM(t, keyEvery, "every running on 3", running(3))
	lost := names(got)[0]

	for _, status := range []metav1.ConditionStatus{metav1.ConditionFalse, metav1.ConditionUnknown} {
		if err := fleetenv.SetClusterAvailable(t.Context(), fleet.Hub.Client, lost, status); err != nil {
			t.Fatal(err)
		}
		for _, k := range []client.ObjectKey{keyOne, keyEvery} {
			waitFVM(t, k, lost+" Unknown", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
				return clustersOf(f)[lost] == fleetv1alpha1.ClusterPhaseUnknown
			})
		}
		passGrace(t, 10, keyOne, keyEvery)
		got = settle(t, keyOne)
		if p := clustersOf(got); len(p) != 1 || p[lost] != fleetv1alpha1.ClusterPhaseUnknown {
			t.Errorf("available=%s for ten grace periods: one is on %v, want only %s (Unknown, not replaced)", status, p, lost)
		}
		if p := clustersOf(settle(t, keyEvery)); len(p) != 3 || p[lost] != fleetv1alpha1.ClusterPhaseUnknown {
			t.Errorf("available=%s for ten grace periods: every is on %v, want 3 with %s Unknown", status, p, lost)
		}
		if err := fleetenv.SetClusterAvailable(t.Context(), fleet.Hub.Client, lost, metav1.ConditionTrue); err != nil {
			t.Fatal(err)
		}
		waitFVM(t, keyOne, "one running again on "+lost, running(1))
		waitFVM(t, keyEvery, "every running again on 3", running(3))
	}
	expectDeletions(t, mark, ns)
}

// TestAgentStoppedScoreExpires: a cluster's agent stops; its capacity
// score's validUntil passes and the scheduler is made to look again; ten
// grace periods pass. The VM stays.
func TestAgentStoppedScoreExpires(t *testing.T) {
	const ns = "agent"
	mark := vms.mark()
	fvm := utiltesting.MakeFleetVM(ns, "db").Clusters(1).VM(2, "2Gi").DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
	create(t, fvm)
	key := client.ObjectKeyFromObject(fvm)
	on := names(waitFVM(t, key, "running", running(1)))[0]

	fleetVM.StopAgent(on)
	t.Cleanup(func() {
		if err := fleetVM.StartAgent(on); err != nil {
			t.Error(err)
		}
	})
	var score clusterv1alpha1.AddOnPlacementScore
	if err := fleet.Hub.Client.Get(t.Context(), client.ObjectKey{Namespace: on, Name: fleetv1alpha1.CapacityScoreName}, &score); err != nil {
		t.Fatal(err)
	}
	// The agents' clock is the hub's: ten grace periods take it past
	// validUntil, which no stopped agent renews.
	validUntil := score.Status.ValidUntil.Time
	// A passed validUntil requeues nothing in the scheduler: a label
	// change on the cluster makes it look at its Placements again.
	setLabel(t, on, "touched", "yes")
	t.Cleanup(func() { setLabel(t, on, "touched", "") })
	passGrace(t, 10, key)
	if !clock.Now().After(validUntil) {
		t.Fatalf("the stopped agent's score is still valid (validUntil %s, now %s)", validUntil, clock.Now())
	}
	got := settle(t, key)
	if n := names(got); !slices.Equal(n, []string{on}) {
		t.Errorf("after the score expired and ten grace periods: on %v, want [%s]", n, on)
	}
	if !vmOn(t, on, types.NamespacedName{Namespace: ns, Name: "db"}) {
		t.Errorf("the VM is gone from %s", on)
	}
	expectDeletions(t, mark, ns)
}

// TestSchedulerRestarted: the OCM placement scheduler restarts (empty
// caches, every Placement scheduled again) while VMs run; ten grace
// periods pass. Nothing moves, nothing is deleted.
func TestSchedulerRestarted(t *testing.T) {
	const ns = "scheduler"
	mark := vms.mark()
	big := utiltesting.MakeFleetVM(ns, "big").Clusters(1).VM(bigCores, bigMemory).DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
	small := utiltesting.MakeFleetVM(ns, "small").Clusters(2).VM(1, "1Gi").DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
	create(t, big)
	create(t, small)
	keyBig, keySmall := client.ObjectKeyFromObject(big), client.ObjectKeyFromObject(small)
	wantBig := names(waitFVM(t, keyBig, "big running", running(1)))
	wantSmall := names(waitFVM(t, keySmall, "small running", running(2)))

	if err := fleet.RestartPlacementController(); err != nil {
		t.Fatal(err)
	}
	passGrace(t, 10, keyBig, keySmall)
	if got := names(waitFVM(t, keyBig, "big running", running(1))); !slices.Equal(got, wantBig) {
		t.Errorf("big on %v after the scheduler restarted, want %v", got, wantBig)
	}
	if got := names(waitFVM(t, keySmall, "small running", running(2))); !slices.Equal(got, wantSmall) {
		t.Errorf("small on %v after the scheduler restarted, want %v", got, wantSmall)
	}
	expectDeletions(t, mark, ns)
}

// TestHubObjectsDeletedByHand: the FleetVM's Placement, its ApplicationSet,
// the shared GitOpsCluster and an Argo CD cluster secret are each deleted
// by hand; each time, two grace periods pass. The hub's objects come back,
// the VMs stay, nothing is deleted.
func TestHubObjectsDeletedByHand(t *testing.T) {
	const ns = "byhand"
	mark := vms.mark()
	fvm := utiltesting.MakeFleetVM(ns, "app").Clusters(2).VM(1, "1Gi").DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
	create(t, fvm)
	key := client.ObjectKeyFromObject(fvm)
	want := names(waitFVM(t, key, "running on 2", running(2)))
	name := delivery.ChildName(key)
	placement := placementOf(t, key)
	gitOps := &unstructured.Unstructured{}
	gitOps.SetGroupVersionKind(schema.GroupVersionKind{Group: "apps.open-cluster-management.io", Version: "v1beta1", Kind: "GitOpsCluster"})

	for what, obj := range map[string]client.Object{
		"Placement":      &clusterv1beta1.Placement{},
		"ApplicationSet": &argov1alpha1.ApplicationSet{},
		"GitOpsCluster":  gitOps,
	} {
		objName := name
		switch what {
		case "GitOpsCluster":
			objName = "fleetvm-default"
		case "Placement":
			objName = placement
		}
		t.Run(what, func(t *testing.T) {
			objKey := client.ObjectKey{Namespace: argoNS, Name: objName}
			if err := fleet.Hub.Client.Get(t.Context(), objKey, obj); err != nil {
				t.Fatal(err)
			}
			uid := obj.GetUID()
			if err := fleet.Hub.Client.Delete(t.Context(), obj); err != nil {
				t.Fatal(err)
			}
			passGrace(t, 2, key)
			err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
				err := fleet.Hub.Client.Get(t.Context(), objKey, obj)
				return err == nil && obj.GetUID() != uid && obj.GetDeletionTimestamp() == nil, client.IgnoreNotFound(err)
			})
			if err != nil {
				t.Errorf("%s not recreated: %v", what, err)
			}
			if got := names(waitFVM(t, key, "running on the same 2", running(2))); !slices.Equal(got, want) {
				t.Errorf("after the %s was deleted: on %v, want %v", what, got, want)
			}
		})
	}

	t.Run("Argo CD cluster secret", func(t *testing.T) {
		gone := want[0]
		secret := &corev1.Secret{}
		if err := fleet.Hub.Client.Get(t.Context(), client.ObjectKey{Namespace: argoNS, Name: gone + "-cluster-secret"}, secret); err != nil {
			t.Fatal(err)
		}
		if err := fleet.Hub.Client.Delete(t.Context(), secret); err != nil {
			t.Fatal(err)
		}
		restore := func() {
			if err := fleetVM.ClusterSecret(context.Background(), gone); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(restore)
		// Argo CD reports the Application invalid; the status says so.
		waitFVM(t, key, "Argo CD's error in Delivered", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
			c := meta.FindStatusCondition(f.Status.Conditions, fleetv1alpha1.ConditionDelivered)
			return c != nil && c.Reason == fleetv1alpha1.ReasonDeliveryFailed && strings.Contains(c.Message, "no clusters with this name")
		})
		passGrace(t, 2, key)
		if got := names(settle(t, key)); !slices.Equal(got, want) {
			t.Errorf("without %s's cluster secret: on %v, want %v", gone, got, want)
		}
		restore()
		waitFVM(t, key, "delivered again", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
			return meta.IsStatusConditionTrue(f.Status.Conditions, fleetv1alpha1.ConditionDelivered) && running(2)(f)
		})
	})
	expectDeletions(t, mark, ns)
}

// TestRemovalWithoutClusterSecret: a cluster leaves by intent while Argo CD
// has no cluster secret for it. Argo CD would drop its finalizer and leave
// the VM, so FleetVM does not delete the Application, and says why; once
// the secret is back, the VM is removed, exactly that one.
func TestRemovalWithoutClusterSecret(t *testing.T) {
	const ns = "nosecret"
	mark := vms.mark()
	fvm := utiltesting.MakeFleetVM(ns, "svc").Clusters(2).VM(1, "1Gi").DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
	create(t, fvm)
	key := client.ObjectKeyFromObject(fvm)
	leaving := names(waitFVM(t, key, "running on 2", running(2)))[0]
	secret := &corev1.Secret{}
	if err := fleet.Hub.Client.Get(t.Context(), client.ObjectKey{Namespace: argoNS, Name: leaving + "-cluster-secret"}, secret); err != nil {
		t.Fatal(err)
	}
	if err := fleet.Hub.Client.Delete(t.Context(), secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := fleetVM.ClusterSecret(context.Background(), leaving); err != nil {
			t.Error(err)
		}
	})
	// Argo CD has noticed: the Application is invalid.
	err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		app := applications(t, key)[leaving]
		return len(app.Status.Conditions) > 0 && app.Status.Conditions[0].Type == argov1alpha1.ApplicationConditionInvalidSpecError, nil
	})
	if err != nil {
		t.Fatalf("Application of %s never invalid: %v", leaving, err)
	}
	// Two copies fewer asked for: one must leave; it is the invalid one
	// only if the scheduler prefers the other, so take the cluster out by
	// its label instead.
	setLabel(t, leaving, "env", "staging")
	t.Cleanup(func() { setLabel(t, leaving, "env", "prod") })
	waitFVM(t, key, leaving+" leaving", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return clustersOf(f)[leaving] == fleetv1alpha1.ClusterPhaseLeaving
	})
	passGrace(t, 2, key)
	got := settle(t, key)
	if clustersOf(got)[leaving] != fleetv1alpha1.ClusterPhaseLeaving {
		t.Errorf("%s is %s, want Leaving (its removal waits for Argo CD)", leaving, clustersOf(got)[leaving])
	}
	c := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionDegraded)
	if c == nil || c.Reason != fleetv1alpha1.ReasonRemovalUnconfirmed {
		t.Errorf("Degraded = %+v, want reason %s", c, fleetv1alpha1.ReasonRemovalUnconfirmed)
	}
	for _, e := range got.Status.Clusters {
		if e.Cluster == leaving && !strings.Contains(e.Message, "no clusters with this name") {
			t.Errorf("%s's message does not say why the VM is not removed: %q", leaving, e.Message)
		}
	}
	if app, ok := applications(t, key)[leaving]; !ok || app.DeletionTimestamp != nil {
		t.Errorf("the Application of %s was deleted while Argo CD could not remove its VM", leaving)
	}
	expectDeletions(t, mark, ns)

	// The secret is back: the removal goes ahead, confirmed by the agent.
	if err := fleetVM.ClusterSecret(t.Context(), leaving); err != nil {
		t.Fatal(err)
	}
	waitFVM(t, key, leaving+" removed", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		_, listed := clustersOf(f)[leaving]
		return !listed
	})
	expectDeletions(t, mark, ns, deletion{Cluster: leaving, VM: types.NamespacedName{Namespace: ns, Name: "svc"}})
}

// TestCollidingNames: team-a/x and team/a-x (one name once joined with a
// dash) and random pairs that collide the same way each get their own
// Placement and ApplicationSet; deleting one removes exactly its own VM.
func TestCollidingNames(t *testing.T) {
	mark := vms.mark()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	a, b := randomCollidingPair(rng)
	pairs := [][2]types.NamespacedName{
		{{Namespace: "team-a", Name: "x"}, {Namespace: "team", Name: "a-x"}},
		{a, b},
	}
	t.Logf("random pair: %s and %s", a, b)
	for _, pair := range pairs {
		for _, k := range pair {
			create(t, utiltesting.MakeFleetVM(k.Namespace, k.Name).Clusters(1).VM(1, "1Gi").DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj())
		}
		first, second := pair[0], pair[1]
		waitFVM(t, first, first.String()+" running", running(1))
		waitFVM(t, second, second.String()+" running", running(1))
		p1, p2 := &clusterv1beta1.Placement{}, &clusterv1beta1.Placement{}
		if err := fleet.Hub.Client.Get(t.Context(), client.ObjectKey{Namespace: argoNS, Name: placementOf(t, first)}, p1); err != nil {
			t.Fatal(err)
		}
		if err := fleet.Hub.Client.Get(t.Context(), client.ObjectKey{Namespace: argoNS, Name: placementOf(t, second)}, p2); err != nil {
			t.Fatal(err)
		}
		// A candidate Placement is shared on purpose (the same intent),
		// and must outlive the second one's deletion.
		if p1.UID != p2.UID {
			t.Fatalf("%s and %s: Placements %s and %s, want one shared candidate Placement", first, second, p1.Name, p2.Name)
		}
		on := names(waitFVM(t, first, "running", running(1)))[0]

		secondOn := names(waitFVM(t, second, "running", running(1)))[0]
		before := vms.mark()
		remove(t, second)
		expectDeletions(t, before, second.Namespace, deletion{Cluster: secondOn, VM: second})
		passGrace(t, 2, first)
		if got := names(waitFVM(t, first, first.String()+" still running", running(1))); !slices.Equal(got, []string{on}) {
			t.Errorf("%s on %v after %s was deleted, want [%s]", first, got, second, on)
		}
		if err := fleet.Hub.Client.Get(t.Context(), client.ObjectKeyFromObject(p1), p1); err != nil {
			t.Errorf("%s's Placement: %v", first, err)
		}
		expectDeletions(t, mark, first.Namespace)
	}
}

// randomCollidingPair returns two FleetVM keys that the old naming
// ("<namespace>-<name>") joined into one: ns1/n1 and ns2/n2 with
// ns1-n1 == ns2-n2.
func randomCollidingPair(rng *rand.Rand) (types.NamespacedName, types.NamespacedName) {
	word := func() string {
		const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
		b := make([]byte, 2+rng.IntN(6))
		for i := range b {
			b[i] = letters[rng.IntN(26)] // begin with a letter
			if i > 0 {
				b[i] = letters[rng.IntN(len(letters))]
			}
		}
		return string(b)
	}
	p, q, r := word(), word(), word()
	return types.NamespacedName{Namespace: "c-" + p + "-" + q, Name: r}, types.NamespacedName{Namespace: "c-" + p, Name: q + "-" + r}
}

// TestOneFleetVMPerVM: a second FleetVM for a VM (name and namespace)
// another one delivers is refused at admission, naming it. Two that race
// past admission (the webhook is off for a moment): exactly one delivers,
// the other reports Conflict and delivers nothing; deleting the loser
// deletes no VM.
func TestOneFleetVMPerVM(t *testing.T) {
	const ns = "claims"
	mark := vms.mark()
	// The first one's VM is of its name, which the index by VM leaves
	// out: its claim is read by name.
	first := utiltesting.MakeFleetVM(ns, "shared").Clusters(1).VM(1, "1Gi").DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
	create(t, first)
	waitFVM(t, client.ObjectKeyFromObject(first), "first running", running(1))
	second := utiltesting.MakeFleetVM(ns, "second").Clusters(1).VM(1, "1Gi").VMName("shared").DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
	err := fleet.Hub.Client.Create(t.Context(), second)
	if err == nil || !strings.Contains(err.Error(), "already delivered by FleetVirtualMachine claims/shared") {
		t.Fatalf("second FleetVM for VM claims/shared: %v, want refused naming claims/shared", err)
	}
	remove(t, client.ObjectKeyFromObject(first))

	// The race: the webhook is away while two FleetVMs for one VM are
	// created at once.
	var vwc admissionregistrationv1.ValidatingWebhookConfigurationList
	if err := fleet.Hub.Client.List(t.Context(), &vwc); err != nil {
		t.Fatal(err)
	}
	for i := range vwc.Items {
		saved := vwc.Items[i].DeepCopy()
		if err := fleet.Hub.Client.Delete(t.Context(), &vwc.Items[i]); err != nil {
			t.Fatal(err)
		}
		saved.ResourceVersion, saved.UID = "", ""
		defer func() {
			if err := fleet.Hub.Client.Create(context.Background(), saved); err != nil {
				t.Error(err)
			}
		}()
	}
	racers := []*fleetv1alpha1.FleetVirtualMachine{
		utiltesting.MakeFleetVM(ns, "racer-1").Clusters(1).VM(1, "1Gi").VMName("raced").DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj(),
		utiltesting.MakeFleetVM(ns, "racer-2").Clusters(1).VM(1, "1Gi").VMName("raced").DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj(),
	}
	var wg sync.WaitGroup
	errs := make([]error, len(racers))
	for i, r := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fleet.Hub.Client.Create(context.Background(), r)
		}()
	}
	wg.Wait()
	for i, r := range racers {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		key := client.ObjectKeyFromObject(r)
		t.Cleanup(func() { remove(t, key) })
	}
	claimants := make([]fleetv1alpha1.FleetVirtualMachine, len(racers))
	for i, r := range racers {
		if err := fleet.Hub.Client.Get(t.Context(), client.ObjectKeyFromObject(r), &claimants[i]); err != nil {
			t.Fatal(err)
		}
	}
	winner := vmclaim.Winner(claimants)
	loser := &claimants[0]
	if loser.UID == winner.UID {
		loser = &claimants[1]
	}
	waitFVM(t, client.ObjectKeyFromObject(winner), "winner running", running(1))
	waitFVM(t, client.ObjectKeyFromObject(loser), "loser in conflict", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		c := meta.FindStatusCondition(f.Status.Conditions, fleetv1alpha1.ConditionDelivered)
		return c != nil && c.Reason == fleetv1alpha1.ReasonConflict && strings.Contains(c.Message, winner.Name) && len(f.Status.Clusters) == 0
	})
	err = fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		return len(applications(t, client.ObjectKeyFromObject(loser))) == 0, nil
	})
	if err != nil {
		t.Errorf("the loser still has Applications: %v", err)
	}
	before := vms.mark()
	remove(t, client.ObjectKeyFromObject(loser))
	passGrace(t, 2, client.ObjectKeyFromObject(winner))
	waitFVM(t, client.ObjectKeyFromObject(winner), "winner still running", running(1))
	expectDeletions(t, before, ns)
	// The first FleetVM's own deletion removed its VM; nothing else went.
	got := vms.since(mark, ns)
	if len(got) != 1 || got[0].VM.Name != "shared" {
		t.Errorf("VM deletions: %+v, want only claims/shared (the first one was deleted)", got)
	}
}

// TestIntendedRemovals: what the user asks for still happens, exactly. A
// cluster whose label no longer matches for longer than the grace period
// loses its copy (and only after the grace period); spec.placement.clusters
// lowered from 3 to 2 removes exactly one copy.
func TestIntendedRemovals(t *testing.T) {
	const ns = "intended"
	t.Run("label changed past the grace period", func(t *testing.T) {
		mark := vms.mark()
		fvm := utiltesting.MakeFleetVM(ns, "label").VM(1, "1Gi").DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
		create(t, fvm)
		key := client.ObjectKeyFromObject(fvm)
		waitFVM(t, key, "running on 3", running(3))
		out := spokes[rand.IntN(len(spokes))]
		setLabel(t, out, "env", "staging")
		t.Cleanup(func() { setLabel(t, out, "env", "prod") })
		waitFVM(t, key, out+" leaving", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
			return clustersOf(f)[out] == fleetv1alpha1.ClusterPhaseLeaving
		})
		// One second short of the grace period: still there.
		clock.Step(grace - time.Second)
		if clustersOf(settle(t, key))[out] != fleetv1alpha1.ClusterPhaseLeaving {
			t.Errorf("%s not leaving one second before the grace period ends", out)
		}
		expectDeletions(t, mark, ns)
		clock.Step(2 * time.Second)
		waitFVM(t, key, out+" removed", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
			_, listed := clustersOf(f)[out]
			return !listed && running(2)(f)
		})
		expectDeletions(t, mark, ns, deletion{Cluster: out, VM: key})
	})

	t.Run("clusters lowered from 3 to 2", func(t *testing.T) {
		mark := vms.mark()
		fvm := utiltesting.MakeFleetVM(ns, "count").Clusters(3).VM(1, "1Gi").DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
		create(t, fvm)
		key := client.ObjectKeyFromObject(fvm)
		before := names(waitFVM(t, key, "running on 3", running(3)))
		got := &fleetv1alpha1.FleetVirtualMachine{}
		if err := fleet.Hub.Client.Get(t.Context(), key, got); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(got.DeepCopy())
		got.Spec.Placement.Clusters = ptr.To(int32(2))
		if err := fleet.Hub.Client.Patch(t.Context(), got, patch); err != nil {
			t.Fatal(err)
		}
		leaving := ""
		waitFVM(t, key, "one leaving", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
			for c, p := range clustersOf(f) {
				if p == fleetv1alpha1.ClusterPhaseLeaving {
					leaving = c
				}
			}
			return leaving != ""
		})
		passGrace(t, 1, key)
		after := names(waitFVM(t, key, "running on 2", running(2)))
		if len(after) != 2 || slices.Contains(after, leaving) || !slices.Contains(before, after[0]) || !slices.Contains(before, after[1]) {
			t.Errorf("placed on %v after lowering to 2 (was %v, %s leaving)", after, before, leaving)
		}
		expectDeletions(t, mark, ns, deletion{Cluster: leaving, VM: key})
	})
}
