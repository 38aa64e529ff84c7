package fleet

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/diskimage"
	"github.com/fleetvm/fleetvm/test/agenttest"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/utiltesting"
)

// newImage returns a FleetDiskImage importing from an http URL.
func newImage(name string, retention time.Duration) *fleetv1alpha1.FleetDiskImage {
	return &fleetv1alpha1.FleetDiskImage{
		ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: name},
		Spec: fleetv1alpha1.FleetDiskImageSpec{
			Source:    fleetv1alpha1.DiskImageSource{HTTP: &fleetv1alpha1.HTTPSource{URL: "https://images.example.com/" + name + ".qcow2"}},
			Storage:   fleetv1alpha1.DiskImageStorage{Size: resource.MustParse("10Gi")},
			Retention: &metav1.Duration{Duration: retention},
		},
	}
}

// imageFVM returns a FleetVirtualMachine on one cluster booting from the
// FleetDiskImage image through a dataVolumeTemplate.
func imageFVM(name, image string) *fleetv1alpha1.FleetVirtualMachine {
	fvm := utiltesting.MakeFleetVM("vms", name).Clusters(1).VM(1, "1Gi").DeletionPolicy(fleetv1alpha1.DeletionPolicyDelete).Obj()
	var vm map[string]any
	if err := json.Unmarshal(fvm.Spec.Template.Raw, &vm); err != nil {
		panic(err)
	}
	spec := vm["spec"].(map[string]any)
	spec["dataVolumeTemplates"] = []any{map[string]any{
		"metadata": map[string]any{"name": name + "-root"},
		"spec": map[string]any{
			"sourceRef": map[string]any{"kind": "DataSource", "name": image},
			"storage":   map[string]any{"resources": map[string]any{"requests": map[string]any{"storage": "10Gi"}}},
		},
	}}
	tmpl := spec["template"].(map[string]any)["spec"].(map[string]any)
	tmpl["domain"].(map[string]any)["devices"] = map[string]any{"disks": []any{map[string]any{"name": "root", "disk": map[string]any{"bus": "virtio"}}}}
	tmpl["volumes"] = []any{map[string]any{"name": "root", "dataVolume": map[string]any{"name": name + "-root"}}}
	raw, err := json.Marshal(vm)
	if err != nil {
		panic(err)
	}
	fvm.Spec.Template = &runtime.RawExtension{Raw: raw}
	fvm.Spec.DiskImages = []fleetv1alpha1.DiskImageReference{{Name: image}}
	return fvm
}

func createImage(t *testing.T, fdi *fleetv1alpha1.FleetDiskImage) {
	t.Helper()
	if err := fleet.Hub.EnsureNamespace(t.Context(), fdi.Namespace); err != nil {
		t.Fatal(err)
	}
	if err := fleet.Hub.Client.Create(t.Context(), fdi); err != nil {
		t.Fatalf("create FleetDiskImage: %v", err)
	}
	key := client.ObjectKeyFromObject(fdi)
	t.Cleanup(func() {
		// Best effort: the test may have deleted it; only an image nobody
		// uses can go.
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		_ = fleet.Hub.Client.Delete(ctx, &fleetv1alpha1.FleetDiskImage{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}})
	})
}

func waitImage(t *testing.T, key client.ObjectKey, what string, cond func(*fleetv1alpha1.FleetDiskImage) bool) *fleetv1alpha1.FleetDiskImage {
	t.Helper()
	fdi := &fleetv1alpha1.FleetDiskImage{}
	err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		if err := fleet.Hub.Client.Get(t.Context(), key, fdi); err != nil {
			return false, err
		}
		return cond(fdi), nil
	})
	if err != nil {
		b, _ := json.MarshalIndent(fdi.Status, "", "  ")
		t.Fatalf("%s: %v\nstatus: %s", what, err, b)
	}
	return fdi
}

func imageEntry(fdi *fleetv1alpha1.FleetDiskImage, cluster string) (fleetv1alpha1.ImageClusterStatus, bool) {
	for _, c := range fdi.Status.Clusters {
		if c.Cluster == cluster {
			return c, true
		}
	}
	return fleetv1alpha1.ImageClusterStatus{}, false
}

// TestVMWaitsForItsImage: a FleetVM whose image does not exist yet waits
// (WaitingForImage, and KubeVirt does not start the VM); once the image is
// created it is imported on the VM's cluster, and the VM starts.
func TestVMWaitsForItsImage(t *testing.T) {
	fvm := imageFVM("booted", "rhel9")
	create(t, fvm)
	key := client.ObjectKeyFromObject(fvm)

	got := waitFVM(t, key, "waiting for its image", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return len(f.Status.Clusters) == 1 && f.Status.Clusters[0].Phase == fleetv1alpha1.ClusterPhaseWaitingForImage
	})
	cluster := got.Status.Clusters[0].Cluster
	if msg := got.Status.Clusters[0].Message; !strings.Contains(msg, "rhel9") {
		t.Errorf("WaitingForImage message does not name the image: %q", msg)
	}
	// On the cluster the VM clones the image's DataSource and waits for it.
	spoke := fleet.Spoke(cluster)
	vm := &kubevirtv1.VirtualMachine{}
	err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		err := spoke.Client.Get(t.Context(), key, vm)
		return err == nil, client.IgnoreNotFound(err)
	})
	if err != nil {
		t.Fatalf("VM on %s: %v", cluster, err)
	}
	ref := vm.Spec.DataVolumeTemplates[0].Spec.SourceRef
	wantName := diskimage.ObjectName(types.NamespacedName{Namespace: "vms", Name: "rhel9"})
	if ref == nil || ref.Namespace == nil || *ref.Namespace != diskimage.DefaultNamespace || ref.Name != wantName {
		t.Fatalf("dataVolumeTemplate sourceRef %+v, want DataSource %s/%s", ref, diskimage.DefaultNamespace, wantName)
	}
	if err := spoke.Client.Get(t.Context(), key, &kubevirtv1.VirtualMachineInstance{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the VM started before its image exists (%v)", err)
	}

	image := newImage("rhel9", time.Hour)
	createImage(t, image)
	// The reference comes from the agent's image inventory, which may
	// reach the hub after the import's Ready: wait for both.
	fdi := waitImage(t, client.ObjectKeyFromObject(image), "ready and referenced on the VM's cluster", func(f *fleetv1alpha1.FleetDiskImage) bool {
		e, ok := imageEntry(f, cluster)
		return ok && e.Phase == fleetv1alpha1.ImagePhaseReady && e.References > 0
	})
	if e, _ := imageEntry(fdi, cluster); e.References != 1 || fdi.Status.Totals.Ready != 1 || e.LastReferencedTime != nil {
		t.Errorf("entry %+v totals %+v, want 1 reference, 1 ready cluster, no lastReferencedTime while in use", e, fdi.Status.Totals)
	}
	// Reconciled many times while the import progressed, the ManifestWork
	// was written once: its spec never drifted from what the hub wants.
	var work workv1.ManifestWork
	if err := fleet.Hub.Client.Get(t.Context(), client.ObjectKey{Namespace: cluster, Name: diskimage.WorkName(client.ObjectKeyFromObject(image))}, &work); err != nil {
		t.Fatal(err)
	}
	if work.Generation != 1 {
		t.Errorf("ManifestWork generation %d, want 1 (rewritten without a change)", work.Generation)
	}
	if len(fdi.Status.Clusters) != 1 {
		t.Errorf("image distributed to %d clusters, want only the VM's: %+v", len(fdi.Status.Clusters), fdi.Status.Clusters)
	}
	var dv cdiv1beta1.DataVolume
	if err := spoke.Client.Get(t.Context(), client.ObjectKey{Namespace: diskimage.DefaultNamespace, Name: wantName}, &dv); err != nil {
		t.Fatalf("image DataVolume on %s: %v", cluster, err)
	}
	if dv.Spec.Source == nil || dv.Spec.Source.HTTP == nil || dv.Spec.Source.HTTP.URL != image.Spec.Source.HTTP.URL {
		t.Errorf("DataVolume source %+v", dv.Spec.Source)
	}
	waitFVM(t, key, "running once the image is ready", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return conditionIs(f, fleetv1alpha1.ConditionReady, metav1.ConditionTrue, fleetv1alpha1.ReasonAllReady)
	})
}

// TestImageInUseCannotBeDeleted: references are counted with a VM FleetVM
// does not manage; deletion is refused while anything uses the image, and
// allowed, removing it from the clusters, once nothing does.
func TestImageInUseCannotBeDeleted(t *testing.T) {
	image := newImage("win10", time.Hour)
	createImage(t, image)
	imageKey := client.ObjectKeyFromObject(image)
	fvm := imageFVM("desktop", "win10")
	create(t, fvm)
	got := waitFVM(t, client.ObjectKeyFromObject(fvm), "desktop ready", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return conditionIs(f, fleetv1alpha1.ConditionReady, metav1.ConditionTrue, fleetv1alpha1.ReasonAllReady)
	})
	cluster := got.Status.Clusters[0].Cluster
	spoke := fleet.Spoke(cluster)

	// A VM nobody told FleetVM about clones the same image.
	dsName := diskimage.ObjectName(imageKey)
	if err := spoke.EnsureNamespace(t.Context(), "legacy"); err != nil {
		t.Fatal(err)
	}
	hand := agenttest.VM("legacy", "by-hand", agenttest.DataVolumeTemplate("by-hand-root", agenttest.DataSourceRef(diskimage.DefaultNamespace, dsName)),
		agenttest.RunStrategy(kubevirtv1.RunStrategyHalted))
	if err := spoke.Client.Create(t.Context(), hand); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = spoke.Client.Delete(context.Background(), hand) })
	fdi := waitImage(t, imageKey, "two references on the cluster", func(f *fleetv1alpha1.FleetDiskImage) bool {
		e, ok := imageEntry(f, cluster)
		return ok && e.References == 2 && f.Status.Totals.References == 2
	})
	// Both count; only the image's own namespace's VM is named: the other
	// namespace's is never shown to this one.
	if e, _ := imageEntry(fdi, cluster); contains(e.Users, "legacy/by-hand") || !contains(e.Users, "vms/desktop") {
		t.Errorf("users %v, want vms/desktop and not legacy/by-hand", e.Users)
	}
	if c := meta.FindStatusCondition(fdi.Status.Conditions, fleetv1alpha1.ConditionInUse); c == nil || c.Status != metav1.ConditionTrue ||
		!strings.Contains(c.Message, "vms/desktop; 1 of other namespaces") || strings.Contains(c.Message, "legacy") {
		t.Errorf("InUse condition %+v does not name its namespace's users and count the others", c)
	}

	// Refused, with the counts and this namespace's users.
	err := fleet.Hub.Client.Delete(t.Context(), fdi)
	if err == nil || !apierrors.IsForbidden(err) {
		t.Fatalf("delete of an image in use: %v, want Forbidden", err)
	}
	for _, want := range []string{"2 VMs on 1 clusters", "vms/desktop", "1 of other namespaces"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "legacy") {
		t.Errorf("refusal %q names another namespace's VM", err)
	}

	// Nothing uses it any more: deletion is allowed and removes it from
	// the cluster.
	if err := spoke.Client.Delete(t.Context(), hand); err != nil {
		t.Fatal(err)
	}
	if err := fleet.Hub.Client.Delete(t.Context(), got); err != nil {
		t.Fatal(err)
	}
	waitImage(t, imageKey, "unused", func(f *fleetv1alpha1.FleetDiskImage) bool {
		return meta.IsStatusConditionFalse(f.Status.Conditions, fleetv1alpha1.ConditionInUse)
	})
	err = fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		err := fleet.Hub.Client.Delete(t.Context(), &fleetv1alpha1.FleetDiskImage{ObjectMeta: metav1.ObjectMeta{Namespace: imageKey.Namespace, Name: imageKey.Name}})
		return err == nil || apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("delete of an unused image refused: %v", err)
	}
	err = fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		hubGone := apierrors.IsNotFound(fleet.Hub.Client.Get(t.Context(), imageKey, &fleetv1alpha1.FleetDiskImage{}))
		spokeGone := apierrors.IsNotFound(spoke.Client.Get(t.Context(), client.ObjectKey{Namespace: diskimage.DefaultNamespace, Name: dsName}, &cdiv1beta1.DataVolume{}))
		return hubGone && spokeGone, nil
	})
	if err != nil {
		t.Errorf("the deleted image is not gone from the hub and the cluster: %v", err)
	}
}

// TestPruneAfterRetention: an image nobody uses on a cluster is removed
// from it once the retention period is over, and never while that
// cluster's inventory is stale.
func TestPruneAfterRetention(t *testing.T) {
	t.Cleanup(func() { imageClock.SetTime(time.Now()) })
	image := newImage("tools", time.Minute)
	createImage(t, image)
	imageKey := client.ObjectKeyFromObject(image)
	fvm := imageFVM("toolbox", "tools")
	create(t, fvm)
	got := waitFVM(t, client.ObjectKeyFromObject(fvm), "toolbox ready", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return conditionIs(f, fleetv1alpha1.ConditionReady, metav1.ConditionTrue, fleetv1alpha1.ReasonAllReady)
	})
	cluster := got.Status.Clusters[0].Cluster
	workKey := client.ObjectKey{Namespace: cluster, Name: diskimage.WorkName(imageKey)}

	// The VM goes; the image stays for its retention period.
	if err := fleet.Hub.Client.Delete(t.Context(), got); err != nil {
		t.Fatal(err)
	}
	waitImage(t, imageKey, "unused but kept", func(f *fleetv1alpha1.FleetDiskImage) bool {
		e, ok := imageEntry(f, cluster)
		return ok && e.References == 0 && strings.Contains(e.Message, "pruned after the retention period")
	})

	// Far past the retention period, but the cluster's inventory was last
	// confirmed an hour ago by this clock: it is stale, nothing is pruned.
	imageClock.SetTime(time.Now().Add(time.Hour))
	touch(t, imageKey)
	waitImage(t, imageKey, "not pruned on a stale inventory", func(f *fleetv1alpha1.FleetDiskImage) bool {
		e, ok := imageEntry(f, cluster)
		return ok && strings.Contains(e.Message, "stale")
	})
	if err := fleet.Hub.Client.Get(t.Context(), workKey, &workv1.ManifestWork{}); err != nil {
		t.Fatalf("ManifestWork of a stale cluster: %v", err)
	}

	// Two minutes on: past the one-minute retention, inventory fresh.
	imageClock.SetTime(time.Now().Add(2 * time.Minute))
	touch(t, imageKey)
	err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		return apierrors.IsNotFound(fleet.Hub.Client.Get(t.Context(), workKey, &workv1.ManifestWork{})), nil
	})
	if err != nil {
		t.Fatalf("not pruned after retention: %v", err)
	}
	err = fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		err := fleet.Spoke(cluster).Client.Get(t.Context(), client.ObjectKey{Namespace: diskimage.DefaultNamespace, Name: diskimage.ObjectName(imageKey)}, &cdiv1beta1.DataSource{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Errorf("pruned image still on the cluster: %v", err)
	}
	// The image namespace, shared by every image, stays.
	if err := fleet.Spoke(cluster).Client.Get(t.Context(), client.ObjectKey{Name: diskimage.DefaultNamespace}, &corev1.Namespace{}); err != nil {
		t.Errorf("image namespace: %v", err)
	}
}

// touch changes an annotation so the controller looks again after the test
// moved the clock.
func touch(t *testing.T, key client.ObjectKey) {
	t.Helper()
	patch := []byte(`{"metadata":{"annotations":{"test.fleetvm.io/touched":"` + time.Now().Format(time.RFC3339Nano) + `"}}}`)
	if err := fleet.Hub.Client.Patch(t.Context(), &fleetv1alpha1.FleetDiskImage{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}},
		client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestImageDeletionFollowsPruneRules: an unused FleetDiskImage deleted
// while its cluster's inventory is stale keeps its copy there (the
// ManifestWork, and the DataSource on the spoke), and says so; a VM that
// starts using the image meanwhile keeps it too; once the inventory is
// fresh and nothing references the image there, the deletion completes
// and the copy is gone from the cluster.
func TestImageDeletionFollowsPruneRules(t *testing.T) {
	t.Cleanup(func() { imageClock.SetTime(time.Now()) })
	image := newImage("golden", time.Hour)
	createImage(t, image)
	imageKey := client.ObjectKeyFromObject(image)
	fvm := imageFVM("goldie", "golden")
	create(t, fvm)
	got := waitFVM(t, client.ObjectKeyFromObject(fvm), "goldie ready", func(f *fleetv1alpha1.FleetVirtualMachine) bool {
		return conditionIs(f, fleetv1alpha1.ConditionReady, metav1.ConditionTrue, fleetv1alpha1.ReasonAllReady)
	})
	cluster := got.Status.Clusters[0].Cluster
	spoke := fleet.Spoke(cluster)
	workKey := client.ObjectKey{Namespace: cluster, Name: diskimage.WorkName(imageKey)}
	dsKey := client.ObjectKey{Namespace: diskimage.DefaultNamespace, Name: diskimage.ObjectName(imageKey)}
	copyThere := func(when string) {
		t.Helper()
		if err := fleet.Hub.Client.Get(t.Context(), workKey, &workv1.ManifestWork{}); err != nil {
			t.Fatalf("%s: ManifestWork %s: %v", when, workKey, err)
		}
		if err := spoke.Client.Get(t.Context(), dsKey, &cdiv1beta1.DataSource{}); err != nil {
			t.Fatalf("%s: DataSource %s on %s: %v", when, dsKey, cluster, err)
		}
	}

	// The VM goes; nothing uses the image.
	if err := fleet.Hub.Client.Delete(t.Context(), got); err != nil {
		t.Fatal(err)
	}
	if err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		return apierrors.IsNotFound(fleet.Hub.Client.Get(t.Context(), client.ObjectKeyFromObject(fvm), &fleetv1alpha1.FleetVirtualMachine{})), nil
	}); err != nil {
		t.Fatalf("FleetVirtualMachine not gone: %v", err)
	}
	waitImage(t, imageKey, "unused", func(f *fleetv1alpha1.FleetDiskImage) bool {
		return meta.IsStatusConditionFalse(f.Status.Conditions, fleetv1alpha1.ConditionInUse)
	})

	// An hour on by the hub's clock: the cluster's inventory is stale.
	// The image is deleted (admission allows it: nothing counts a
	// reference); its copy stays, and the image says why.
	imageClock.SetTime(time.Now().Add(time.Hour))
	if err := fleet.Hub.Client.Delete(t.Context(), image); err != nil {
		t.Fatalf("delete the unused image: %v", err)
	}
	fdi := waitImage(t, imageKey, "deletion waiting for the stale cluster", func(f *fleetv1alpha1.FleetDiskImage) bool {
		c := meta.FindStatusCondition(f.Status.Conditions, fleetv1alpha1.ConditionReady)
		return c != nil && c.Reason == fleetv1alpha1.ReasonDeleting && strings.Contains(c.Message, "1 clusters")
	})
	c := meta.FindStatusCondition(fdi.Status.Conditions, fleetv1alpha1.ConditionReady)
	if !strings.Contains(c.Message, cluster+" (") || !strings.Contains(c.Message, "stale") {
		t.Errorf("Ready %q does not name %s and its stale inventory", c.Message, cluster)
	}
	if e, ok := imageEntry(fdi, cluster); !ok || e.Phase == fleetv1alpha1.ImagePhasePruning || !strings.Contains(e.Message, "stale") {
		t.Errorf("entry of %s = %+v, want kept, saying the inventory is stale", cluster, e)
	}
	copyThere("deleted on a stale inventory")

	// Meanwhile a VM on that cluster starts using the image: its agent
	// counts it, and the copy stays while it does, whatever the clock.
	if err := spoke.EnsureNamespace(t.Context(), "legacy"); err != nil {
		t.Fatal(err)
	}
	hand := agenttest.VM("legacy", "late-user", agenttest.DataVolumeTemplate("late-user-root", agenttest.DataSourceRef(dsKey.Namespace, dsKey.Name)),
		agenttest.RunStrategy(kubevirtv1.RunStrategyHalted))
	if err := spoke.Client.Create(t.Context(), hand); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = spoke.Client.Delete(context.Background(), hand) })
	waitImage(t, imageKey, "deletion waiting for the VM using it", func(f *fleetv1alpha1.FleetDiskImage) bool {
		c := meta.FindStatusCondition(f.Status.Conditions, fleetv1alpha1.ConditionReady)
		return c != nil && c.Reason == fleetv1alpha1.ReasonDeleting && strings.Contains(c.Message, "waiting until nothing uses the image")
	})
	copyThere("in use")

	// The VM goes; the inventory that says so is still stale by the hub's
	// clock: the copy stays.
	if err := spoke.Client.Delete(t.Context(), hand); err != nil {
		t.Fatal(err)
	}
	waitImage(t, imageKey, "unused again, waiting for the stale cluster", func(f *fleetv1alpha1.FleetDiskImage) bool {
		c := meta.FindStatusCondition(f.Status.Conditions, fleetv1alpha1.ConditionReady)
		e, _ := imageEntry(f, cluster)
		return c != nil && c.Reason == fleetv1alpha1.ReasonDeleting && strings.Contains(c.Message, "stale") && e.References == 0
	})
	copyThere("unused again on a stale inventory")

	// The hub's clock back to now: the inventory is fresh, nothing
	// references the image there: the deletion completes.
	imageClock.SetTime(time.Now())
	// Looked at again now, not at the next minute's recheck (the image may
	// be gone already).
	patch := []byte(`{"metadata":{"annotations":{"test.fleetvm.io/touched":"` + time.Now().Format(time.RFC3339Nano) + `"}}}`)
	if err := fleet.Hub.Client.Patch(t.Context(), &fleetv1alpha1.FleetDiskImage{ObjectMeta: metav1.ObjectMeta{Namespace: imageKey.Namespace, Name: imageKey.Name}},
		client.RawPatch(types.MergePatchType, patch)); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	err := fleetenv.Eventually(t.Context(), wait, func() (bool, error) {
		hubGone := apierrors.IsNotFound(fleet.Hub.Client.Get(t.Context(), imageKey, &fleetv1alpha1.FleetDiskImage{}))
		workGone := apierrors.IsNotFound(fleet.Hub.Client.Get(t.Context(), workKey, &workv1.ManifestWork{}))
		spokeGone := apierrors.IsNotFound(spoke.Client.Get(t.Context(), dsKey, &cdiv1beta1.DataSource{}))
		return hubGone && workGone && spokeGone, nil
	})
	if err != nil {
		t.Errorf("the deleted image is not gone from the hub and the cluster once unused on a fresh inventory: %v", err)
	}
}
