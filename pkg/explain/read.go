package explain

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/capacity"
)

// Read gathers what the scheduler sees for fvm: the clusters of the sets
// it asks for that are bound to its namespace, their capacity scores, and,
// from its status, where the VM was placed and runs. The caller sets Now.
// Objects listed are read, never changed: from a cache they are not
// copied.
func Read(ctx context.Context, c client.Reader, fvm *fleetv1alpha1.FleetVirtualMachine, envLabel string) (Input, error) {
	return ReadScores(ctx, c, nil, fvm, envLabel)
}

// ReadScores is Read with the capacity scores read through scores, which
// keeps each one parsed (the hub's; nil: each read anew).
func ReadScores(ctx context.Context, c client.Reader, scores *capacity.Scores, fvm *fleetv1alpha1.FleetVirtualMachine, envLabel string) (Input, error) {
	p := fvm.Spec.Placement
	in := Input{
		EnvironmentLabel: envLabel, Environment: p.Environment, Selector: p.ClusterSelector, Tolerations: p.Tolerations,
	}
	if shape, ok := capacity.ShapeOf(fvm); ok {
		in.Shape = &shape
	}
	if fvm.Status.Placement != nil {
		in.Decided = fvm.Status.Placement.DecidedClusters
	}
	for _, cs := range fvm.Status.Clusters {
		if cs.Phase != fleetv1alpha1.ClusterPhaseLeaving && cs.Phase != fleetv1alpha1.ClusterPhaseRemoving {
			in.Running = append(in.Running, cs.Cluster)
		}
	}
	sets := p.ClusterSets
	if len(sets) == 0 {
		sets = []string{"default"}
	}
	seen := map[string]bool{}
	for _, set := range sets {
		// Only sets bound to the namespace count, as for the hub.
		if err := c.Get(ctx, client.ObjectKey{Namespace: fvm.Namespace, Name: set}, &clusterv1beta2.ManagedClusterSetBinding{}); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return in, fmt.Errorf("get ManagedClusterSetBinding %s/%s: %w", fvm.Namespace, set, err)
		}
		members, err := setMembers(ctx, c, set)
		if err != nil {
			return in, err
		}
		for _, mc := range members {
			if seen[mc.Name] {
				continue
			}
			seen[mc.Name] = true
			cl := Cluster{Name: mc.Name, Labels: mc.Labels, Taints: mc.Spec.Taints}
			score, err := scores.Read(ctx, c, mc.Name)
			if err != nil {
				return in, err
			}
			if score.Found {
				cl.Scores, cl.ValidUntil = score.Values, score.ValidUntil
			}
			in.Clusters = append(in.Clusters, cl)
		}
	}
	return in, nil
}

// setMembers lists the ManagedClusters of a ManagedClusterSet, by its
// selector: the cluster-set label (the default) or a label selector.
func setMembers(ctx context.Context, c client.Reader, set string) ([]clusterv1.ManagedCluster, error) {
	mcs := &clusterv1beta2.ManagedClusterSet{}
	if err := c.Get(ctx, client.ObjectKey{Name: set}, mcs); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get ManagedClusterSet %s: %w", set, err)
	}
	sel := labels.SelectorFromSet(labels.Set{clusterv1beta2.ClusterSetLabel: set})
	if cs := mcs.Spec.ClusterSelector; cs.SelectorType == clusterv1beta2.LabelSelector {
		s, err := metav1.LabelSelectorAsSelector(cs.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("ManagedClusterSet %s selector: %w", set, err)
		}
		sel = s
	}
	var list clusterv1.ManagedClusterList
	if err := c.List(ctx, &list, client.MatchingLabelsSelector{Selector: sel}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list ManagedClusters of set %s: %w", set, err)
	}
	return list.Items, nil
}
