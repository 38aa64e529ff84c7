package safety

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine"
	"github.com/fleetvm/fleetvm/pkg/tenancy"
	"github.com/fleetvm/fleetvm/pkg/vmclaim"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

// restoreFleetVMs is how many FleetVMs the restore test runs.
const restoreFleetVMs = 100

// TestRestoreFromBackup: a hub restored from a backup, as an operator
// does it with ACM's hub backup. 100 FleetVMs run; fleetvm-hub stops;
// everything FleetVM made on the hub is removed (ApplicationSets, the
// Applications without deleting their VMs, the AppProject, the candidate
// Placements, the GitOpsCluster, the namespace ManifestWorks), and the
// FleetVirtualMachines are created again from the backup, without status.
// A fresh fleetvm-hub then finds every VM where the clusters report it:
// each FleetVM is Ready on exactly the cluster it ran on, no VM is
// deleted, no second copy starts (the invariant checker watches every
// spoke). The test logs how long the hub took.
func TestRestoreFromBackup(t *testing.T) {
	const ns = "restore"
	ctx := t.Context()
	// Room for 100 one-CPU VMs.
	for _, s := range fleet.Spokes {
		node, err := s.CreateNode(ctx, fleetenv.Node{Name: s.Name + "-restore", CPU: "64", Memory: "256Gi"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Client.Delete(context.Background(), node) })
	}
	if err := fleet.Hub.Tenant(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeAll(t, ns) })
	t.Cleanup(func() {
		if t.Failed() {
			logScores(t)
			placed := map[string]int{}
			var fvms fleetv1alpha1.FleetVirtualMachineList
			if err := fleet.Hub.Client.List(context.Background(), &fvms, client.InNamespace(ns)); err == nil {
				for _, f := range fvms.Items {
					for _, c := range f.Status.Clusters {
						placed[c.Cluster+" "+string(c.Phase)]++
					}
				}
			}
			t.Logf("copies by cluster and phase: %v", placed)
		}
	})
	mark := vms.mark()
	var backup []*fleetv1alpha1.FleetVirtualMachine
	var checks []func() []string
	for i := range restoreFleetVMs {
		fvm := utiltesting.MakeFleetVM(ns, fmt.Sprintf("vm-%03d", i)).Clusters(1).VM(1, "1Gi").
			DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
		checks = append(checks, vms.limit(vmclaim.Identity(fvm), 1))
		backup = append(backup, fvm.DeepCopy())
		if err := fleet.Hub.Client.Create(ctx, fvm); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, check := range checks {
			for _, v := range check() {
				t.Errorf("invariant: %s", v)
			}
		}
	})
	ranOn := map[string]string{}
	for _, fvm := range backup {
		ranOn[fvm.Name] = names(waitFVM(t, client.ObjectKeyFromObject(fvm), "running", running(1)))[0]
	}

	fleetVM.StopHub()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			if err := fleetVM.StartHub(); err != nil {
				t.Error(err)
			}
		}
	})
	loseHubObjects(t, ns)

	for _, fvm := range backup {
		if err := fleet.Hub.Client.Create(ctx, fvm.DeepCopy()); err != nil {
			t.Fatalf("restore %s: %v", fvm.Name, err)
		}
	}
	start := time.Now()
	if err := fleetVM.StartHub(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	for _, fvm := range backup {
		got := names(waitFVM(t, client.ObjectKeyFromObject(fvm), "Ready again", running(1)))
		if !slices.Equal(got, []string{ranOn[fvm.Name]}) {
			t.Errorf("%s: on %v after the restore, want %s, where it ran", fvm.Name, got, ranOn[fvm.Name])
		}
	}
	t.Logf("restore: %d FleetVMs Ready on the clusters they ran on, %s after fleetvm-hub started", len(backup), time.Since(start).Round(100*time.Millisecond))
	for _, fvm := range backup {
		if c := vms.copies(vmclaim.Identity(fvm)); !slices.Equal(c, []string{ranOn[fvm.Name]}) {
			t.Errorf("%s runs on %v, want only %s", fvm.Name, c, ranOn[fvm.Name])
		}
	}
	expectDeletions(t, mark, ns)
}

// loseHubObjects removes, with fleetvm-hub stopped, everything FleetVM made
// on the hub for namespace ns, as a restore to a new hub loses it, without
// deleting a VM: the Applications lose their finalizers first. The
// FleetVirtualMachines themselves go too (their finalizers removed).
func loseHubObjects(t *testing.T, ns string) {
	t.Helper()
	ctx := t.Context()
	c := fleet.Hub.Client
	owned := client.MatchingLabels{fleetv1alpha1.LabelFleetVMNamespace: ns}
	var appSets argov1alpha1.ApplicationSetList
	if err := c.List(ctx, &appSets, client.InNamespace(argoNS), owned); err != nil {
		t.Fatal(err)
	}
	for i := range appSets.Items {
		if err := c.Delete(ctx, &appSets.Items[i]); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
	var apps argov1alpha1.ApplicationList
	if err := c.List(ctx, &apps, client.InNamespace(argoNS), owned); err != nil {
		t.Fatal(err)
	}
	for i := range apps.Items {
		stripFinalizersAndDelete(t, &apps.Items[i])
	}
	if err := c.Delete(ctx, &argov1alpha1.AppProject{ObjectMeta: metav1.ObjectMeta{Namespace: argoNS, Name: tenancy.ProjectName(ns)}}); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	var placements clusterv1beta1.PlacementList
	if err := c.List(ctx, &placements, client.InNamespace(argoNS), client.MatchingLabels{fleetv1alpha1.LabelPartOf: fleetv1alpha1.PartOfValue}); err != nil {
		t.Fatal(err)
	}
	for i := range placements.Items {
		if err := c.Delete(ctx, &placements.Items[i]); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
	gitOps := &unstructured.Unstructured{}
	gitOps.SetGroupVersionKind(fleetvirtualmachine.GitOpsClusterGVK)
	gitOps.SetNamespace(argoNS)
	gitOps.SetName("fleetvm-default")
	if err := c.Delete(ctx, gitOps); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	for _, s := range spokes {
		work := &workv1.ManifestWork{ObjectMeta: metav1.ObjectMeta{Namespace: s, Name: "fleetvm-namespace-" + ns}}
		if err := c.Delete(ctx, work); client.IgnoreNotFound(err) != nil {
			t.Fatal(err)
		}
	}
	var fvms fleetv1alpha1.FleetVirtualMachineList
	if err := c.List(ctx, &fvms, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for i := range fvms.Items {
		stripFinalizersAndDelete(t, &fvms.Items[i])
	}
	err := fleetenv.Eventually(ctx, wait, func() (bool, error) {
		var left fleetv1alpha1.FleetVirtualMachineList
		if err := c.List(ctx, &left, client.InNamespace(ns)); err != nil {
			return false, err
		}
		var apps argov1alpha1.ApplicationList
		if err := c.List(ctx, &apps, client.InNamespace(argoNS), owned); err != nil {
			return false, err
		}
		return len(left.Items) == 0 && len(apps.Items) == 0, nil
	})
	if err != nil {
		t.Fatalf("the hub's objects are not gone: %v", err)
	}
}

// stripFinalizersAndDelete deletes an object without what its finalizers
// would do.
func stripFinalizersAndDelete(t *testing.T, obj client.Object) {
	t.Helper()
	patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
	obj.SetFinalizers(nil)
	if err := fleet.Hub.Client.Patch(t.Context(), obj, patch); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	if err := fleet.Hub.Client.Delete(t.Context(), obj); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
}

// removeAll deletes every FleetVirtualMachine of the namespace at once and
// waits until they and their VMs are gone.
func removeAll(t *testing.T, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*wait)
	defer cancel()
	if err := fleet.Hub.Client.DeleteAllOf(ctx, &fleetv1alpha1.FleetVirtualMachine{}, client.InNamespace(ns)); err != nil {
		t.Error(err)
		return
	}
	err := fleetenv.Eventually(ctx, 3*wait, func() (bool, error) {
		var left fleetv1alpha1.FleetVirtualMachineList
		if err := fleet.Hub.Client.List(ctx, &left, client.InNamespace(ns)); err != nil {
			return false, err
		}
		if len(left.Items) > 0 {
			return false, nil
		}
		for _, s := range fleet.Spokes {
			var list kubevirtv1.VirtualMachineList
			if err := s.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
				return false, err
			}
			if len(list.Items) > 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("the FleetVirtualMachines of %s and their VMs are not gone: %v", ns, err)
	}
}
