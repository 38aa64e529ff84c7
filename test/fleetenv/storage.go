package fleetenv

import (
	"context"
	"fmt"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// StorageClass describes a spoke StorageClass. Spokes have no
// provisioner: the KubeVirt simulator plays CDI's handling of its binding
// mode.
type StorageClass struct {
	Name string
	// Mode is the volumeBindingMode; Immediate when empty.
	Mode storagev1.VolumeBindingMode
	// Default makes it the cluster's default StorageClass (the annotation
	// storageclass.kubernetes.io/is-default-class), which DataVolumes that
	// name none get. StorageClasses are cluster-wide: a test that makes a
	// default changes every other test's DataVolumes on that spoke.
	Default bool
}

// CreateStorageClass creates a StorageClass, such as WaitForFirstConsumer
// storage (most cloud clusters' default), on which CDI imports a
// DataVolume only once a pod uses its claim.
func (c *Cluster) CreateStorageClass(ctx context.Context, s StorageClass) (*storagev1.StorageClass, error) {
	mode := s.Mode
	if mode == "" {
		mode = storagev1.VolumeBindingImmediate
	}
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: s.Name},
		Provisioner:       "csi.fleetenv.invalid",
		VolumeBindingMode: ptr.To(mode),
	}
	if s.Default {
		sc.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
	}
	if err := c.Client.Create(ctx, sc); err != nil {
		return nil, fmt.Errorf("create StorageClass %s on %s: %w", s.Name, c.Name, err)
	}
	return sc, nil
}
