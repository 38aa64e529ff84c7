// Package e2e holds FleetVM's end-to-end specs: real Argo CD delivers
// FleetVirtualMachines to the clusters the real OCM scheduler picks, and
// FleetVM reports them back. Each spec takes an input struct with clients
// of the hub and the managed clusters, so the same spec runs on the local
// fleet (localfleet_test.go) and on any other fleet, such as kind clusters
// with real OCM, Argo CD and KubeVirt.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/tenancy"
)

// LifecycleInput is what LifecycleSpec needs from a fleet.
type LifecycleInput struct {
	// Hub is an admin client of the hub whose scheme knows FleetVM and
	// Argo CD types.
	Hub client.Client
	// Spokes are admin clients of the managed clusters, by cluster name;
	// their scheme knows KubeVirt's types.
	Spokes map[string]client.Client
	// ArgoNamespace is the Argo CD namespace fleetvm-hub writes to.
	ArgoNamespace string
	// Namespace is where the spec's FleetVirtualMachines go (created if
	// missing); their VMs land in the namespace of the same name.
	Namespace string
	// Environment is the env label value of the clusters to use, and
	// Clusters how many of them (at least 2 make the spec meaningful).
	Environment string
	Clusters    int32
	// Timeout bounds every wait for the fleet to converge.
	Timeout time.Duration
}

// LifecycleSpec: a FleetVirtualMachine is applied; Argo CD syncs its VM
// onto the decided clusters; the VM runs there; the agents report; the
// status shows it Ready on every cluster with node and IP, synced and
// healthy in Argo CD. A runStrategy change stops it everywhere. Deleted
// with deletionPolicy Delete, its VMs leave the clusters (Argo CD's
// resources finalizer, which makes Argo CD remove them, outlives the
// ApplicationSet controller's writes); with Orphan, they stay.
func LifecycleSpec(t *testing.T, in LifecycleInput) {
	t.Run("delete removes the VMs", func(t *testing.T) {
		fvm := newTestFVM(in, "lifecycle-delete", fleetv1alpha1.DeletionPolicyDelete)
		decided := applyAndWaitRunning(t, in, fvm)

		// The power state follows spec.runStrategy on every cluster.
		patchFVM(t, in, fvm, func(f *fleetv1alpha1.FleetVirtualMachine) { f.Spec.RunStrategy = fleetv1alpha1.RunStrategyHalted })
		waitFVM(t, in, fvm, "stopped on every cluster", func(f *fleetv1alpha1.FleetVirtualMachine) error {
			if err := readyWithReason(f, fleetv1alpha1.ReasonStopped); err != nil {
				return err
			}
			for _, c := range f.Status.Clusters {
				if c.Phase != fleetv1alpha1.ClusterPhaseStopped {
					return fmt.Errorf("cluster %s is %s", c.Cluster, c.Phase)
				}
			}
			return nil
		})
		// The agents reported Stopped; the VMs say so themselves.
		for _, cluster := range decided {
			waitSpoke(t, in, cluster, "VM halted and stopped", func(ctx context.Context, c client.Client) error {
				vm := &kubevirtv1.VirtualMachine{}
				if err := c.Get(ctx, vmKey(fvm), vm); err != nil {
					return err
				}
				if vm.Spec.RunStrategy == nil || *vm.Spec.RunStrategy != kubevirtv1.RunStrategyHalted {
					return fmt.Errorf("runStrategy %v, want Halted", vm.Spec.RunStrategy)
				}
				if vm.Status.PrintableStatus != kubevirtv1.VirtualMachineStatusStopped {
					return fmt.Errorf("VM is %s, want Stopped", vm.Status.PrintableStatus)
				}
				return nil
			})
		}

		finalizerOutlivesArgoCDWrites(t, in, fvm)
		deleteFVM(t, in, fvm)
		for _, cluster := range decided {
			waitSpoke(t, in, cluster, "VM deleted by Argo CD", func(ctx context.Context, c client.Client) error {
				err := c.Get(ctx, vmKey(fvm), &kubevirtv1.VirtualMachine{})
				if apierrors.IsNotFound(err) {
					return nil
				}
				if err != nil {
					return err
				}
				return fmt.Errorf("VM %s still there", vmKey(fvm))
			})
		}
	})

	t.Run("orphan leaves the VMs running", func(t *testing.T) {
		fvm := newTestFVM(in, "lifecycle-orphan", fleetv1alpha1.DeletionPolicyOrphan)
		decided := applyAndWaitRunning(t, in, fvm)
		t.Cleanup(func() {
			// The orphans are the spec's own: remove them, bounded, for
			// the specs that follow.
			for _, cluster := range decided {
				ctx, cancel := context.WithTimeout(context.Background(), in.Timeout)
				vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: fvm.Name, Namespace: fvm.Namespace}}
				_ = client.IgnoreNotFound(in.Spokes[cluster].Delete(ctx, vm))
				cancel()
			}
		})

		uids := map[string]types.UID{}
		for _, cluster := range decided {
			if vm := getVM(t, in, cluster, fvm); vm != nil {
				uids[cluster] = vm.UID
			}
		}

		deleteFVM(t, in, fvm)
		// The Applications are gone with the FleetVirtualMachine, so no
		// Argo CD will touch the VMs anymore: what runs now is the final
		// state, and it must be the same VMs, still running.
		for _, cluster := range decided {
			vm := getVM(t, in, cluster, fvm)
			if vm == nil {
				t.Fatalf("orphaned VM %s gone from %s", vmKey(fvm), cluster)
			}
			if vm.UID != uids[cluster] {
				t.Errorf("VM on %s was replaced (UID %s, was %s), not left alone", cluster, vm.UID, uids[cluster])
			}
			if vm.DeletionTimestamp != nil {
				t.Errorf("orphaned VM on %s is being deleted", cluster)
			}
			if vm.Status.PrintableStatus != kubevirtv1.VirtualMachineStatusRunning {
				t.Errorf("orphaned VM on %s is %s, want Running", cluster, vm.Status.PrintableStatus)
			}
		}
	})
}

// finalizerOutlivesArgoCDWrites: Argo CD's resources finalizer, which
// FleetVM puts on an Application right before it deletes it so that Argo
// CD removes the VM, stays through the ApplicationSet controller's writes
// of that Application. The controller may write it from an ApplicationSet
// its cache still holds after FleetVM deleted it; had it set the
// finalizers to the template's (none), the Application would go without
// its VM, and the FleetVirtualMachine would wait for that VM for ever.
// A label the controller takes off marks its write.
func finalizerOutlivesArgoCDWrites(t *testing.T, in LifecycleInput, fvm *fleetv1alpha1.FleetVirtualMachine) {
	t.Helper()
	const probe = "e2e.fleetvm.io/argocd-wrote-since"
	apps := waitApplications(t, in, fvm, "listed", func(apps []argov1alpha1.Application) error {
		if len(apps) == 0 {
			return errors.New("none")
		}
		return nil
	})
	for i := range apps {
		app := &apps[i]
		patch := client.MergeFrom(app.DeepCopy())
		if !slices.Contains(app.Finalizers, argov1alpha1.ResourcesFinalizerName) {
			app.Finalizers = append(app.Finalizers, argov1alpha1.ResourcesFinalizerName)
		}
		app.Labels[probe] = "true"
		if err := in.Hub.Patch(t.Context(), app, patch); err != nil {
			t.Fatalf("put Argo CD's resources finalizer on Application %s: %v", app.Name, err)
		}
		got := &argov1alpha1.Application{}
		err := poll(t.Context(), in.Timeout, func(ctx context.Context) error {
			if err := in.Hub.Get(ctx, client.ObjectKeyFromObject(app), got); err != nil {
				return err
			}
			if _, ok := got.Labels[probe]; ok {
				return fmt.Errorf("label %s still there: the ApplicationSet controller has not written the Application", probe)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Application %s: %v", app.Name, err)
		}
		if !slices.Contains(got.Finalizers, argov1alpha1.ResourcesFinalizerName) {
			t.Errorf("Application %s: the ApplicationSet controller took Argo CD's resources finalizer off (finalizers %v)", app.Name, got.Finalizers)
		}
	}
}

// cloudInit carries template syntax that must reach the clusters
// unchanged through the ApplicationSet's and Helm's templating.
const cloudInit = "#cloud-config\npassword: {{ $.Values.rootPassword }}\n"

func newTestFVM(in LifecycleInput, name string, policy fleetv1alpha1.DeletionPolicy) *fleetv1alpha1.FleetVirtualMachine {
	vm := fmt.Sprintf(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"labels":{"app":%q}},
"spec":{"running":true,"template":{"spec":{"domain":{"cpu":{"cores":1},"memory":{"guest":"1Gi"},
"devices":{"disks":[{"name":"cloudinitdisk","disk":{"bus":"virtio"}}]}},
"volumes":[{"name":"cloudinitdisk","cloudInitNoCloud":{"userData":%q}}]}}}}`, name, cloudInit)
	return &fleetv1alpha1.FleetVirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: in.Namespace},
		Spec: fleetv1alpha1.FleetVirtualMachineSpec{
			Placement:      fleetv1alpha1.FleetPlacement{Environment: in.Environment, Clusters: ptr.To(in.Clusters)},
			RunStrategy:    fleetv1alpha1.RunStrategyAlways,
			DeletionPolicy: policy,
			Template:       &runtime.RawExtension{Raw: []byte(vm)},
		},
	}
}

// applyAndWaitRunning creates the FleetVirtualMachine, waits until it is
// Ready on in.Clusters clusters, checks what Argo CD and the clusters hold,
// and returns the decided clusters.
func applyAndWaitRunning(t *testing.T, in LifecycleInput, fvm *fleetv1alpha1.FleetVirtualMachine) []string {
	t.Helper()
	apply(t, in, fvm)
	return waitRunning(t, in, fvm)
}

// apply creates the FleetVirtualMachine in a namespace prepared for it.
func apply(t *testing.T, in LifecycleInput, fvm *fleetv1alpha1.FleetVirtualMachine) {
	t.Helper()
	if err := tenantNamespace(t.Context(), in.Hub, in.Namespace); err != nil {
		t.Fatal(err)
	}
	if err := in.Hub.Create(t.Context(), fvm); err != nil {
		t.Fatalf("create FleetVirtualMachine: %v", err)
	}
}

// waitRunning is applyAndWaitRunning after the create.
func waitRunning(t *testing.T, in LifecycleInput, fvm *fleetv1alpha1.FleetVirtualMachine) []string {
	t.Helper()
	got := waitFVM(t, in, fvm, "Ready on every decided cluster", func(f *fleetv1alpha1.FleetVirtualMachine) error {
		if err := readyWithReason(f, fleetv1alpha1.ReasonAllReady); err != nil {
			return err
		}
		if n := len(f.Status.Clusters); n != int(in.Clusters) {
			return fmt.Errorf("%d clusters in status, want %d", n, in.Clusters)
		}
		for _, c := range f.Status.Clusters {
			switch {
			case c.Phase != fleetv1alpha1.ClusterPhaseRunning || !c.Ready:
				return fmt.Errorf("cluster %s is %s (ready %t)", c.Cluster, c.Phase, c.Ready)
			case c.Node == "" || len(c.IPAddresses) == 0:
				return fmt.Errorf("cluster %s reports no node or IP", c.Cluster)
			case c.SyncStatus != string(argov1alpha1.SyncStatusCodeSynced) || c.Health != "Healthy":
				return fmt.Errorf("cluster %s: Argo CD %s/%s, want Synced/Healthy", c.Cluster, c.SyncStatus, c.Health)
			}
		}
		return nil
	})
	var decided []string
	for _, c := range got.Status.Clusters {
		decided = append(decided, c.Cluster)
		if c.Environment != in.Environment {
			t.Errorf("cluster %s has environment %q, want %q", c.Cluster, c.Environment, in.Environment)
		}
	}

	// Argo CD made one Application per cluster and synced it; a sync may
	// still be finishing when the FleetVM reads Synced, so wait for it.
	waitApplications(t, in, fvm, "one per decided cluster, synced", func(apps []argov1alpha1.Application) error {
		var appClusters []string
		for _, a := range apps {
			appClusters = append(appClusters, a.Spec.Destination.Name)
		}
		slices.Sort(appClusters)
		if !slices.Equal(appClusters, decided) {
			return fmt.Errorf("applications for %v, want one per decided cluster %v", appClusters, decided)
		}
		for _, a := range apps {
			if err := syncedAtRest(a); err != nil {
				return err
			}
		}
		return nil
	})
	noDriftAfterFirstSync(t, in, fvm, decided)

	// The VM on each cluster is the one the status reports: applied by Argo
	// CD, labelled for FleetVM, its cloud-init untouched.
	for _, c := range got.Status.Clusters {
		vm := getVM(t, in, c.Cluster, fvm)
		if vm == nil {
			t.Fatalf("no VM %s on %s", vmKey(fvm), c.Cluster)
		}
		if vm.Annotations["argocd.argoproj.io/tracking-id"] == "" {
			t.Errorf("VM on %s carries no Argo CD tracking annotation: not applied by Argo CD", c.Cluster)
		}
		for k, v := range map[string]string{
			fleetv1alpha1.LabelFleetVMName: fvm.Name, fleetv1alpha1.LabelFleetVMNamespace: fvm.Namespace,
			fleetv1alpha1.LabelCluster: c.Cluster,
		} {
			if vm.Labels[k] != v {
				t.Errorf("VM on %s: label %s=%q, want %q", c.Cluster, k, vm.Labels[k], v)
			}
		}
		if got := userData(vm); got != cloudInit {
			t.Errorf("VM on %s: cloud-init %q, want %q unchanged", c.Cluster, got, cloudInit)
		}
	}
	return decided
}

// syncedAtRest is an Application at rest: no operation under way, the
// last one succeeded, synced and healthy. An Application that found its
// resources already as git has them (a VM adopted from an earlier
// FleetVM) is synced without any operation.
func syncedAtRest(a argov1alpha1.Application) error {
	switch op := a.Status.OperationState; {
	case a.Operation != nil:
		return fmt.Errorf("application %s: an operation is under way", a.Name)
	case op != nil && op.Phase != "Succeeded":
		return fmt.Errorf("application %s: last sync %+v, want Succeeded", a.Name, op)
	case a.Status.Sync.Status != argov1alpha1.SyncStatusCodeSynced || a.Status.Health.Status != "Healthy":
		return fmt.Errorf("application %s: %s/%s, want Synced/Healthy", a.Name, a.Status.Sync.Status, a.Status.Health.Status)
	}
	return nil
}

// noDriftAfterFirstSync: once the VMs run and KubeVirt has done with their
// specs (it fills in firmware UUID and serial, machine type, architecture),
// Argo CD compares them again and finds nothing to heal. The window ends
// with a state: every Application reconciled after the VMs settled (Argo CD
// starts a first self-heal in the reconcile that finds drift).
func noDriftAfterFirstSync(t *testing.T, in LifecycleInput, fvm *fleetv1alpha1.FleetVirtualMachine, decided []string) {
	t.Helper()
	for _, cluster := range decided {
		waitSpoke(t, in, cluster, "VM running, its spec seen by KubeVirt", func(ctx context.Context, c client.Client) error {
			vm := &kubevirtv1.VirtualMachine{}
			if err := c.Get(ctx, vmKey(fvm), vm); err != nil {
				return err
			}
			switch {
			case vm.Status.PrintableStatus != kubevirtv1.VirtualMachineStatusRunning:
				return fmt.Errorf("VM is %s, want Running", vm.Status.PrintableStatus)
			case vm.Status.ObservedGeneration < vm.Generation:
				return fmt.Errorf("KubeVirt saw generation %d of %d", vm.Status.ObservedGeneration, vm.Generation)
			}
			return nil
		})
	}
	settled := time.Now()
	apps := waitApplications(t, in, fvm, "reconciled after the VMs settled", func(apps []argov1alpha1.Application) error {
		for _, a := range apps {
			// reconciledAt has whole seconds and is rounded down: after
			// settled means the comparison started after it.
			if at := a.Status.ReconciledAt; at == nil || !at.After(settled) {
				return fmt.Errorf("application %s last reconciled at %v, before %s", a.Name, at, settled.Format(time.RFC3339))
			}
		}
		return nil
	})
	for _, a := range apps {
		if op := a.Status.OperationState; op != nil && op.Operation.Sync != nil && op.Operation.Sync.SelfHealAttemptsCount > 0 {
			// Argo CD 3 starts its first self-heal at once (its backoff's
			// first step is 0), and the comparison right after a sync may
			// read its cluster cache before the watch brought the VM the
			// sync created: one self-heal that finds every resource
			// unchanged healed nothing. A second one, or one that changed
			// the VM, is Argo CD fighting KubeVirt.
			if n := op.Operation.Sync.SelfHealAttemptsCount; n > 1 || !unchanged(op) {
				t.Errorf("Application %s: Argo CD self-healed %d times (last sync started %s, resources %+v, result %s)",
					a.Name, n, op.StartedAt.Format(time.RFC3339), op.Operation.Sync.Resources, syncResult(op))
			}
		}
		if err := syncedAtRest(a); err != nil {
			t.Errorf("%v; out of sync: %s", err, outOfSync(a))
		}
	}
}

// unchanged: the operation's sync applied every resource and changed none
// (kubectl's "unchanged").
func unchanged(op *argov1alpha1.OperationState) bool {
	if op.SyncResult == nil || len(op.SyncResult.Resources) == 0 {
		return false
	}
	for _, r := range op.SyncResult.Resources {
		if !strings.HasSuffix(r.Message, " unchanged") {
			return false
		}
	}
	return true
}

// syncResult names each resource of the operation's sync with what the
// sync did to it.
func syncResult(op *argov1alpha1.OperationState) string {
	if op.SyncResult == nil {
		return "none"
	}
	var out []string
	for _, r := range op.SyncResult.Resources {
		out = append(out, fmt.Sprintf("%s/%s %s: %s", r.Kind, r.Namespace, r.Name, r.Message))
	}
	return strings.Join(out, "; ")
}

// outOfSync names the Application's resources Argo CD finds out of sync.
func outOfSync(a argov1alpha1.Application) string {
	var out []string
	for _, r := range a.Status.Resources {
		if r.Status != argov1alpha1.SyncStatusCodeSynced {
			out = append(out, fmt.Sprintf("%s/%s %s/%s: %s", r.Group, r.Kind, r.Namespace, r.Name, r.Status))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// waitApplications polls the FleetVirtualMachine's Applications until check
// returns nil, and returns them.
func waitApplications(t *testing.T, in LifecycleInput, fvm *fleetv1alpha1.FleetVirtualMachine, what string, check func([]argov1alpha1.Application) error) []argov1alpha1.Application {
	t.Helper()
	var apps argov1alpha1.ApplicationList
	err := poll(t.Context(), in.Timeout, func(ctx context.Context) error {
		if err := in.Hub.List(ctx, &apps, client.InNamespace(in.ArgoNamespace), client.MatchingLabels{
			fleetv1alpha1.LabelFleetVMName: fvm.Name, fleetv1alpha1.LabelFleetVMNamespace: fvm.Namespace,
		}); err != nil {
			return err
		}
		return check(apps.Items)
	})
	if err != nil {
		t.Fatalf("Applications of %s %s: %v", vmKey(fvm), what, err)
	}
	return apps.Items
}

func userData(vm *kubevirtv1.VirtualMachine) string {
	if vm.Spec.Template == nil {
		return ""
	}
	for _, v := range vm.Spec.Template.Spec.Volumes {
		if v.CloudInitNoCloud != nil {
			return v.CloudInitNoCloud.UserData
		}
	}
	return ""
}

func readyWithReason(f *fleetv1alpha1.FleetVirtualMachine, reason string) error {
	c := meta.FindStatusCondition(f.Status.Conditions, fleetv1alpha1.ConditionReady)
	switch {
	case f.Status.ObservedGeneration != f.Generation:
		return fmt.Errorf("status of generation %d, spec is %d", f.Status.ObservedGeneration, f.Generation)
	case c == nil:
		return fmt.Errorf("no Ready condition")
	case c.Status != metav1.ConditionTrue || c.Reason != reason:
		return fmt.Errorf("condition Ready=%s %s: %s", c.Status, c.Reason, c.Message)
	}
	return nil
}

func vmKey(fvm *fleetv1alpha1.FleetVirtualMachine) client.ObjectKey {
	return client.ObjectKey{Namespace: fvm.Namespace, Name: fvm.Name}
}

// getVM returns the VM on a cluster, or nil when there is none.
func getVM(t *testing.T, in LifecycleInput, cluster string, fvm *fleetv1alpha1.FleetVirtualMachine) *kubevirtv1.VirtualMachine {
	t.Helper()
	c, ok := in.Spokes[cluster]
	if !ok {
		t.Fatalf("no client for cluster %s", cluster)
	}
	vm := &kubevirtv1.VirtualMachine{}
	if err := c.Get(t.Context(), vmKey(fvm), vm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		t.Fatal(err)
	}
	return vm
}

func patchFVM(t *testing.T, in LifecycleInput, fvm *fleetv1alpha1.FleetVirtualMachine, change func(*fleetv1alpha1.FleetVirtualMachine)) {
	t.Helper()
	got := &fleetv1alpha1.FleetVirtualMachine{}
	if err := in.Hub.Get(t.Context(), client.ObjectKeyFromObject(fvm), got); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(got.DeepCopy())
	change(got)
	if err := in.Hub.Patch(t.Context(), got, patch); err != nil {
		t.Fatalf("patch FleetVirtualMachine: %v", err)
	}
}

// deleteFVM deletes the FleetVirtualMachine and waits until it and its
// Applications are gone from the hub.
func deleteFVM(t *testing.T, in LifecycleInput, fvm *fleetv1alpha1.FleetVirtualMachine) {
	t.Helper()
	if err := in.Hub.Delete(t.Context(), fvm); err != nil {
		t.Fatalf("delete FleetVirtualMachine: %v", err)
	}
	start, told := time.Now(), false
	err := poll(t.Context(), in.Timeout, func(ctx context.Context) error {
		err := in.Hub.Get(ctx, client.ObjectKeyFromObject(fvm), &fleetv1alpha1.FleetVirtualMachine{})
		if err == nil && !told && time.Since(start) > time.Minute {
			// A deletion this slow is worth a look even if it ends.
			told = true
			t.Logf("FleetVirtualMachine %s still there after %s; on the hub:\n%son the clusters:\n%s", vmKey(fvm),
				time.Since(start).Round(time.Second), hubSide(in, fvm), leftOn(in, fvm.Namespace))
		}
		if err == nil {
			return fmt.Errorf("FleetVirtualMachine still there")
		}
		if !apierrors.IsNotFound(err) {
			return err
		}
		var apps argov1alpha1.ApplicationList
		if err := in.Hub.List(ctx, &apps, client.InNamespace(in.ArgoNamespace), client.MatchingLabels{
			fleetv1alpha1.LabelFleetVMName: fvm.Name, fleetv1alpha1.LabelFleetVMNamespace: fvm.Namespace,
		}); err != nil {
			return err
		}
		if len(apps.Items) > 0 {
			return fmt.Errorf("%d Applications left", len(apps.Items))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("FleetVirtualMachine %s deleted: %v; left on the hub:\n%son the clusters:\n%s", vmKey(fvm), err,
			hubSide(in, fvm), leftOn(in, fvm.Namespace))
	}
}

// hubSide says what the hub holds of a FleetVirtualMachine that is slow
// to go, with what holds each object: the FleetVirtualMachine (finalizers,
// conditions, the clusters in its status), its ApplicationSet and
// Applications (deletion, finalizers, owners, what Argo CD says of them),
// the ManifestWorks made for it (its moves') and for its namespace, and
// the agents' VMReports of it, which its deletion waits to see empty. A
// deletion that did not end says which of them it waits for.
func hubSide(in LifecycleInput, fvm *fleetv1alpha1.FleetVirtualMachine) string {
	var b strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	held := func(o client.Object) string {
		var owners []string
		for _, r := range o.GetOwnerReferences() {
			owners = append(owners, r.Kind+"/"+r.Name)
		}
		return fmt.Sprintf("deleting=%t finalizers=%v owners=%v", o.GetDeletionTimestamp() != nil, o.GetFinalizers(), owners)
	}
	f := &fleetv1alpha1.FleetVirtualMachine{}
	switch err := in.Hub.Get(ctx, client.ObjectKeyFromObject(fvm), f); {
	case apierrors.IsNotFound(err):
		fmt.Fprintf(&b, "  FleetVirtualMachine %s gone\n", vmKey(fvm))
	case err != nil:
		fmt.Fprintf(&b, "  get FleetVirtualMachine %s: %v\n", vmKey(fvm), err)
	default:
		fmt.Fprintf(&b, "  FleetVirtualMachine %s %s spec.deletionPolicy=%q status.deletionPolicy=%q\n", vmKey(fvm), held(f),
			f.Spec.DeletionPolicy, f.Status.DeletionPolicy)
		for _, c := range f.Status.Conditions {
			fmt.Fprintf(&b, "    condition %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
		}
		for _, c := range f.Status.Clusters {
			fmt.Fprintf(&b, "    cluster %s: %s/%s ready=%t argo=%s/%s %q\n", c.Cluster, c.Phase, c.PrintableStatus, c.Ready, c.SyncStatus, c.Health, c.Message)
		}
	}
	owned := client.MatchingLabels{fleetv1alpha1.LabelFleetVMName: fvm.Name, fleetv1alpha1.LabelFleetVMNamespace: fvm.Namespace}
	var appSets argov1alpha1.ApplicationSetList
	if err := in.Hub.List(ctx, &appSets, client.InNamespace(in.ArgoNamespace), owned); err != nil {
		fmt.Fprintf(&b, "  list ApplicationSets: %v\n", err)
	}
	for i := range appSets.Items {
		a := &appSets.Items[i]
		elements := 0
		for _, g := range a.Spec.Generators {
			if g.List != nil {
				elements += len(g.List.Elements)
			}
		}
		fmt.Fprintf(&b, "  ApplicationSet %s %s list elements=%d\n", a.Name, held(a), elements)
	}
	var apps argov1alpha1.ApplicationList
	if err := in.Hub.List(ctx, &apps, client.InNamespace(in.ArgoNamespace), owned); err != nil {
		fmt.Fprintf(&b, "  list Applications: %v\n", err)
	}
	for i := range apps.Items {
		a := &apps.Items[i]
		op := "none"
		if s := a.Status.OperationState; s != nil {
			op = fmt.Sprintf("%s %q", s.Phase, s.Message)
		}
		var conds []string
		for _, c := range a.Status.Conditions {
			conds = append(conds, c.Type+": "+c.Message)
		}
		fmt.Fprintf(&b, "  Application %s %s sync=%s health=%s operation=%s conditions=%v\n", a.Name, held(a),
			a.Status.Sync.Status, a.Status.Health.Status, op, conds)
	}
	works := &unstructured.UnstructuredList{}
	works.SetGroupVersionKind(schema.GroupVersionKind{Group: "work.open-cluster-management.io", Version: "v1", Kind: "ManifestWorkList"})
	for _, sel := range []client.MatchingLabels{owned, {tenancy.LabelNamespace: fvm.Namespace}} {
		if err := in.Hub.List(ctx, works, sel); err != nil {
			fmt.Fprintf(&b, "  list ManifestWorks %v: %v\n", sel, err)
			continue
		}
		for i := range works.Items {
			w := &works.Items[i]
			fmt.Fprintf(&b, "  ManifestWork %s/%s %s\n", w.GetNamespace(), w.GetName(), held(w))
		}
	}
	var reports fleetv1alpha1.VMReportList
	if err := in.Hub.List(ctx, &reports); err != nil {
		fmt.Fprintf(&b, "  list VMReports: %v\n", err)
	}
	for _, r := range reports.Items {
		if r.Name != fvm.Namespace+"."+fvm.Name {
			continue
		}
		var vms []string
		for _, vm := range r.Spec.VMs {
			vms = append(vms, vm.Name+" "+vm.PrintableStatus)
		}
		fmt.Fprintf(&b, "  VMReport %s/%s VMs=%v\n", r.Namespace, r.Name, vms)
	}
	return b.String()
}

// leftOn lists what the namespace still holds on each cluster of the
// VM's kinds (VMs, instances, DataVolumes, claims), with what holds each:
// its finalizers, its deletion, its owners. A deletion that did not end
// says where it stuck.
func leftOn(in LifecycleInput, namespace string) string {
	var b strings.Builder
	kinds := []schema.GroupVersionKind{
		kubevirtv1.VirtualMachineGroupVersionKind, kubevirtv1.VirtualMachineInstanceGroupVersionKind,
		{Group: "cdi.kubevirt.io", Version: "v1beta1", Kind: "DataVolume"}, corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"),
	}
	for _, cluster := range slices.Sorted(maps.Keys(in.Spokes)) {
		for _, gvk := range kinds {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			err := in.Spokes[cluster].List(ctx, list, client.InNamespace(namespace))
			cancel()
			if err != nil {
				fmt.Fprintf(&b, "  %s: list %s: %v\n", cluster, gvk.Kind, err)
				continue
			}
			for _, o := range list.Items {
				var owners []string
				for _, r := range o.GetOwnerReferences() {
					owners = append(owners, r.Kind+"/"+r.Name)
				}
				fmt.Fprintf(&b, "  %s: %s %s deleting=%t finalizers=%v owners=%v\n", cluster, gvk.Kind, o.GetName(),
					o.GetDeletionTimestamp() != nil, o.GetFinalizers(), owners)
			}
		}
	}
	return b.String()
}

// waitFVM polls the FleetVirtualMachine until check returns nil.
func waitFVM(t *testing.T, in LifecycleInput, fvm *fleetv1alpha1.FleetVirtualMachine, what string, check func(*fleetv1alpha1.FleetVirtualMachine) error) *fleetv1alpha1.FleetVirtualMachine {
	t.Helper()
	got := &fleetv1alpha1.FleetVirtualMachine{}
	err := poll(t.Context(), in.Timeout, func(ctx context.Context) error {
		if err := in.Hub.Get(ctx, client.ObjectKeyFromObject(fvm), got); err != nil {
			return err
		}
		return check(got)
	})
	if err != nil {
		t.Fatalf("FleetVirtualMachine %s %s: %v\nclusters: %s", vmKey(fvm), what, err, describeClusters(got))
	}
	return got
}

func waitSpoke(t *testing.T, in LifecycleInput, cluster, what string, check func(context.Context, client.Client) error) {
	t.Helper()
	if err := poll(t.Context(), in.Timeout, func(ctx context.Context) error { return check(ctx, in.Spokes[cluster]) }); err != nil {
		t.Fatalf("%s on %s: %v", what, cluster, err)
	}
}

func describeClusters(f *fleetv1alpha1.FleetVirtualMachine) string {
	var parts []string
	for _, c := range f.Status.Clusters {
		parts = append(parts, fmt.Sprintf("%s=%s/%s argo=%s/%s %q", c.Cluster, c.Phase, c.PrintableStatus, c.SyncStatus, c.Health, c.Message))
	}
	var conds []string
	for _, c := range f.Status.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(parts, "; ") + "\nconditions: " + strings.Join(conds, "; ")
}

// stopped is an error that ends a poll at once: a state the wait must
// never pass through.
type stopped struct{ error }

// stop marks err as one that ends the poll at once.
func stop(err error) error { return stopped{err} }

// poll calls check every 250ms until it returns nil or timeout passes; the
// last error is part of the timeout's error. An error made by stop ends
// the poll at once.
func poll(ctx context.Context, timeout time.Duration, check func(context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		err := check(ctx)
		if s := (stopped{}); errors.As(err, &s) {
			return false, s
		}
		if err != nil && ctx.Err() != nil {
			// The deadline cut this check short: keep the reason of the
			// previous one.
			return false, nil //nolint:nilerr // keep polling: the deadline ends the wait, last holds the reason
		}
		last = err
		return err == nil, nil
	})
	if s := (stopped{}); errors.As(err, &s) {
		return s.error
	}
	if err != nil && last != nil {
		return fmt.Errorf("after %s: %w", timeout, last)
	}
	return err
}

// ExamplesInput is what ExamplesSpec needs.
type ExamplesInput struct {
	// Hub is an admin client of the hub.
	Hub client.Client
	// Examples are the FleetVirtualMachines to apply (their namespaces are
	// created if missing).
	Examples []*fleetv1alpha1.FleetVirtualMachine
	// Clusters is how many clusters each example runs on, by name; the
	// wait lasts until it does (an example may be Ready on its first
	// clusters while the others are still being decided).
	Clusters map[string]int
	// Timeout bounds the wait for all of them to be Ready.
	Timeout time.Duration
}

// ExamplesSpec applies the examples and waits until every one is Ready on
// every cluster it is decided for (as many as in.Clusters says), each
// cluster Running with node and IP, synced and healthy in Argo CD. It returns them as the hub holds them.
func ExamplesSpec(t *testing.T, in ExamplesInput) []*fleetv1alpha1.FleetVirtualMachine {
	t.Helper()
	ctx := t.Context()
	for _, fvm := range in.Examples {
		if err := tenantNamespace(ctx, in.Hub, fvm.Namespace); err != nil {
			t.Fatal(err)
		}
		if err := in.Hub.Create(ctx, fvm.DeepCopy()); err != nil {
			t.Fatalf("create FleetVirtualMachine %s: %v", vmKey(fvm), err)
		}
	}
	lin := LifecycleInput{Hub: in.Hub, Timeout: in.Timeout}
	out := make([]*fleetv1alpha1.FleetVirtualMachine, 0, len(in.Examples))
	for _, fvm := range in.Examples {
		out = append(out, waitFVM(t, lin, fvm, "Ready", func(f *fleetv1alpha1.FleetVirtualMachine) error {
			if err := readyWithReason(f, fleetv1alpha1.ReasonAllReady); err != nil {
				return err
			}
			if want, ok := in.Clusters[f.Name]; ok && len(f.Status.Clusters) != want {
				return fmt.Errorf("on %d clusters, want %d", len(f.Status.Clusters), want)
			}
			if len(f.Status.Clusters) == 0 {
				return fmt.Errorf("on no cluster")
			}
			for _, c := range f.Status.Clusters {
				if c.Node == "" || len(c.IPAddresses) == 0 || c.SyncStatus != "Synced" || c.Health != "Healthy" {
					return fmt.Errorf("cluster %s: node %q, IPs %v, Argo CD %s/%s", c.Cluster, c.Node, c.IPAddresses, c.SyncStatus, c.Health)
				}
			}
			return nil
		}))
	}
	return out
}

// tenantNamespace prepares a namespace for FleetVirtualMachines as a hub
// operator does for a team: the namespace, and a ManagedClusterSetBinding
// of the default cluster set in it, so its FleetVMs may use that set.
func tenantNamespace(ctx context.Context, hub client.Client, ns string) error {
	if err := hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	b := &clusterv1beta2.ManagedClusterSetBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns},
		Spec:       clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: "default"},
	}
	if err := hub.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("bind cluster set default to namespace %s: %w", ns, err)
	}
	return nil
}
