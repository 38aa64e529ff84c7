package fleetvirtualmachine

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/capacity"
	"github.com/fleetvm/fleetvm/pkg/controller/shapes"
)

// defaultClusterSet is used when spec.placement.clusterSets is empty.
const defaultClusterSet = "default"

// Weights of the FreeCapacity prioritizer. Steady outweighs the capacity
// scores (each -100..100) so a VM that runs, and so lowers its cluster's
// free capacity, is not moved to a cluster that now looks emptier.
const (
	weightCapacity = 1
	weightSteady   = 5
)

// clusterSets returns the cluster sets a FleetVirtualMachine selects from.
func clusterSets(fvm *fleetv1alpha1.FleetVirtualMachine) []string {
	if len(fvm.Spec.Placement.ClusterSets) == 0 {
		return []string{defaultClusterSet}
	}
	return fvm.Spec.Placement.ClusterSets
}

// vmShape returns the CPU and memory of the VM an inline template asks for,
// or false for a git source (its VMs are unknown to the hub).
func vmShape(fvm *fleetv1alpha1.FleetVirtualMachine) (capacity.Shape, bool) {
	return shapes.Of(fvm)
}

// fitExpression is the CEL predicate that admits a cluster only if the VM
// fits on one of its nodes, by the fleetvm agent's capacity score. Clusters
// that already run the VM (sticky) stay admitted: the VM's own usage must
// not push it off the cluster it runs on. A cluster without the score (no
// agent yet) is not admitted: FleetVM never places a VM it cannot prove fits.
func fitExpression(shape capacity.Shape, sticky []string) string {
	fit := fmt.Sprintf("managedCluster.scores(%s).exists(s, s.name == %s && s.value >= 1)",
		strconv.Quote(fleetv1alpha1.CapacityScoreName), strconv.Quote(shape.Name()))
	if len(sticky) == 0 {
		return fit
	}
	quoted := make([]string, len(sticky))
	for i, c := range sticky {
		quoted[i] = strconv.Quote(c)
	}
	return fmt.Sprintf("managedCluster.metadata.name in [%s] || %s", strings.Join(quoted, ", "), fit)
}

// desiredPlacement builds the OCM Placement of a FleetVirtualMachine.
// sticky are the clusters in the current decision.
func (r *Reconciler) desiredPlacement(fvm *fleetv1alpha1.FleetVirtualMachine, sticky []string) *clusterv1beta1.Placement {
	spec := fvm.Spec.Placement
	selector := metav1.LabelSelector{MatchLabels: map[string]string{}}
	if spec.ClusterSelector != nil {
		spec.ClusterSelector.DeepCopyInto(&selector)
		if selector.MatchLabels == nil {
			selector.MatchLabels = map[string]string{}
		}
	}
	if spec.Environment != "" {
		selector.MatchLabels[r.Config.EnvironmentLabel] = spec.Environment
	}
	if len(selector.MatchLabels) == 0 {
		selector.MatchLabels = nil
	}
	predicate := clusterv1beta1.ClusterPredicate{
		RequiredClusterSelector: clusterv1beta1.ClusterSelector{LabelSelector: selector},
	}
	if shape, ok := vmShape(fvm); ok {
		predicate.RequiredClusterSelector.CelSelector = clusterv1beta1.ClusterCelSelector{
			CelExpressions: []string{fitExpression(shape, sticky)},
		}
	}

	p := &clusterv1beta1.Placement{
		ObjectMeta: metav1.ObjectMeta{
			Name:      childName(client.ObjectKeyFromObject(fvm)),
			Namespace: r.Config.ArgoNamespace,
			Labels:    ownerLabels(fvm),
		},
		Spec: clusterv1beta1.PlacementSpec{
			ClusterSets:       clusterSets(fvm),
			NumberOfClusters:  spec.Clusters,
			Predicates:        []clusterv1beta1.ClusterPredicate{predicate},
			Tolerations:       spec.Tolerations,
			PrioritizerPolicy: prioritizerPolicy(spec.Prioritizer),
		},
	}
	return p
}

func prioritizerPolicy(p fleetv1alpha1.Prioritizer) clusterv1beta1.PrioritizerPolicy {
	builtIn := func(name string, weight int32) clusterv1beta1.PrioritizerConfig {
		return clusterv1beta1.PrioritizerConfig{
			ScoreCoordinate: &clusterv1beta1.ScoreCoordinate{Type: clusterv1beta1.ScoreCoordinateTypeBuiltIn, BuiltIn: name},
			Weight:          weight,
		}
	}
	addOn := func(score string) clusterv1beta1.PrioritizerConfig {
		return clusterv1beta1.PrioritizerConfig{
			ScoreCoordinate: &clusterv1beta1.ScoreCoordinate{
				Type:  clusterv1beta1.ScoreCoordinateTypeAddOn,
				AddOn: &clusterv1beta1.AddOnScore{ResourceName: fleetv1alpha1.CapacityScoreName, ScoreName: score},
			},
			Weight: weightCapacity,
		}
	}
	switch p {
	case fleetv1alpha1.PrioritizerBalance:
		return clusterv1beta1.PrioritizerPolicy{Mode: clusterv1beta1.PrioritizerPolicyModeExact,
			Configurations: []clusterv1beta1.PrioritizerConfig{builtIn("Balance", 1), builtIn("Steady", 1)}}
	case fleetv1alpha1.PrioritizerSteady:
		return clusterv1beta1.PrioritizerPolicy{Mode: clusterv1beta1.PrioritizerPolicyModeExact,
			Configurations: []clusterv1beta1.PrioritizerConfig{builtIn("Steady", 1)}}
	default:
		return clusterv1beta1.PrioritizerPolicy{Mode: clusterv1beta1.PrioritizerPolicyModeExact,
			Configurations: []clusterv1beta1.PrioritizerConfig{
				addOn(capacity.ScoreCPUFree), addOn(capacity.ScoreMemoryFree), builtIn("Steady", weightSteady),
			}}
	}
}

// reconcilePlacement makes the Placement match the spec. It returns the
// Placement as the API server holds it.
func (r *Reconciler) reconcilePlacement(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, sticky []string) (*clusterv1beta1.Placement, error) {
	want := r.desiredPlacement(fvm, sticky)
	got := &clusterv1beta1.Placement{}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(want), got)
	switch {
	case apierrors.IsNotFound(err):
		if err := r.Client.Create(ctx, want); err != nil {
			return nil, fmt.Errorf("create Placement %s: %w", klog.KObj(want), err)
		}
		r.Recorder.Eventf(fvm, "Normal", "PlacementCreated", "Created Placement %s", klog.KObj(want))
		return want, nil
	case err != nil:
		return nil, fmt.Errorf("get Placement %s: %w", klog.KObj(want), err)
	}
	if !isOwnedBy(got, fvm) {
		return nil, fmt.Errorf("placement %s exists and does not belong to this FleetVirtualMachine", klog.KObj(got))
	}
	if equality.Semantic.DeepEqual(got.Spec, want.Spec) && labelsContain(got.Labels, want.Labels) {
		return got, nil
	}
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec = want.Spec
	got.Labels = mergeLabels(got.Labels, want.Labels)
	if err := r.Client.Patch(ctx, got, patch); err != nil {
		return nil, fmt.Errorf("update Placement %s: %w", klog.KObj(got), err)
	}
	return got, nil
}

// readDecisions returns the clusters the scheduler decided for a Placement,
// sorted, and whether the scheduler has acted on it yet.
func (r *Reconciler) readDecisions(ctx context.Context, p *clusterv1beta1.Placement) ([]string, error) {
	var list clusterv1beta1.PlacementDecisionList
	if err := r.Client.List(ctx, &list, client.InNamespace(p.Namespace),
		client.MatchingFields{IndexPlacement: p.Name}); err != nil {
		return nil, fmt.Errorf("list PlacementDecisions of %s: %w", klog.KObj(p), err)
	}
	var clusters []string
	for _, d := range list.Items {
		if !metav1.IsControlledBy(&d, p) && len(d.OwnerReferences) > 0 {
			continue // a decision of an earlier Placement of the same name
		}
		for _, cd := range d.Status.Decisions {
			clusters = append(clusters, cd.ClusterName)
		}
	}
	slices.Sort(clusters)
	return slices.Compact(clusters), nil
}

// ensureBindings binds every cluster set the FleetVirtualMachine uses to the
// Argo CD namespace. A binding that exists is left alone, whoever made it.
func (r *Reconciler) ensureBindings(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine) error {
	var errs []error
	for _, set := range clusterSets(fvm) {
		b := &clusterv1beta2.ManagedClusterSetBinding{}
		key := types.NamespacedName{Namespace: r.Config.ArgoNamespace, Name: set}
		err := r.Client.Get(ctx, key, b)
		if err == nil {
			continue
		}
		if !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("get ManagedClusterSetBinding %s: %w", key, err))
			continue
		}
		b = &clusterv1beta2.ManagedClusterSetBinding{
			ObjectMeta: metav1.ObjectMeta{Name: set, Namespace: r.Config.ArgoNamespace, Labels: managedLabels()},
			Spec:       clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: set},
		}
		if err := r.Client.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("create ManagedClusterSetBinding %s: %w", key, err))
			continue
		}
		r.Recorder.Eventf(fvm, "Normal", "ClusterSetBound", "Bound ManagedClusterSet %s to namespace %s", set, r.Config.ArgoNamespace)
	}
	return joinErrors(errs)
}
