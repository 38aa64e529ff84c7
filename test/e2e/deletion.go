package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/tenancy"
)

// DeletionSpec: what an operator does to many FleetVirtualMachines at once,
// and to one whose VM was left running, ends in the state asked for.
//
//   - `kubectl delete fvm --all` in a namespace: every FleetVM, Application
//     and VM goes, and the namespace's AppProject goes last (Argo CD never
//     holds an Application it cannot delete for want of its project).
//   - The namespace deleted on the hub: the same, and the namespace ends.
//   - A FleetVM deleted with deletionPolicy Orphan and created again adopts
//     the VM that runs: the same VM, on the same cluster, and no second copy.
//   - A deletion started with deletionPolicy Delete keeps it: a patch to
//     Orphan is refused, naming the field, and the VMs go.
//
// in.Namespace is a prefix: each case uses namespaces of its own.
func DeletionSpec(t *testing.T, in LifecycleInput) {
	t.Run("delete all in a namespace", func(t *testing.T) {
		ns := in.Namespace + "-all"
		where := runDeletionFVMs(t, in, ns, 3)
		if err := in.Hub.DeleteAllOf(t.Context(), &fleetv1alpha1.FleetVirtualMachine{}, client.InNamespace(ns)); err != nil {
			t.Fatalf("delete all FleetVirtualMachines in %s: %v", ns, err)
		}
		waitReleased(t, in, ns, func(ctx context.Context) error {
			var list fleetv1alpha1.FleetVirtualMachineList
			if err := in.Hub.List(ctx, &list, client.InNamespace(ns)); err != nil {
				return err
			}
			if n := len(list.Items); n > 0 {
				return fmt.Errorf("%d FleetVirtualMachines left, %s among them", n, describeDeleting(&list.Items[0]))
			}
			return nil
		})
		waitVMsGone(t, in, ns, where)
	})

	t.Run("namespace deleted on the hub", func(t *testing.T) {
		ns := in.Namespace + "-ns"
		where := runDeletionFVMs(t, in, ns, 2)
		if err := in.Hub.Delete(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatalf("delete namespace %s: %v", ns, err)
		}
		waitReleased(t, in, ns, func(ctx context.Context) error {
			err := in.Hub.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			var list fleetv1alpha1.FleetVirtualMachineList
			if err := in.Hub.List(ctx, &list, client.InNamespace(ns)); err != nil {
				return err
			}
			if len(list.Items) > 0 {
				return fmt.Errorf("namespace %s still there with %d FleetVirtualMachines, %s among them", ns, len(list.Items), describeDeleting(&list.Items[0]))
			}
			return fmt.Errorf("namespace %s still there", ns)
		})
		waitVMsGone(t, in, ns, where)
	})

	t.Run("an orphaned VM is adopted, not started twice", func(t *testing.T) {
		ns := in.Namespace + "-adopt"
		nin := namespaced(in, ns)
		fvm := newTestFVM(nin, "adopted", fleetv1alpha1.DeletionPolicyOrphan)
		cluster := applyAndWaitRunning(t, nin, fvm.DeepCopy())[0]
		uid := getVM(t, nin, cluster, fvm).UID
		deleteFVM(t, nin, fvm)
		if vm := getVM(t, nin, cluster, fvm); vm == nil || vm.UID != uid {
			t.Fatalf("the orphaned VM on %s is gone or replaced", cluster)
		}

		// Created again, it finds its VM on the cluster: the status lists
		// that cluster and only it, and Argo CD took the same VM over.
		again := newTestFVM(nin, "adopted", fleetv1alpha1.DeletionPolicyDelete)
		if got := applyAndWaitRunning(t, nin, again); len(got) != 1 || got[0] != cluster {
			t.Fatalf("created again, it runs on %v; its VM runs on %s", got, cluster)
		}
		if vm := getVM(t, nin, cluster, fvm); vm == nil || vm.UID != uid {
			t.Errorf("the VM on %s was replaced, not adopted", cluster)
		}
		for name := range in.Spokes {
			if name != cluster && getVM(t, nin, name, fvm) != nil {
				t.Errorf("a second copy runs on %s beside the adopted one on %s", name, cluster)
			}
		}
		deleteFVM(t, nin, again)
		waitVMsGone(t, nin, ns, map[string]string{again.Name: cluster})
	})

	t.Run("orphan refused once deletion started", func(t *testing.T) {
		ns := in.Namespace + "-keep"
		nin := namespaced(in, ns)
		fvm := newTestFVM(nin, "keep", fleetv1alpha1.DeletionPolicyDelete)
		// The spec's own finalizer keeps the object readable after
		// FleetVM has finished with it.
		const hold = "e2e.fleetvm.io/hold"
		fvm.Finalizers = []string{hold}
		cluster := applyAndWaitRunning(t, nin, fvm)[0]
		t.Cleanup(func() {
			got := &fleetv1alpha1.FleetVirtualMachine{}
			if err := in.Hub.Get(context.Background(), client.ObjectKeyFromObject(fvm), got); err == nil {
				got.Finalizers = nil
				_ = in.Hub.Update(context.Background(), got)
			}
		})
		if err := in.Hub.Delete(t.Context(), fvm); err != nil {
			t.Fatal(err)
		}
		got := &fleetv1alpha1.FleetVirtualMachine{}
		if err := in.Hub.Get(t.Context(), client.ObjectKeyFromObject(fvm), got); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(got.DeepCopy())
		got.Spec.DeletionPolicy = fleetv1alpha1.DeletionPolicyOrphan
		err := in.Hub.Patch(t.Context(), got, patch)
		if err == nil {
			t.Fatal("deletionPolicy changed to Orphan after the deletion started: accepted")
		}
		if !strings.Contains(err.Error(), "spec.deletionPolicy") {
			t.Errorf("the refusal does not name spec.deletionPolicy: %v", err)
		}
		waitVMsGone(t, nin, ns, map[string]string{fvm.Name: cluster})
		waitFVM(t, nin, fvm, "done with its VMs", func(f *fleetv1alpha1.FleetVirtualMachine) error {
			if f.Spec.DeletionPolicy != fleetv1alpha1.DeletionPolicyDelete {
				return fmt.Errorf("deletionPolicy is %s", f.Spec.DeletionPolicy)
			}
			if len(f.Finalizers) != 1 || f.Finalizers[0] != hold {
				return fmt.Errorf("finalizers %v, want only %s", f.Finalizers, hold)
			}
			return nil
		})
	})
}

// namespaced is in for FleetVMs of one cluster each in namespace ns.
func namespaced(in LifecycleInput, ns string) LifecycleInput {
	in.Namespace = ns
	in.Clusters = 1
	return in
}

// runDeletionFVMs applies n FleetVMs for one cluster each, deletionPolicy
// Delete, in namespace ns, all at once, waits until each runs, and returns
// the cluster of each by name.
func runDeletionFVMs(t *testing.T, in LifecycleInput, ns string, n int) map[string]string {
	t.Helper()
	nin := namespaced(in, ns)
	fvms := make([]*fleetv1alpha1.FleetVirtualMachine, 0, n)
	for i := range n {
		fvm := newTestFVM(nin, fmt.Sprintf("vm-%d", i), fleetv1alpha1.DeletionPolicyDelete)
		apply(t, nin, fvm)
		fvms = append(fvms, fvm)
	}
	where := map[string]string{}
	for _, fvm := range fvms {
		where[fvm.Name] = waitRunning(t, nin, fvm)[0]
	}
	return where
}

// waitReleased waits until gone returns nil, the namespace's Applications
// are gone and then its AppProject. It fails at once when Argo CD holds an
// Application it cannot delete because its project went first.
func waitReleased(t *testing.T, in LifecycleInput, ns string, gone func(context.Context) error) {
	t.Helper()
	err := poll(t.Context(), in.Timeout, func(ctx context.Context) error {
		// The project first: an Application listed after it was seen
		// gone was there when it went (the other order could see the
		// last Application, then a project that went after it).
		project := &argov1alpha1.AppProject{}
		err := in.Hub.Get(ctx, types.NamespacedName{Namespace: in.ArgoNamespace, Name: tenancy.ProjectName(ns)}, project)
		projectGone := apierrors.IsNotFound(err)
		if err != nil && !projectGone {
			return err
		}
		var apps argov1alpha1.ApplicationList
		if err := in.Hub.List(ctx, &apps, client.InNamespace(in.ArgoNamespace), client.MatchingLabels{fleetv1alpha1.LabelFleetVMNamespace: ns}); err != nil {
			return err
		}
		for _, a := range apps.Items {
			for _, c := range a.Status.Conditions {
				if c.Type == argov1alpha1.ApplicationConditionDeletionError {
					return stop(fmt.Errorf("application %s cannot be deleted: %s", a.Name, c.Message))
				}
			}
			if projectGone {
				return stop(fmt.Errorf("AppProject %s is gone while Application %s uses it", tenancy.ProjectName(ns), a.Name))
			}
		}
		if err := gone(ctx); err != nil {
			return err
		}
		if len(apps.Items) > 0 {
			return fmt.Errorf("%d Applications left", len(apps.Items))
		}
		if !projectGone {
			return fmt.Errorf("AppProject %s still there", tenancy.ProjectName(ns))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("released namespace %s: %v", ns, err)
	}
}

// waitVMsGone waits until no VM of the names in where is on its cluster.
func waitVMsGone(t *testing.T, in LifecycleInput, ns string, where map[string]string) {
	t.Helper()
	for name, cluster := range where {
		waitSpoke(t, in, cluster, "VM "+ns+"/"+name+" deleted", func(ctx context.Context, c client.Client) error {
			err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &kubevirtv1.VirtualMachine{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			return fmt.Errorf("VM %s/%s still there", ns, name)
		})
	}
}

// describeDeleting says where a FleetVM's deletion stands.
func describeDeleting(f *fleetv1alpha1.FleetVirtualMachine) string {
	return fmt.Sprintf("%s (finalizers %v): %s", f.Name, f.Finalizers, describeClusters(f))
}
