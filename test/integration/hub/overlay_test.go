package hub

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/test/fleetenv"
)

// TestOverlaySwitchesAfterGracePeriod: a git source's cluster that is
// relabelled keeps its overlay (the ApplicationSet element's environment,
// and the Application's path Argo CD renders from it) until the new label
// has held for the grace period; then the hub wakes on its own and
// switches it. fleetvm-hub runs on a fake clock for this test, so nothing
// but the clock ends the grace period.
func TestOverlaySwitchesAfterGracePeriod(t *testing.T) {
	ctx := t.Context()
	// A cluster of its own: only this test's FleetVM selects it, and its
	// relabelling moves no other test's VM.
	const cluster = "overlay-a"
	labels := map[string]string{"env": "blue", "overlay-test": "yes"}
	if err := fleet.RegisterManagedCluster(ctx, fleetenv.ManagedCluster{Name: cluster, Labels: labels}); err != nil {
		t.Fatal(err)
	}
	if err := argo.ClusterSecret(ctx, cluster, labels); err != nil {
		t.Fatal(err)
	}

	clk := onFakeClock(t)

	fvm := &fleetv1alpha1.FleetVirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "overlay", Name: "web"},
		Spec: fleetv1alpha1.FleetVirtualMachineSpec{
			Source: &fleetv1alpha1.GitSource{RepoURL: "https://git.fleet.invalid/vms.git", Path: "web/overlays/{{environment}}", TargetRevision: "main"},
			Placement: fleetv1alpha1.FleetPlacement{ClusterSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"overlay-test": "yes"},
			}},
			RunStrategy:    fleetv1alpha1.RunStrategyAlways,
			DeletionPolicy: fleetv1alpha1.DeletionPolicyOrphan,
		},
	}
	createFVM(t, fvm)
	key := client.ObjectKeyFromObject(fvm)
	entry := func(f *fleetv1alpha1.FleetVirtualMachine) fleetv1alpha1.ClusterStatus {
		for _, c := range f.Status.Clusters {
			if c.Cluster == cluster {
				return c
			}
		}
		return fleetv1alpha1.ClusterStatus{}
	}
	// element is the environment the ApplicationSet delivers to the
	// cluster, and path the Application's path Argo CD's own
	// ApplicationSet code renders from it.
	element := func() (env, path string) {
		t.Helper()
		var appSet argov1alpha1.ApplicationSet
		if err := fleet.Hub.Client.Get(ctx, appSetKey(fvm), &appSet); err != nil {
			t.Fatal(err)
		}
		for _, g := range appSet.Spec.Generators {
			for _, e := range g.List.Elements {
				var el struct{ Name, Environment string }
				if err := json.Unmarshal(e.Raw, &el); err != nil {
					t.Fatal(err)
				}
				if el.Name == cluster {
					env = el.Environment
				}
			}
		}
		apps, err := argo.Sync(ctx, appSetKey(fvm))
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range apps {
			if a.Spec.Destination.Name == cluster && a.Spec.Source != nil {
				path = a.Spec.Source.Path
			}
		}
		return env, path
	}
	expect := func(what, env string) {
		t.Helper()
		if gotEnv, gotPath := element(); gotEnv != env || gotPath != "web/overlays/"+env {
			t.Fatalf("%s: ApplicationSet element environment %q, Application path %q; want %q, web/overlays/%s", what, gotEnv, gotPath, env, env)
		}
	}
	waitSwitched := func(what, env string) {
		t.Helper()
		err := fleetenv.Eventually(ctx, wait, func() (bool, error) {
			var appSet argov1alpha1.ApplicationSet
			if err := fleet.Hub.Client.Get(ctx, appSetKey(fvm), &appSet); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			for _, g := range appSet.Spec.Generators {
				for _, e := range g.List.Elements {
					var el struct{ Name, Environment string }
					if json.Unmarshal(e.Raw, &el) == nil && el.Name == cluster && el.Environment == env {
						return true, nil
					}
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("%s: the ApplicationSet does not deliver environment %s to %s: %v", what, env, cluster, err)
		}
		expect(what, env)
	}
	// settle has the hub reconcile at the clock's current time, twice: a
	// harmless spec change (Argo CD's selfHeal toggled) bumps the
	// generation, and observedGeneration reaching it proves a reconcile
	// ran after it. The second proves the first one's ApplicationSet
	// write is done too (one FleetVM's reconciles never overlap).
	settle := func() {
		t.Helper()
		for range 2 {
			f := &fleetv1alpha1.FleetVirtualMachine{}
			if err := fleet.Hub.Client.Get(ctx, key, f); err != nil {
				t.Fatal(err)
			}
			patch := client.MergeFrom(f.DeepCopy())
			f.Spec.Delivery.SelfHeal = ptr.To(f.Spec.Delivery.SelfHeal != nil && !*f.Spec.Delivery.SelfHeal)
			if err := fleet.Hub.Client.Patch(ctx, f, patch); err != nil {
				t.Fatal(err)
			}
			gen := f.Generation
			waitFor(t, key, fmt.Sprintf("the hub reconciled generation %d", gen), func(f *fleetv1alpha1.FleetVirtualMachine) bool {
				return f.Status.ObservedGeneration >= gen
			})
		}
	}
	setEnv := func(env string) {
		t.Helper()
		mc := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: cluster}}
		raw := fmt.Sprintf(`{"metadata":{"labels":{"env":%q}}}`, env)
		if err := fleet.Hub.Client.Patch(ctx, mc, client.RawPatch(types.MergePatchType, []byte(raw))); err != nil {
			t.Fatal(err)
		}
	}

	waitFor(t, key, "delivered to "+cluster+" for blue", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		e := entry(f)
		return e.Environment == "blue" && e.PendingEnvironmentSince == nil
	})
	waitSwitched("placed", "blue")

	// Relabelled: green waits, blue is still delivered, however often
	// the hub reconciles while the clock stands still.
	setEnv("green")
	f := waitFor(t, key, "green pending on "+cluster, func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		e := entry(f)
		return e.PendingEnvironment == "green" && e.PendingEnvironmentSince != nil && e.Environment == "blue"
	})
	since := entry(f).PendingEnvironmentSince.Time
	settle()
	expect("relabelled, the clock not moved", "blue")

	// A second before the grace period ends: still blue.
	clk.SetTime(since.Add(gracePeriod - time.Second))
	settle()
	expect("a second before the grace period ends", "blue")
	if e := entry(waitFor(t, key, "read", func(*fleetv1alpha1.FleetVirtualMachine) bool { return true })); e.Environment != "blue" || e.PendingEnvironment != "green" {
		t.Fatalf("status entry a second before the grace period ends: %+v", e)
	}

	// The grace period over: the hub's alarm wakes it (nothing else
	// changes) and the overlay switches.
	clk.SetTime(since.Add(gracePeriod))
	waitSwitched("the grace period over", "green")
	waitFor(t, key, "green delivered, nothing pending", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		e := entry(f)
		return e.Environment == "green" && e.PendingEnvironmentSince == nil
	})
}
