package inventory

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/test/agenttest"
)

func lookupIn(dvs ...*cdiv1beta1.DataVolume) LookupDataVolume {
	return func(ns, name string) (*cdiv1beta1.DataVolume, bool) {
		for _, dv := range dvs {
			if dv.Namespace == ns && dv.Name == name {
				return dv, true
			}
		}
		return nil, false
	}
}

func registry(url string) cdiv1beta1.DataVolumeSpec {
	return cdiv1beta1.DataVolumeSpec{Source: &cdiv1beta1.DataVolumeSource{Registry: &cdiv1beta1.DataVolumeSourceRegistry{URL: ptr.To(url)}}}
}

func TestImagesOf(t *testing.T) {
	shared := &cdiv1beta1.DataVolume{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "shared-disk"},
		Spec:       cdiv1beta1.DataVolumeSpec{Source: &cdiv1beta1.DataVolumeSource{S3: &cdiv1beta1.DataVolumeSourceS3{URL: "s3://bucket/win.qcow2"}}},
	}
	blank := &cdiv1beta1.DataVolume{
		ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "scratch"},
		Spec:       cdiv1beta1.DataVolumeSpec{Source: &cdiv1beta1.DataVolumeSource{Blank: &cdiv1beta1.DataVolumeBlankImage{}}},
	}
	cases := map[string]struct {
		vm   *kubevirtv1.VirtualMachine
		want []string
	}{
		"nothing": {vm: agenttest.VM("apps", "a"), want: nil},
		"datasource defaults to the VM's namespace, explicit namespace kept": {
			vm: agenttest.VM("apps", "a",
				agenttest.DataVolumeTemplate("root", agenttest.DataSourceRef("", "rhel9")),
				agenttest.DataVolumeTemplate("data", agenttest.DataSourceRef("os-images", "win10"))),
			want: []string{"datasource:apps/rhel9", "datasource:os-images/win10"},
		},
		"template sources": {
			vm: agenttest.VM("apps", "a",
				agenttest.DataVolumeTemplate("h", agenttest.HTTPSource("https://x/y.img")),
				agenttest.DataVolumeTemplate("r", registry("docker://quay.io/c/d:1")),
				agenttest.DataVolumeTemplate("p", cdiv1beta1.DataVolumeSpec{Source: &cdiv1beta1.DataVolumeSource{PVC: &cdiv1beta1.DataVolumeSourcePVC{Namespace: "golden", Name: "base"}}}),
				agenttest.DataVolumeTemplate("b", cdiv1beta1.DataVolumeSpec{Source: &cdiv1beta1.DataVolumeSource{Blank: &cdiv1beta1.DataVolumeBlankImage{}}})),
			want: []string{"http:https://x/y.img", "pvc:golden/base", "registry:docker://quay.io/c/d:1"},
		},
		"volumes, foreign DataVolumes looked up, duplicates once": {
			vm: agenttest.VM("apps", "a",
				agenttest.ContainerDisk("cd", "quay.io/containerdisks/fedora:40"),
				agenttest.ContainerDisk("cd2", "quay.io/containerdisks/fedora:40"),
				agenttest.PVC("claim", "db-data"),
				agenttest.DataVolume("shared", "shared-disk"),
				agenttest.DataVolume("blank", "scratch"),
				agenttest.DataVolume("missing", "gone")),
			want: []string{"containerdisk:quay.io/containerdisks/fedora:40", "pvc:apps/db-data", "pvc:apps/gone", "pvc:apps/scratch", "s3:s3://bucket/win.qcow2"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ImagesOf(tc.vm, lookupIn(shared, blank))); diff != "" {
				t.Errorf("ImagesOf (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestCount(t *testing.T) {
	rhel := agenttest.DataVolumeTemplate("root", agenttest.DataSourceRef("os-images", "rhel9"))
	var many []*kubevirtv1.VirtualMachine
	for i := range 12 {
		many = append(many, agenttest.VM("bulk", fmt.Sprintf("vm-%02d", i), agenttest.ContainerDisk("cd", "quay.io/x:1")))
	}
	cases := map[string]struct {
		vms  []*kubevirtv1.VirtualMachine
		want []fleetv1alpha1.ImageUse
	}{
		"no VMs": {want: []fleetv1alpha1.ImageUse{}},
		"fleet and non-fleet VMs counted alike": {
			vms: []*kubevirtv1.VirtualMachine{
				agenttest.VM("apps", "fleet-1", rhel, agenttest.FleetVM("team", "web")),
				agenttest.VM("other", "hand-made", rhel, agenttest.PVC("d", "data")),
				agenttest.VM("apps", "fleet-2", agenttest.FleetVM("team", "db"), agenttest.ContainerDisk("cd", "quay.io/x:1")),
			},
			want: []fleetv1alpha1.ImageUse{
				{Image: "containerdisk:quay.io/x:1", References: 1, Users: []string{"apps/fleet-2"}},
				{Image: "datasource:os-images/rhel9", References: 2, Users: []string{"apps/fleet-1", "other/hand-made"}},
				{Image: "pvc:other/data", References: 1, Users: []string{"other/hand-made"}},
			},
		},
		"users capped at ten, sorted": {
			vms: many,
			want: []fleetv1alpha1.ImageUse{{Image: "containerdisk:quay.io/x:1", References: 12, Users: []string{
				"bulk/vm-00", "bulk/vm-01", "bulk/vm-02", "bulk/vm-03", "bulk/vm-04",
				"bulk/vm-05", "bulk/vm-06", "bulk/vm-07", "bulk/vm-08", "bulk/vm-09",
			}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var vms []kubevirtv1.VirtualMachine
			for _, vm := range tc.vms {
				vms = append(vms, *vm)
			}
			if diff := cmp.Diff(tc.want, Count(vms, nil)); diff != "" {
				t.Errorf("Count (-want,+got):\n%s", diff)
			}
		})
	}
}
