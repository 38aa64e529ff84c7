package hub

import (
	"slices"
	"strings"
	"testing"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

// invalidSpec tells whether the status shows the current generation's
// spec refused: Ready and Placed False, reason InvalidSpec, the message
// naming field.
func invalidSpec(field string) func(*fleetv1alpha1.FleetVirtualMachine) bool {
	return func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		for _, t := range []string{fleetv1alpha1.ConditionReady, fleetv1alpha1.ConditionPlaced} {
			c := meta.FindStatusCondition(f.Status.Conditions, t)
			if c == nil || c.Reason != fleetv1alpha1.ReasonInvalidSpec || c.ObservedGeneration != f.Generation || !strings.Contains(c.Message, field) {
				return false
			}
		}
		return true
	}
}

func mergePatch(t *testing.T, key client.ObjectKey, raw string) {
	t.Helper()
	fvm := &fleetv1alpha1.FleetVirtualMachine{}
	fvm.Namespace, fvm.Name = key.Namespace, key.Name
	if err := fleet.Hub.Client.Patch(t.Context(), fvm, client.RawPatch(types.MergePatchType, []byte(raw))); err != nil {
		t.Fatal(err)
	}
}

// TestInvalidSpecDeliversNothing: this hub runs no webhook, as when it is
// off or set to Ignore. A FleetVirtualMachine whose template admission
// would refuse (an unknown field, which lenient decoding would drop) is
// shown InvalidSpec naming the field and gets no Placement decision and no
// ApplicationSet; one that turns invalid keeps its Applications and its
// ApplicationSet as they were, and delivers again once fixed.
func TestInvalidSpecDeliversNothing(t *testing.T) {
	ctx := t.Context()
	s := shape("1", "1Gi")
	publishScores(t, "prod-a", map[string]int32{s.Name(): 10})
	publishScores(t, "prod-b", map[string]int32{s.Name(): 10})
	const badField = "spec.template.spec.runStrategyy"

	t.Run("created invalid", func(t *testing.T) {
		fvm := utiltesting.MakeFleetVM("invalid", "new").Env("prod").VM(1, "1Gi").VMSpec("runStrategyy", "Always").Obj()
		createFVM(t, fvm)
		got := waitFor(t, client.ObjectKeyFromObject(fvm), "shown InvalidSpec", invalidSpec(badField))
		if len(got.Status.Clusters) != 0 {
			t.Errorf("an invalid FleetVM lists clusters: %+v", got.Status.Clusters)
		}
		err := fleet.Hub.Client.Get(ctx, appSetKey(fvm), &argov1alpha1.ApplicationSet{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("an invalid FleetVM has an ApplicationSet (err %v)", err)
		}
		if apps := applications(t, fvm); len(apps) != 0 {
			t.Errorf("an invalid FleetVM has Applications on %d clusters", len(apps))
		}
		t.Logf("Ready: %s", meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionReady).Message)
	})

	t.Run("turned invalid", func(t *testing.T) {
		fvm := utiltesting.MakeFleetVM("invalid", "running").Env("prod").VM(1, "1Gi").Obj()
		createFVM(t, fvm)
		key := client.ObjectKeyFromObject(fvm)
		waitFor(t, key, "placed on both prod clusters", func(f *fleetv1alpha1.FleetVirtualMachine) bool { return len(decided(f)) == 2 })
		apps := syncApps(t, fvm, 2)
		var appSet argov1alpha1.ApplicationSet
		if err := fleet.Hub.Client.Get(ctx, appSetKey(fvm), &appSet); err != nil {
			t.Fatal(err)
		}

		// Valid for the schema, refused by admission: and by the controller.
		mergePatch(t, key, `{"spec":{"template":{"spec":{"runStrategyy":"Always"}}}}`)
		waitFor(t, key, "shown InvalidSpec", invalidSpec(badField))
		var now argov1alpha1.ApplicationSet
		if err := fleet.Hub.Client.Get(ctx, appSetKey(fvm), &now); err != nil {
			t.Fatalf("the ApplicationSet of a FleetVM turned invalid: %v", err)
		}
		if diff := cmp.Diff(appSet.Spec, now.Spec); diff != "" {
			t.Errorf("ApplicationSet changed for an invalid spec (-before,+after):\n%s", diff)
		}
		after := applications(t, fvm)
		for c, app := range apps {
			if a, ok := after[c]; !ok || a.UID != app.UID || a.DeletionTimestamp != nil {
				t.Errorf("the Application of %s was removed or replaced for an invalid spec", c)
			}
		}

		// Fixed: placed and delivered again.
		mergePatch(t, key, `{"spec":{"template":{"spec":{"runStrategyy":null}}}}`)
		waitFor(t, key, "placed again", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
			c := meta.FindStatusCondition(f.Status.Conditions, fleetv1alpha1.ConditionPlaced)
			return c != nil && c.Status == "True" && c.ObservedGeneration == f.Generation
		})
	})
}

// TestDeletionPolicyKeptToTheEnd: the policy a deletion started with is
// followed to the end. This hub runs no webhook, so a change to Orphan
// after a Delete deletion started is accepted by the API server: the VMs
// are still removed (Argo CD's resources finalizer on every Application),
// and the Deleting condition says so.
func TestDeletionPolicyKeptToTheEnd(t *testing.T) {
	ctx := t.Context()
	s := shape("1", "1Gi")
	publishScores(t, "prod-a", map[string]int32{s.Name(): 10})
	publishScores(t, "prod-b", map[string]int32{s.Name(): 10})
	fvm := utiltesting.MakeFleetVM("pinned", "keepme").Env("prod").VM(1, "1Gi").DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
	createFVM(t, fvm)
	key := client.ObjectKeyFromObject(fvm)
	waitFor(t, key, "placed on both prod clusters", func(f *fleetv1alpha1.FleetVirtualMachine) bool { return len(decided(f)) == 2 })
	apps := syncApps(t, fvm, 2)

	if err := fleet.Hub.Client.Delete(ctx, fvm); err != nil {
		t.Fatal(err)
	}
	waitFor(t, key, "the deletion's policy recorded", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return f.Status.DeletionPolicy == fleetv1alpha1.DeletionPolicyDelete
	})
	mergePatch(t, key, `{"spec":{"deletionPolicy":"Orphan"}}`)
	err := fleetenv.Eventually(ctx, wait, func() (bool, error) {
		for c, app := range apps {
			var got argov1alpha1.Application
			if err := fleet.Hub.Client.Get(ctx, client.ObjectKeyFromObject(&app), &got); err != nil {
				return false, err // the resources finalizer keeps it until Argo CD removed the VM
			}
			if got.DeletionTimestamp == nil {
				return false, nil
			}
			if !slices.Contains(got.Finalizers, argov1alpha1.ResourcesFinalizerName) {
				return false, errorf("Application of %s deleted without the resources finalizer: its VM would stay", c)
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("VMs not being removed after Orphan was set during a Delete deletion: %v", err)
	}
	got := waitFor(t, key, "Deleting says which policy it follows", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		c := meta.FindStatusCondition(f.Status.Conditions, fleetv1alpha1.ConditionReady)
		return c != nil && c.Reason == fleetv1alpha1.ReasonDeleting &&
			strings.Contains(c.Message, "waiting to remove the VMs (deletionPolicy Delete, as when the deletion started; spec.deletionPolicy Orphan, set after, is not followed)")
	})
	t.Logf("Ready: %s", meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionReady).Message)
	finishArgoDeletion(t, fvm)
	err = fleetenv.Eventually(ctx, wait, func() (bool, error) {
		err := fleet.Hub.Client.Get(ctx, key, &fleetv1alpha1.FleetVirtualMachine{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Fatalf("FleetVM not gone: %v", err)
	}
}
