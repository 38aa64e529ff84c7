package fleetdiskimage

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/diskimage"
)

// TestReadUsage: the FleetVirtualMachines that list an image are the
// same found through the hub cache's index as by listing the namespace
// (the webhook's way), and only they: not one listing another image, not
// one of another namespace listing an image of the same name. The
// inventories count the image's VMs per cluster. Read through the index,
// the namespace is not listed whole: a reader without the index fails.
func TestReadUsage(t *testing.T) {
	const images = "vm-images"
	key := types.NamespacedName{Namespace: "team", Name: "rhel9"}
	fvm := func(ns, name string, diskImages ...string) *fleetv1alpha1.FleetVirtualMachine {
		f := &fleetv1alpha1.FleetVirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		for _, d := range diskImages {
			f.Spec.DiskImages = append(f.Spec.DiskImages, fleetv1alpha1.DiskImageReference{Name: d})
		}
		return f
	}
	inventory := func(cluster string, uses ...fleetv1alpha1.ImageUse) *fleetv1alpha1.ImageInventory {
		return &fleetv1alpha1.ImageInventory{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: fleetv1alpha1.ImageInventoryName},
			Spec: fleetv1alpha1.ImageInventorySpec{Images: uses}}
	}
	id := diskimage.ImageID(images, key)
	objs := []client.Object{
		fvm("team", "a", "rhel9"),
		fvm("team", "b", "fedora", "rhel9"),
		fvm("team", "c", "fedora"),
		fvm("team-b", "d", "rhel9"),
		inventory("c1", fleetv1alpha1.ImageUse{Image: id, References: 2, Users: []string{"team/a", "other/x"}}),
		inventory("c2", fleetv1alpha1.ImageUse{Image: diskimage.ImageID(images, types.NamespacedName{Namespace: "team", Name: "fedora"}), References: 1}),
	}
	s := runtime.NewScheme()
	if err := fleetv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	indexed := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithIndex(&fleetv1alpha1.FleetVirtualMachine{}, IndexDiskImage, diskImagesOf).Build()
	plain := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()

	want := Usage{FleetVMs: []string{"team/a", "team/b"}, ByCluster: map[string]int32{"c1": 2},
		Users: []string{"c1: team/a"}, OtherNamespaces: 1}
	for name, tc := range map[string]struct {
		c       client.Reader
		indexed bool
	}{"through the index": {indexed, true}, "listing the namespace": {plain, false}, "listing the namespace, index present": {indexed, false}} {
		got, err := ReadUsage(t.Context(), tc.c, tc.indexed, images, key)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got.Inventories = nil
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: usage (-want,+got):\n%s", name, diff)
		}
	}
	if _, err := ReadUsage(t.Context(), plain, true, images, key); err == nil {
		t.Error("read through an index the reader does not have: no error, so the namespace was listed whole")
	}
}
