package fleetvirtualmachine

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// Cache indexes of FleetVirtualMachines.
const (
	// IndexStatusCluster indexes by the clusters the status lists, so a
	// ManagedCluster change reaches only the FleetVMs on that cluster.
	IndexStatusCluster = "fleetvm.io/status-cluster"
	// IndexClusterSet indexes by the cluster sets used, so the shared
	// GitOps objects of a set are removed with its last user.
	IndexClusterSet = "fleetvm.io/cluster-set"
)

// SetupIndexes registers the indexes the controller lists by.
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &fleetv1alpha1.FleetVirtualMachine{}, IndexStatusCluster, func(o client.Object) []string {
		fvm := o.(*fleetv1alpha1.FleetVirtualMachine)
		out := make([]string, 0, len(fvm.Status.Clusters))
		for _, c := range fvm.Status.Clusters {
			out = append(out, c.Cluster)
		}
		return out
	}); err != nil {
		return fmt.Errorf("index %s: %w", IndexStatusCluster, err)
	}
	if err := indexer.IndexField(ctx, &fleetv1alpha1.FleetVirtualMachine{}, IndexClusterSet, func(o client.Object) []string {
		return clusterSets(o.(*fleetv1alpha1.FleetVirtualMachine))
	}); err != nil {
		return fmt.Errorf("index %s: %w", IndexClusterSet, err)
	}
	return nil
}
