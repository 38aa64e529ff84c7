package fleetvirtualmachine

import (
	"context"
	"fmt"
	"slices"
	"strings"

	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/argoapp"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/delivery"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/move/runner"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/placement"
	"github.com/fleetvm/fleetvm/pkg/fieldindex"
	"github.com/fleetvm/fleetvm/pkg/tenancy"
	"github.com/fleetvm/fleetvm/pkg/vmclaim"
)

// Cache indexes of FleetVirtualMachines. Each is stored for the Lists the
// hub makes by it (fieldindex): across namespaces, or for Applications and
// PlacementDecisions in Argo CD's namespace; IndexClusterSet for both. A
// List of the other kind by one of them finds nothing.
const (
	// IndexStatusCluster indexes by the clusters the status lists, so a
	// ManagedCluster change reaches only the FleetVMs on that cluster.
	IndexStatusCluster = "fleetvm.io/status-cluster"
	// IndexClusterSet indexes by the cluster sets used, so the shared
	// GitOps objects of a set are removed with its last user.
	IndexClusterSet = "fleetvm.io/cluster-set"
	// IndexOwner indexes Argo CD Applications by the FleetVirtualMachine
	// their labels name ("namespace/name"), so listing one FleetVM's
	// Applications costs its own count, not the fleet's.
	IndexOwner = "fleetvm.io/owner"
	// IndexPlacement indexes PlacementDecisions by their Placement's name,
	// for the same reason.
	IndexPlacement = "fleetvm.io/placement"
	// IndexProject indexes FleetVirtualMachines by the Argo CD AppProject
	// their Applications run under, so a project change reaches them.
	IndexProject = "fleetvm.io/project"
	// IndexWaiting indexes FleetVirtualMachines waiting for clusters
	// ("true"; see waitingForClusters), so a capacity change reaches only
	// them.
	IndexWaiting = "fleetvm.io/waiting-for-clusters"
	// IndexStatusPlacement indexes FleetVirtualMachines not being deleted
	// by the Placement their status names, so a candidate Placement is
	// deleted with its last user. One being deleted uses it no more: the
	// deletion of the others (a namespace of 5,000 deleted at once) finds
	// at once whether a live user is left instead of reading every one
	// being deleted.
	IndexStatusPlacement = "fleetvm.io/status-placement"
	// IndexWantsCandidates indexes FleetVirtualMachines by the candidate
	// Placement they pick from, while they have fewer clusters than they
	// ask for (or ask for every cluster): only they are woken when its
	// decision changes.
	IndexWantsCandidates = "fleetvm.io/wants-candidates"
	// IndexReport indexes VMReports by the FleetVirtualMachine they report
	// on and by the VMs they list, each as "namespace/name" (of the VM on
	// the cluster): a FleetVirtualMachine finds every copy of its VM the
	// clusters report, in whatever cluster namespace, whether or not the
	// hub remembers it. One index, not one per kind of key: a
	// FleetVirtualMachine's VM is most often of its own name, so a report
	// is indexed under one value, one set per copy's FleetVM instead of
	// two. A List by it finds both kinds: readers check which matched.
	IndexReport = "fleetvm.io/report"
)

// wantsCandidates says which candidate Placement a FleetVirtualMachine
// picks more clusters from, if any.
func wantsCandidates(fvm *fleetv1alpha1.FleetVirtualMachine) (string, bool) {
	p := fvm.Status.Placement
	if p == nil || !strings.HasPrefix(p.Name, CandidatePlacementPrefix) {
		return "", false
	}
	if fvm.Spec.Placement.Clusters == nil {
		return p.Name, true
	}
	return p.Name, len(placedClusters(fvm)) < int(*fvm.Spec.Placement.Clusters)
}

// placedClusters are the clusters the status records the VM on, neither
// leaving nor being removed from.
func placedClusters(fvm *fleetv1alpha1.FleetVirtualMachine) []string {
	var out []string
	for _, c := range fvm.Status.Clusters {
		if c.LeavingSince == nil && c.RemovingSince == nil {
			out = append(out, c.Cluster)
		}
	}
	return out
}

// SetupIndexes registers the indexes the controller lists by.
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	if err := runner.SetupIndexes(ctx, indexer); err != nil {
		return err
	}
	if err := indexer.IndexField(ctx, &clusterv1.ManagedCluster{}, IndexDraining, func(o client.Object) []string {
		if Draining(o.(*clusterv1.ManagedCluster)) {
			return []string{"true"}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("index %s: %w", IndexDraining, err)
	}
	if err := fieldindex.Add(ctx, indexer, &fleetv1alpha1.FleetVirtualMachine{}, IndexStatusCluster, fieldindex.AllNamespaces, func(o client.Object) []string {
		return statusClusters(o.(*fleetv1alpha1.FleetVirtualMachine))
	}); err != nil {
		return fmt.Errorf("index %s: %w", IndexStatusCluster, err)
	}
	if err := indexer.IndexField(ctx, &fleetv1alpha1.FleetVirtualMachine{}, IndexClusterSet, func(o client.Object) []string {
		return placement.ClusterSets(o.(*fleetv1alpha1.FleetVirtualMachine).Spec)
	}); err != nil {
		return fmt.Errorf("index %s: %w", IndexClusterSet, err)
	}
	if err := fieldindex.Add(ctx, indexer, &argoapp.Application{}, IndexOwner, fieldindex.OwnNamespace, func(o client.Object) []string {
		if key, ok := delivery.OwnerKey(o); ok {
			return []string{key.String()}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("index %s: %w", IndexOwner, err)
	}
	if err := fieldindex.Add(ctx, indexer, &clusterv1beta1.PlacementDecision{}, IndexPlacement, fieldindex.OwnNamespace, func(o client.Object) []string {
		if name := o.GetLabels()[clusterv1beta1.PlacementLabel]; name != "" {
			return []string{name}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("index %s: %w", IndexPlacement, err)
	}
	if err := fieldindex.Add(ctx, indexer, &fleetv1alpha1.FleetVirtualMachine{}, IndexProject, fieldindex.AllNamespaces, func(o client.Object) []string {
		fvm := o.(*fleetv1alpha1.FleetVirtualMachine)
		return []string{tenancy.ProjectFor(fvm.Namespace, fvm.Spec.Delivery.Project)}
	}); err != nil {
		return fmt.Errorf("index %s: %w", IndexProject, err)
	}
	if err := fieldindex.Add(ctx, indexer, &fleetv1alpha1.FleetVirtualMachine{}, IndexWaiting, fieldindex.AllNamespaces, func(o client.Object) []string {
		if waitingForClusters(o.(*fleetv1alpha1.FleetVirtualMachine)) {
			return []string{"true"}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("index %s: %w", IndexWaiting, err)
	}
	if err := fieldindex.Add(ctx, indexer, &fleetv1alpha1.FleetVirtualMachine{}, IndexStatusPlacement, fieldindex.AllNamespaces, func(o client.Object) []string {
		fvm := o.(*fleetv1alpha1.FleetVirtualMachine)
		if p := fvm.Status.Placement; p != nil && p.Name != "" && fvm.DeletionTimestamp == nil {
			return []string{p.Name}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("index %s: %w", IndexStatusPlacement, err)
	}
	if err := fieldindex.Add(ctx, indexer, &fleetv1alpha1.FleetVirtualMachine{}, IndexWantsCandidates, fieldindex.AllNamespaces, func(o client.Object) []string {
		if name, ok := wantsCandidates(o.(*fleetv1alpha1.FleetVirtualMachine)); ok {
			return []string{name}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("index %s: %w", IndexWantsCandidates, err)
	}
	if err := fieldindex.Add(ctx, indexer, &fleetv1alpha1.VMReport{}, IndexReport, fieldindex.AllNamespaces, func(o client.Object) []string {
		spec := o.(*fleetv1alpha1.VMReport).Spec
		out := make([]string, 1, 1+len(spec.VMs))
		out[0] = spec.FleetVM.Namespace + "/" + spec.FleetVM.Name
		for _, vm := range spec.VMs {
			if key := vm.Namespace + "/" + vm.Name; !slices.Contains(out, key) {
				out = append(out, key)
			}
		}
		return out
	}); err != nil {
		return fmt.Errorf("index %s: %w", IndexReport, err)
	}
	return vmclaim.SetupIndex(ctx, indexer)
}
