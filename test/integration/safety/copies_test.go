package safety

import (
	"context"
	"slices"
	"strings"
	"testing"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/delivery"
	"github.com/fleetvm/fleetvm/pkg/tenancy"
	"github.com/fleetvm/fleetvm/pkg/vmclaim"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

// TestOrphanedVMAdopted: a FleetVM for one cluster whose VM fills that
// cluster is deleted with deletionPolicy Orphan (the VM keeps running) and
// created again with the same spec. The clusters are the truth: the agent
// reports the VM, the new FleetVM adopts it where it runs, and no second
// copy starts anywhere (the invariant checker watches every spoke).
// Nothing is deleted.
func TestOrphanedVMAdopted(t *testing.T) {
	const ns = "orphaned"
	mark := vms.mark()
	build := func(p fleetv1alpha1.DeletionPolicy) *fleetv1alpha1.FleetVirtualMachine {
		return utiltesting.MakeFleetVM(ns, "server").Clusters(1).VM(12, "8Gi").DeletionPolicy(p).Obj()
	}
	first := build(fleetv1alpha1.DeletionPolicyOrphan)
	check := vms.limit(vmclaim.Identity(first), 1)
	if err := fleet.Hub.Tenant(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	if err := fleet.Hub.Client.Create(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(first)
	on := names(waitFVM(t, key, "running", running(1)))[0]

	if err := fleet.Hub.Client.Delete(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	if err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		err := fleet.Hub.Client.Get(t.Context(), key, &fleetv1alpha1.FleetVirtualMachine{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}); err != nil {
		t.Fatalf("%s not gone: %v", key, err)
	}
	if !vmOn(t, on, vmclaim.Identity(first)) {
		t.Fatalf("deleted with Orphan: the VM is gone from %s", on)
	}

	// Created again: the cleanup removes it and its VM (Delete).
	create(t, build(fleetv1alpha1.DeletionPolicyDelete))
	got := waitFVM(t, key, "running again", running(1))
	if c := meta.FindStatusCondition(got.Status.Conditions, fleetv1alpha1.ConditionPlaced); c != nil {
		t.Logf("created again: Placed %s: %s", c.Reason, c.Message)
	}
	if n := names(got); !slices.Equal(n, []string{on}) {
		t.Errorf("created again: on %v, want %s, where its VM runs", n, on)
	}
	passGrace(t, 2, key)
	if n := names(settle(t, key)); !slices.Equal(n, []string{on}) {
		t.Errorf("two grace periods later: on %v, want %s", n, on)
	}
	if c := vms.copies(vmclaim.Identity(first)); !slices.Equal(c, []string{on}) {
		t.Errorf("the VM runs on %v, want only %s", c, on)
	}
	for _, v := range check() {
		t.Errorf("invariant: %s", v)
	}
	expectDeletions(t, mark, ns)
}

// TestDeleteAllAtOnce: three FleetVMs of one namespace deleted at once
// (kubectl delete fvm --all), one of them held back until the other two
// are gone. Each finishes, with exactly its VM deleted; the namespace's
// AppProject, which Argo CD needs to delete an Application, outlives the
// last Application, and goes after it.
func TestDeleteAllAtOnce(t *testing.T) {
	const ns = "deleteall"
	mark := vms.mark()
	var keys []client.ObjectKey
	for _, name := range []string{"a", "b", "c"} {
		fvm := utiltesting.MakeFleetVM(ns, name).Clusters(1).VM(1, "1Gi").DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
		create(t, fvm)
		keys = append(keys, client.ObjectKeyFromObject(fvm))
	}
	var want []deletion
	for _, k := range keys {
		on := names(waitFVM(t, k, "running", running(1)))[0]
		want = append(want, deletion{Cluster: on, VM: k})
	}
	// The last one's deletion is held at its first step (a finalizer of
	// the test's on its ApplicationSet), its Application still running
	// under the project, while the other two finish.
	const hold = "test.fleetvm.io/hold"
	held := &argov1alpha1.ApplicationSet{}
	heldKey := client.ObjectKey{Namespace: argoNS, Name: delivery.ChildName(keys[2])}
	if err := fleet.Hub.Client.Get(t.Context(), heldKey, held); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(held.DeepCopy())
	held.Finalizers = append(held.Finalizers, hold)
	if err := fleet.Hub.Client.Patch(t.Context(), held, patch); err != nil {
		t.Fatal(err)
	}
	if err := fleet.Hub.Client.DeleteAllOf(t.Context(), &fleetv1alpha1.FleetVirtualMachine{}, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	project := client.ObjectKey{Namespace: argoNS, Name: tenancy.ProjectName(ns)}
	for _, k := range keys[:2] {
		if err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
			err := fleet.Hub.Client.Get(t.Context(), k, &fleetv1alpha1.FleetVirtualMachine{})
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		}); err != nil {
			t.Fatalf("%s not gone: %v", k, err)
		}
	}
	if err := fleet.Hub.Client.Get(t.Context(), project, &argov1alpha1.AppProject{}); err != nil {
		t.Errorf("AppProject %s while %s still has its Application: %v", project, keys[2], err)
	}
	if err := fleet.Hub.Client.Get(t.Context(), heldKey, held); err != nil {
		t.Fatal(err)
	}
	patch = client.MergeFrom(held.DeepCopy())
	held.Finalizers = slices.DeleteFunc(held.Finalizers, func(f string) bool { return f == hold })
	if err := fleet.Hub.Client.Patch(t.Context(), held, patch); err != nil {
		t.Fatal(err)
	}
	err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		var list fleetv1alpha1.FleetVirtualMachineList
		if err := fleet.Hub.Client.List(t.Context(), &list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		var apps argov1alpha1.ApplicationList
		if err := fleet.Hub.Client.List(t.Context(), &apps, client.InNamespace(argoNS)); err != nil {
			return false, err
		}
		for _, a := range apps.Items {
			for _, c := range a.Status.Conditions {
				if c.Type == argov1alpha1.ApplicationConditionDeletionError {
					t.Fatalf("Application %s cannot be deleted: %s", a.Name, c.Message)
				}
			}
		}
		return len(list.Items) == 0, nil
	})
	if err != nil {
		var list fleetv1alpha1.FleetVirtualMachineList
		_ = fleet.Hub.Client.List(context.Background(), &list, client.InNamespace(ns))
		for _, f := range list.Items {
			if c := meta.FindStatusCondition(f.Status.Conditions, fleetv1alpha1.ConditionReady); c != nil {
				t.Logf("%s: %s", f.Name, c.Message)
			}
		}
		t.Fatalf("kubectl delete fvm --all did not finish: %v", err)
	}
	err = fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		err := fleet.Hub.Client.Get(t.Context(), project, &argov1alpha1.AppProject{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Errorf("AppProject %s left behind: %v", project, err)
	}
	for _, d := range want {
		if vmOn(t, d.Cluster, d.VM) {
			t.Errorf("VM %s still runs on %s", d.VM, d.Cluster)
		}
	}
	// Deleted together: in any order, each exactly once.
	got := vms.since(mark, ns)
	byVM := func(a, b deletion) int { return strings.Compare(a.VM.String(), b.VM.String()) }
	slices.SortFunc(got, byVM)
	slices.SortFunc(want, byVM)
	if !slices.Equal(got, want) {
		t.Errorf("VMs deleted on the clusters: %+v, want %+v", got, want)
	}
}
