package fleetvirtualmachine

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetvm/fleetvm/pkg/capacity"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/delivery"
	"github.com/fleetvm/fleetvm/pkg/diskimage"
	"github.com/fleetvm/fleetvm/pkg/tenancy"
	"github.com/fleetvm/fleetvm/pkg/validation"
)

// Config holds the hub settings the controller works with.
type Config struct {
	// ArgoNamespace is where Argo CD runs and where the Placements,
	// ApplicationSets and GitOpsClusters go (ApplicationSets read
	// PlacementDecisions only in their own namespace).
	ArgoNamespace string
	// EnvironmentLabel is the ManagedCluster label whose value
	// spec.placement.environment selects.
	EnvironmentLabel string
	// Chart locates the Helm chart that carries inline templates.
	Chart delivery.ChartSource
	// GracePeriod is how long a cluster must stay excluded by the user's
	// intent before its VM is removed (placement.Decide).
	GracePeriod time.Duration
	// ImageNamespace is the namespace on the clusters where FleetDiskImages
	// are imported.
	ImageNamespace string
	// SharedImageNamespaces are the namespaces on the clusters whose disks
	// every team's templates may clone (validation.Options).
	SharedImageNamespaces []string
	// ShapesPerNamespace bounds the distinct VM shapes one namespace adds
	// to the shapes every agent scores (capacity.Shapes; the shapes
	// controller must be given the same).
	ShapesPerNamespace int
	// TenantKinds are the namespaced kinds a namespace's AppProject lets
	// its FleetVirtualMachines deliver (tenancy.DefaultKinds by default).
	TenantKinds []metav1.GroupKind
}

// DefaultConfig is the configuration fleetvm-hub starts with.
func DefaultConfig() Config {
	return Config{
		ArgoNamespace:    "argocd",
		EnvironmentLabel: "env",
		Chart: delivery.ChartSource{
			RepoURL:        "https://github.com/fleetvm/fleetvm.git",
			Path:           "deploy/charts/fleetvm-vm",
			TargetRevision: "main",
		},
		GracePeriod:           5 * time.Minute,
		ImageNamespace:        diskimage.DefaultNamespace,
		SharedImageNamespaces: validation.DefaultSharedImageNamespaces(),
		ShapesPerNamespace:    capacity.DefaultShapesPerNamespace,
		TenantKinds:           tenancy.DefaultKinds(),
	}
}
