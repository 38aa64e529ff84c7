package fleet

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/test/agenttest"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

// hubWrites counts fleetvm-hub's writes of FleetVirtualMachines other than
// of their status: of the object itself, such as its finalizer.
var hubWrites = &objectWrites{verbs: map[client.ObjectKey][]string{}}

// objectWrites records, per FleetVirtualMachine, the verbs of the writes
// of the object itself (the status subresource's apart).
type objectWrites struct {
	mu    sync.Mutex
	verbs map[client.ObjectKey][]string
}

func (w *objectWrites) count(wr agenttest.Write) {
	if _, ok := wr.Object.(*fleetv1alpha1.FleetVirtualMachine); !ok || strings.HasPrefix(wr.Verb, "status") {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	key := client.ObjectKeyFromObject(wr.Object)
	w.verbs[key] = append(w.verbs[key], wr.Verb)
}

func (w *objectWrites) of(key client.ObjectKey) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.verbs[key])
}

const finalizer = fleetv1alpha1.FleetVirtualMachineFinalizer

// TestFinalizerAtAdmission: a FleetVirtualMachine comes out of its create
// request with fleetvm-hub's finalizer, added by the mutating webhook, and
// fleetvm-hub places it without writing the object once: the finalizer
// costs no PATCH.
func TestFinalizerAtAdmission(t *testing.T) {
	fvm := utiltesting.MakeFleetVM("finalizer", "admitted").Clusters(1).VM(1, "1Gi").Obj()
	create(t, fvm) // fvm is now the API server's answer to the create
	if !slices.Contains(fvm.Finalizers, finalizer) {
		t.Fatalf("created with finalizers %v, want %s added at admission", fvm.Finalizers, finalizer)
	}
	key := client.ObjectKeyFromObject(fvm)
	waitFVM(t, key, "placed", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return conditionIs(f, fleetv1alpha1.ConditionPlaced, metav1.ConditionTrue, "")
	})
	if got := hubWrites.of(key); len(got) != 0 {
		t.Errorf("fleetvm-hub wrote the FleetVirtualMachine (not its status) %v; want no write, its finalizer was there", got)
	}
}

// TestFinalizerWithoutWebhook: with the webhooks off (unreachable, and
// failurePolicy Ignore), a FleetVirtualMachine is created without the
// finalizer and fleetvm-hub adds it, with one write of the object: the
// fallback, and the write TestFinalizerAtAdmission finds missing.
func TestFinalizerWithoutWebhook(t *testing.T) {
	ctx := t.Context()
	const ns = "finalizer"
	if err := fleet.Hub.Tenant(ctx, ns); err != nil {
		t.Fatal(err)
	}
	// Whether the API server calls the finalizer webhook: a dry-run
	// create comes back with the finalizer.
	mutated := func(ctx context.Context) (bool, error) {
		probe := utiltesting.MakeFleetVM(ns, "probe").VM(1, "1Gi").Obj()
		if err := fleet.Hub.Client.Create(ctx, probe, client.DryRunAll); err != nil {
			return false, err
		}
		return slices.Contains(probe.Finalizers, finalizer), nil
	}
	restore, err := fleet.WebhooksOff(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if err := restore(ctx); err != nil {
			t.Fatal(err)
		}
		if err := fleetenv.Eventually(ctx, wait, func() (bool, error) { return mutated(ctx) }); err != nil {
			t.Fatalf("the finalizer webhook is not called again after the webhooks are back: %v", err)
		}
	})
	if err := fleetenv.Eventually(ctx, wait, func() (bool, error) {
		m, err := mutated(ctx)
		return !m, err
	}); err != nil {
		t.Fatalf("the API server still calls the finalizer webhook: %v", err)
	}

	fvm := utiltesting.MakeFleetVM(ns, "fallback").Clusters(1).VM(1, "1Gi").Obj()
	create(t, fvm)
	if slices.Contains(fvm.Finalizers, finalizer) {
		t.Fatalf("created with finalizers %v while the webhook is off", fvm.Finalizers)
	}
	key := client.ObjectKeyFromObject(fvm)
	waitFVM(t, key, "finalizer added and placed", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return slices.Contains(f.Finalizers, finalizer) && conditionIs(f, fleetv1alpha1.ConditionPlaced, metav1.ConditionTrue, "")
	})
	if got := hubWrites.of(key); !slices.Equal(got, []string{"patch"}) {
		t.Errorf("fleetvm-hub wrote the FleetVirtualMachine (not its status) %v; want one patch, of its finalizer", got)
	}
}
