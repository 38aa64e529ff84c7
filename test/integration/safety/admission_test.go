package safety

import (
	"context"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

// holdFinalizer is the test's own finalizer: it keeps a deleted
// FleetVirtualMachine on the hub, being deleted, after fleetvm-hub is done.
const holdFinalizer = "test.fleetvm.io/hold"

// patchFVM applies a JSON merge patch to the FleetVirtualMachine.
func patchFVM(ctx context.Context, key client.ObjectKey, raw string) error {
	fvm := &fleetv1alpha1.FleetVirtualMachine{}
	fvm.Namespace, fvm.Name = key.Namespace, key.Name
	return fleet.Hub.Client.Patch(ctx, fvm, client.RawPatch(types.MergePatchType, []byte(raw)))
}

// gone waits until the FleetVirtualMachine is gone from the hub.
func gone(t *testing.T, key client.ObjectKey) {
	t.Helper()
	err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		err := fleet.Hub.Client.Get(t.Context(), key, &fleetv1alpha1.FleetVirtualMachine{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Fatalf("FleetVirtualMachine %s not gone: %v", key, err)
	}
}

// TestWebhookOutageNeverBlocksDeletion: with fleetvm-hub's webhook
// unreachable (failurePolicy Fail), a FleetVirtualMachine's deletion
// completes, its VM removed from its cluster (exactly that one), because
// updates that leave the spec alone (finalizers, labels) never reach the
// webhook; a spec change is still refused (fail closed).
func TestWebhookOutageNeverBlocksDeletion(t *testing.T) {
	ctx := t.Context()
	const ns = "outage"
	mark := vms.mark()
	fvm := utiltesting.MakeFleetVM(ns, "down").Clusters(1).VM(1, "1Gi").DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
	create(t, fvm)
	key := client.ObjectKeyFromObject(fvm)
	placed := names(waitFVM(t, key, "running on 1", running(1)))

	restore, err := fleet.WebhooksDown(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := restore(context.Background()); err != nil {
			t.Error(err)
		}
	})

	// Fail closed: the spec cannot change while the webhook is down.
	strategies := []string{"Halted", "Always"} // a change every time, until the API server calls the webhook
	i := 0
	err = fleetenv.Eventually(ctx, wait, func() (bool, error) {
		i++
		err := patchFVM(ctx, key, `{"spec":{"runStrategy":"`+strategies[i%2]+`"}}`)
		return err != nil && strings.Contains(err.Error(), "failed calling webhook"), nil
	})
	if err != nil {
		t.Fatalf("a spec change with the webhook down was not refused: %v", err)
	}
	// Metadata does not wait for the webhook.
	if err := patchFVM(ctx, key, `{"metadata":{"labels":{"outage":"yes"},"finalizers":["fleetvm.io/cleanup","`+holdFinalizer+`"]}}`); err != nil {
		t.Fatalf("a metadata-only update with the webhook down: %v", err)
	}
	if err := fleet.Hub.Client.Delete(ctx, fvm); err != nil {
		t.Fatal(err)
	}
	// fleetvm-hub removes the VM and then its own finalizer.
	waitFVM(t, key, "fleetvm-hub's finalizer removed", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return slices.Equal(f.Finalizers, []string{holdFinalizer})
	})
	if vmOn(t, placed[0], key) {
		t.Errorf("the VM still runs on %s after the deletion's last step", placed[0])
	}
	// A spec change of the deleting object is refused too.
	if err := patchFVM(ctx, key, `{"spec":{"deletionPolicy":"Orphan"}}`); err == nil {
		t.Error("deletionPolicy changed during the deletion with the webhook down")
	}
	// A plain client update that only removes a finalizer goes through.
	if err := patchFVM(ctx, key, `{"metadata":{"finalizers":null}}`); err != nil {
		t.Fatalf("removing the last finalizer with the webhook down: %v", err)
	}
	gone(t, key)
	expectDeletions(t, mark, ns, deletion{Cluster: placed[0], VM: key})
}

// TestOrphanDuringDeletionRefused: once a Delete deletion started, a
// change to Orphan is refused at admission with the reason, and the VM is
// removed as the deletion said (exactly once).
func TestOrphanDuringDeletionRefused(t *testing.T) {
	ctx := t.Context()
	const ns = "orphan-flip"
	mark := vms.mark()
	fvm := utiltesting.MakeFleetVM(ns, "keepme").Clusters(1).VM(1, "1Gi").DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
	create(t, fvm)
	key := client.ObjectKeyFromObject(fvm)
	placed := names(waitFVM(t, key, "running on 1", running(1)))
	if err := patchFVM(ctx, key, `{"metadata":{"finalizers":["fleetvm.io/cleanup","`+holdFinalizer+`"]}}`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = patchFVM(context.Background(), key, `{"metadata":{"finalizers":null}}`) })
	if err := fleet.Hub.Client.Delete(ctx, fvm); err != nil {
		t.Fatal(err)
	}
	err := patchFVM(ctx, key, `{"spec":{"deletionPolicy":"Orphan"}}`)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.deletionPolicy") ||
		!strings.Contains(err.Error(), "the deletion already started with deletionPolicy Delete") {
		t.Fatalf("deletionPolicy Orphan during a Delete deletion: got %v, want Invalid naming spec.deletionPolicy and the reason", err)
	}
	t.Logf("refused: %v", err)
	got := waitFVM(t, key, "fleetvm-hub's finalizer removed", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return slices.Equal(f.Finalizers, []string{holdFinalizer})
	})
	if got.Status.DeletionPolicy != fleetv1alpha1.DeletionPolicyDelete || got.Spec.DeletionPolicy != fleetv1alpha1.DeletionPolicyDelete {
		t.Errorf("deletion policy: status %q, spec %q; want Delete, Delete", got.Status.DeletionPolicy, got.Spec.DeletionPolicy)
	}
	if err := patchFVM(ctx, key, `{"metadata":{"finalizers":null}}`); err != nil {
		t.Fatal(err)
	}
	gone(t, key)
	expectDeletions(t, mark, ns, deletion{Cluster: placed[0], VM: key})
}
