package placement

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	clustersdkv1beta2 "open-cluster-management.io/sdk-go/pkg/apis/cluster/v1beta2"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
)

// LabelSelector is the label part of a FleetVirtualMachine's placement:
// spec.placement.clusterSelector plus the environment label. The OCM
// Placement and the intent check use the same one.
func LabelSelector(spec fleetv1alpha1.FleetPlacement, envLabel string) metav1.LabelSelector {
	selector := metav1.LabelSelector{MatchLabels: map[string]string{}}
	if spec.ClusterSelector != nil {
		spec.ClusterSelector.DeepCopyInto(&selector)
		if selector.MatchLabels == nil {
			selector.MatchLabels = map[string]string{}
		}
	}
	if spec.Environment != "" {
		selector.MatchLabels[envLabel] = spec.Environment
	}
	if len(selector.MatchLabels) == 0 {
		selector.MatchLabels = nil
	}
	return selector
}

// ClusterFacts is what the hub read of one cluster for the intent check.
type ClusterFacts struct {
	// Cluster is the ManagedCluster; nil when it does not exist.
	Cluster *clusterv1.ManagedCluster
	// Err is set when it could not be read.
	Err error
}

// IntentFor tells whether the FleetVirtualMachine's intent includes a
// cluster: the ManagedCluster exists, belongs to one of the cluster sets
// (by each set's own selector, as OCM evaluates it; sets maps the sets of
// spec.placement.clusterSets bound to the FleetVirtualMachine's namespace,
// nil for a set that does not exist), and its labels match the
// environment and the selector. Capacity,
// scores, taints and availability are not intent: they never exclude a
// cluster the VM runs on.
func IntentFor(spec fleetv1alpha1.FleetPlacement, envLabel string, facts ClusterFacts, sets map[string]*clusterv1beta2.ManagedClusterSet) Intent {
	if facts.Err != nil {
		return Intent{Kind: IntentUnknown}
	}
	mc := facts.Cluster
	if mc == nil {
		return Intent{Kind: IntentGone, Reason: "the ManagedCluster was deleted"}
	}
	member := false
	var names []string
	for name, set := range sets {
		names = append(names, name)
		if set == nil {
			continue
		}
		sel, err := clustersdkv1beta2.BuildClusterSelector(set)
		if err != nil {
			return Intent{Kind: IntentUnknown}
		}
		if sel.Matches(labels.Set(mc.Labels)) {
			member = true
		}
	}
	switch {
	case len(sets) == 0:
		return Intent{Kind: IntentExcluded, Reason: "no cluster set of spec.placement.clusterSets is bound to the FleetVirtualMachine's namespace"}
	case !member:
		return Intent{Kind: IntentExcluded, Reason: fmt.Sprintf("the cluster is not in cluster set %s", strings.Join(slices.Sorted(slices.Values(names)), " or "))}
	}
	if want := spec.Environment; want != "" {
		if got, ok := mc.Labels[envLabel]; !ok || got != want {
			return Intent{Kind: IntentExcluded, Reason: fmt.Sprintf("its %s label is %q, not %q", envLabel, got, want)}
		}
	}
	if spec.ClusterSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(spec.ClusterSelector)
		if err != nil {
			// An invalid selector (admission refuses one) removes nothing.
			return Intent{Kind: IntentUnknown}
		}
		if !sel.Matches(labels.Set(mc.Labels)) {
			return Intent{Kind: IntentExcluded, Reason: "its labels no longer match spec.placement.clusterSelector"}
		}
	}
	return Intent{Kind: IntentIncluded}
}

// DefaultClusterSet is used when spec.placement.clusterSets is empty.
const DefaultClusterSet = "default"

// ClusterSets are the cluster sets a spec selects from ("default" when none).
func ClusterSets(spec fleetv1alpha1.FleetVirtualMachineSpec) []string {
	if len(spec.Placement.ClusterSets) == 0 {
		return []string{DefaultClusterSet}
	}
	return spec.Placement.ClusterSets
}
