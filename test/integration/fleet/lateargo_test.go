package fleet

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/argoapp"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/delivery"
	"github.com/fleetvm/fleetvm/test/agenttest"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

// beforeHubWrite runs a test's hook right before each write of
// fleetvm-hub.
var beforeHubWrite = &writeHook{}

type writeHook struct {
	mu   sync.Mutex
	hook func(agenttest.Write)
}

// set installs hook until the test ends.
func (h *writeHook) set(t *testing.T, hook func(agenttest.Write)) {
	h.mu.Lock()
	h.hook = hook
	h.mu.Unlock()
	t.Cleanup(func() {
		h.mu.Lock()
		h.hook = nil
		h.mu.Unlock()
	})
}

func (h *writeHook) run(w agenttest.Write) {
	h.mu.Lock()
	hook := h.hook
	h.mu.Unlock()
	if hook != nil {
		hook(w)
	}
}

// TestDeleteWithArgoCDBehind: Argo CD's ApplicationSet controller writes
// the Applications from the ApplicationSet its cache holds, which may not
// show yet that FleetVM deleted it. Here it writes them from the
// ApplicationSet as it was before the deletion (with Argo CD's own write),
// right before fleetvm-hub deletes an Application whose VM must go, after
// fleetvm-hub added Argo CD's resources finalizer: the VM still leaves
// the cluster, and the FleetVirtualMachine goes.
//
// Argo CD's write sets an Application's finalizers to the template's;
// before the ApplicationSet left them to FleetVM (ignoreApplicationDifferences),
// the Application went without the finalizer, its VM stayed on the cluster,
// and the FleetVirtualMachine waited for it for ever.
func TestDeleteWithArgoCDBehind(t *testing.T) {
	ctx := t.Context()
	fvm := utiltesting.MakeFleetVM("late-argo", "web").Clusters(1).VM(1, "1Gi").DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
	create(t, fvm)
	key := client.ObjectKeyFromObject(fvm)
	got := waitFVM(t, key, "ready on a cluster", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return conditionIs(f, fleetv1alpha1.ConditionReady, metav1.ConditionTrue, fleetv1alpha1.ReasonAllReady) && f.Status.Summary.Ready == 1
	})
	cluster := got.Status.Clusters[0].Cluster

	// The ApplicationSet as Argo CD's cache holds it when the deletion
	// starts.
	cached := &argov1alpha1.ApplicationSet{}
	if err := fleet.Hub.Client.Get(ctx, client.ObjectKey{Namespace: argoNS, Name: delivery.ChildName(key)}, cached); err != nil {
		t.Fatal(err)
	}
	var late atomic.Int32
	beforeHubWrite.set(t, func(w agenttest.Write) {
		app, ok := w.Object.(*argoapp.Application) // the hub's view of one
		if !ok || w.Verb != "delete" || !strings.HasPrefix(app.Name, cached.Name+".") {
			return
		}
		late.Add(1)
		if _, err := argo.SyncFrom(context.Background(), cached.DeepCopy()); err != nil {
			t.Errorf("Argo CD's late write: %v", err)
		}
	})

	if err := fleet.Hub.Client.Delete(ctx, fvm); err != nil {
		t.Fatal(err)
	}
	err := fleetenv.Eventually(ctx, wait, func() (bool, error) {
		err := fleet.Hub.Client.Get(ctx, key, &fleetv1alpha1.FleetVirtualMachine{})
		if !apierrors.IsNotFound(err) {
			return false, client.IgnoreNotFound(err)
		}
		var vms kubevirtv1.VirtualMachineList
		if err := fleet.Spoke(cluster).Client.List(ctx, &vms, client.InNamespace(key.Namespace)); err != nil {
			return false, err
		}
		return len(vms.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("FleetVirtualMachine and its VM on %s gone: %v\n%s", cluster, err, leftBehind(ctx, key, cluster))
	}
	if late.Load() == 0 {
		t.Fatal("fleetvm-hub deleted no Application: Argo CD's late write never ran")
	}
}

// leftBehind says what the hub and the cluster still hold of the
// FleetVirtualMachine.
func leftBehind(ctx context.Context, key client.ObjectKey, cluster string) string {
	var b strings.Builder
	f := &fleetv1alpha1.FleetVirtualMachine{}
	if err := fleet.Hub.Client.Get(ctx, key, f); err == nil {
		fmt.Fprintf(&b, "FleetVirtualMachine: finalizers %v, conditions %+v\n", f.Finalizers, f.Status.Conditions)
	}
	var apps argov1alpha1.ApplicationList
	if err := fleet.Hub.Client.List(ctx, &apps, client.InNamespace(argoNS), client.MatchingLabels{fleetv1alpha1.LabelFleetVMName: key.Name}); err == nil {
		for _, a := range apps.Items {
			fmt.Fprintf(&b, "Application %s: deleting %t, finalizers %v, owners %d\n", a.Name, a.DeletionTimestamp != nil, a.Finalizers, len(a.OwnerReferences))
		}
	}
	var vms kubevirtv1.VirtualMachineList
	if err := fleet.Spoke(cluster).Client.List(ctx, &vms, client.InNamespace(key.Namespace)); err == nil {
		for _, vm := range vms.Items {
			fmt.Fprintf(&b, "%s: VirtualMachine %s, deleting %t\n", cluster, vm.Name, vm.DeletionTimestamp != nil)
		}
	}
	return b.String()
}
