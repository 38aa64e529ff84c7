package webhook

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/diskimage"
)

// inventory is cluster's ImageInventory: each image ID with its users.
func inventory(cluster string, uses ...fleetv1alpha1.ImageUse) *fleetv1alpha1.ImageInventory {
	return &fleetv1alpha1.ImageInventory{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: fleetv1alpha1.ImageInventoryName},
		Spec:       fleetv1alpha1.ImageInventorySpec{Images: uses},
	}
}

func imageID(ns, name string) string {
	return diskimage.ImageID(testImageNamespace, types.NamespacedName{Namespace: ns, Name: name})
}

// TestValidateDeleteFleetDiskImage: a FleetDiskImage in use cannot be
// deleted, and the refusal says by whom, naming only VMs of the image's
// own namespace; an unused one, or one whose name only another namespace
// uses, can be; when usage cannot be read, the answer is no.
func TestValidateDeleteFleetDiskImage(t *testing.T) {
	image := &fleetv1alpha1.FleetDiskImage{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "win10"}}
	listing := func(ns, name string) *fleetv1alpha1.FleetVirtualMachine {
		f := inlineFVM(name, "", "")
		f.Namespace = ns
		f.Spec.DiskImages = []fleetv1alpha1.DiskImageReference{{Name: "win10"}}
		return f
	}
	cases := map[string]struct {
		objs    []client.Object
		readErr error
		// want: words of the refusal; none: the deletion is allowed.
		want    []string
		wantNot []string
	}{
		"unused": {
			objs: []client.Object{inventory("prod-a", fleetv1alpha1.ImageUse{Image: imageID("team-a", "other"), References: 3})},
		},
		"same name in another namespace does not hold it": {
			objs: []client.Object{
				listing("team-b", "db"),
				inventory("prod-a", fleetv1alpha1.ImageUse{Image: imageID("team-b", "win10"), References: 1, Users: []string{"team-b/db"}}),
			},
		},
		"zero references do not hold it": {
			objs: []client.Object{inventory("prod-a", fleetv1alpha1.ImageUse{Image: imageID("team-a", "win10")})},
		},
		"listed in a FleetVirtualMachine's spec.diskImages": {
			objs: []client.Object{listing("team-a", "desktop")},
			want: []string{"in use", "1 FleetVirtualMachines list it in spec.diskImages", "team-a/desktop"},
		},
		"running VMs, only the own namespace's named": {
			objs: []client.Object{
				inventory("prod-a", fleetv1alpha1.ImageUse{Image: imageID("team-a", "win10"), References: 2, Users: []string{"team-a/desktop", "team-b/secret-vm"}}),
				inventory("dev-a", fleetv1alpha1.ImageUse{Image: imageID("team-a", "win10"), References: 1, Users: []string{"team-a/test"}}),
			},
			want:    []string{"3 VMs on 2 clusters", "prod-a: team-a/desktop", "dev-a: team-a/test", "1 of other namespaces"},
			wantNot: []string{"secret-vm", "team-b"},
		},
		"usage unreadable": {
			readErr: errors.New("etcd is down"),
			want:    []string{"cannot tell whether FleetDiskImage team-a/win10 is in use", "etcd is down"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(tc.objs...)
			if tc.readErr != nil {
				b = b.WithInterceptorFuncs(interceptor.Funcs{
					List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
						return tc.readErr
					},
				})
			}
			v := &FleetDiskImageValidator{Reader: b.Build(), ImageNamespace: testImageNamespace}
			_, err := v.ValidateDelete(context.Background(), image)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("deletion refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("deletion allowed, want a refusal with %q", tc.want)
			}
			if tc.readErr == nil && !apierrors.IsForbidden(err) {
				t.Errorf("refusal is %v, want Forbidden", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("refusal %q does not say %q", err, w)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(err.Error(), w) {
					t.Errorf("refusal %q names %q, a VM of another namespace", err, w)
				}
			}
		})
	}
}
