package addon

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// ClusterManagementAddOn returns the ClusterManagementAddOn of fleetvm. With
// InstallPlacements, OCM's addon manager installs the agent on every cluster
// the Placement PlacementNamespace/PlacementName selects, rolling changes out
// to all of them at once; with InstallManual, only where an operator creates
// a ManagedClusterAddOn named fleetvm.
func ClusterManagementAddOn(opts Options) (*addonv1alpha1.ClusterManagementAddOn, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("fleetvm addon options: %w", err)
	}
	cma := &addonv1alpha1.ClusterManagementAddOn{
		TypeMeta: metav1.TypeMeta{APIVersion: addonv1alpha1.GroupVersion.String(), Kind: "ClusterManagementAddOn"},
		ObjectMeta: metav1.ObjectMeta{
			Name:   AddonName,
			Labels: map[string]string{fleetv1alpha1.LabelPartOf: fleetv1alpha1.PartOfValue},
		},
		Spec: addonv1alpha1.ClusterManagementAddOnSpec{
			AddOnMeta: addonv1alpha1.AddOnMeta{
				DisplayName: "FleetVM agent",
				Description: "Reports VM status, disk-image use and free capacity of each managed cluster to the FleetVM hub.",
			},
			InstallStrategy: addonv1alpha1.InstallStrategy{Type: string(opts.InstallStrategy)},
		},
	}
	if opts.InstallStrategy == InstallPlacements {
		cma.Spec.InstallStrategy.Placements = []addonv1alpha1.PlacementStrategy{{
			PlacementRef:    addonv1alpha1.PlacementRef{Namespace: opts.PlacementNamespace, Name: opts.PlacementName},
			RolloutStrategy: clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.All},
		}}
	}
	return cma, nil
}

// DefaultPlacement returns the Placement that InstallPlacements refers to
// when the hub has none yet: every cluster of the ClusterSet. It tolerates
// the unreachable and unavailable taints, so a cluster that loses its hub
// connection for a while keeps its agent rather than having it uninstalled.
// It returns nil with InstallManual.
func DefaultPlacement(opts Options) (*clusterv1beta1.Placement, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("fleetvm addon options: %w", err)
	}
	if opts.InstallStrategy != InstallPlacements {
		return nil, nil
	}
	return &clusterv1beta1.Placement{
		TypeMeta: metav1.TypeMeta{APIVersion: clusterv1beta1.GroupVersion.String(), Kind: "Placement"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: opts.PlacementNamespace,
			Name:      opts.PlacementName,
			Labels:    map[string]string{fleetv1alpha1.LabelPartOf: fleetv1alpha1.PartOfValue},
		},
		Spec: clusterv1beta1.PlacementSpec{
			ClusterSets: []string{opts.ClusterSet},
			Tolerations: []clusterv1beta1.Toleration{
				{Key: clusterv1.ManagedClusterTaintUnreachable, Operator: clusterv1beta1.TolerationOpExists},
				{Key: clusterv1.ManagedClusterTaintUnavailable, Operator: clusterv1beta1.TolerationOpExists},
			},
		},
	}, nil
}

// DefaultClusterSetBinding returns the ManagedClusterSetBinding that lets
// DefaultPlacement select the clusters of the ClusterSet, or nil with
// InstallManual.
func DefaultClusterSetBinding(opts Options) (*clusterv1beta2.ManagedClusterSetBinding, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("fleetvm addon options: %w", err)
	}
	if opts.InstallStrategy != InstallPlacements {
		return nil, nil
	}
	return &clusterv1beta2.ManagedClusterSetBinding{
		TypeMeta: metav1.TypeMeta{APIVersion: clusterv1beta2.GroupVersion.String(), Kind: "ManagedClusterSetBinding"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: opts.PlacementNamespace,
			Name:      opts.ClusterSet,
			Labels:    map[string]string{fleetv1alpha1.LabelPartOf: fleetv1alpha1.PartOfValue},
		},
		Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: opts.ClusterSet},
	}, nil
}
