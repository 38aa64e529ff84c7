package fleetvirtualmachine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/capacity"
	"github.com/fleetvm/fleetvm/pkg/write"
)

// defaultClusterSet is used when spec.placement.clusterSets is empty.
const defaultClusterSet = "default"

// Weights of the prioritizers. Steady outweighs the capacity scores and
// Balance (each -100..100) so the scheduler keeps answering with the
// clusters it picked before; keeping a VM does not depend on it
// (decide.go).
const (
	weightCapacity = 1
	weightSteady   = 5
)

// clusterSets returns the cluster sets a FleetVirtualMachine selects from.
func clusterSets(fvm *fleetv1alpha1.FleetVirtualMachine) []string {
	return setsOf(fvm.Spec)
}

// fitExpression is the CEL predicate that admits a cluster only if the VM
// fits on one of its nodes, by the fleetvm agent's capacity score. A
// cluster without the score (no agent yet) is not admitted: FleetVM never
// places a new copy it cannot show fits. Clusters the VM runs on (sticky)
// are admitted whatever their score, so the scheduler ranks them with
// their own VM counted; keeping them does not depend on it (decide.go).
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

// desiredPlacement builds the OCM Placement of a FleetVirtualMachine. sets
// are the cluster sets bound to its namespace (never empty: an empty list
// would mean every set bound to the Argo CD namespace, other tenants'
// included); sticky are the clusters the fit predicate admits whatever
// their score.
func (r *Reconciler) desiredPlacement(fvm *fleetv1alpha1.FleetVirtualMachine, sets, sticky []string, reschedule string) *clusterv1beta1.Placement {
	spec := fvm.Spec.Placement
	predicate := clusterv1beta1.ClusterPredicate{
		RequiredClusterSelector: clusterv1beta1.ClusterSelector{LabelSelector: labelSelector(spec, r.Config.EnvironmentLabel)},
	}
	annotations := map[string]string{}
	if shape, ok := capacity.ShapeOf(fvm); ok {
		predicate.RequiredClusterSelector.CelSelector = clusterv1beta1.ClusterCelSelector{
			CelExpressions: []string{fitExpression(shape, sticky)},
		}
		annotations[stickyAnnotation] = strings.Join(sticky, ",")
	}
	if reschedule != "" {
		annotations[rescheduleAnnotation] = reschedule
	}
	return &clusterv1beta1.Placement{
		ObjectMeta: metav1.ObjectMeta{
			Name:        ChildName(client.ObjectKeyFromObject(fvm)),
			Namespace:   r.Config.ArgoNamespace,
			Labels:      ownerLabels(fvm),
			Annotations: annotations,
		},
		Spec: clusterv1beta1.PlacementSpec{
			ClusterSets:       sets,
			NumberOfClusters:  spec.Clusters,
			Predicates:        []clusterv1beta1.ClusterPredicate{predicate},
			Tolerations:       spec.Tolerations,
			PrioritizerPolicy: prioritizerPolicy(spec.Prioritizer),
		},
	}
}

// candidatesLabel marks a candidate Placement (Config.SharedPlacements)
// with the hash of its spec, which its name ends with.
const candidatesLabel = "fleetvm.io/candidates"

// CandidatePlacementPrefix starts the name of a candidate Placement. No
// FleetVirtualMachine's own objects ("fvm-<namespace>.<name>") nor a
// cluster set's shared ones ("fleetvm-<set>") start with it.
const CandidatePlacementPrefix = "fvm.candidates-"

// candidatePlacement builds the candidate Placement a FleetVirtualMachine
// picks its clusters from when FleetVirtualMachines share Placements: its
// own Placement without numberOfClusters, without the clusters it runs on
// in the fit predicate, and ranked by nothing that differs between
// FleetVirtualMachines, so every FleetVirtualMachine with the same intent
// builds the same spec. Its name is a hash of that spec. sets must be
// sorted. The reschedule token is set by the caller (withReschedule).
func (r *Reconciler) candidatePlacement(fvm *fleetv1alpha1.FleetVirtualMachine, sets []string) *clusterv1beta1.Placement {
	own := r.desiredPlacement(fvm, sets, nil, "")
	spec := own.Spec
	spec.NumberOfClusters = nil
	spec.PrioritizerPolicy = clusterv1beta1.PrioritizerPolicy{Mode: clusterv1beta1.PrioritizerPolicyModeExact,
		Configurations: []clusterv1beta1.PrioritizerConfig{{
			ScoreCoordinate: &clusterv1beta1.ScoreCoordinate{Type: clusterv1beta1.ScoreCoordinateTypeBuiltIn, BuiltIn: "Steady"}, Weight: 1,
		}}}
	raw, err := json.Marshal(spec)
	if err != nil {
		panic(fmt.Sprintf("marshal a PlacementSpec: %v", err)) // plain data: cannot fail
	}
	sum := sha256.Sum256(raw)
	hash := hex.EncodeToString(sum[:])[:16]
	labels := managedLabels()
	labels[candidatesLabel] = hash
	return &clusterv1beta1.Placement{
		ObjectMeta: metav1.ObjectMeta{Name: CandidatePlacementPrefix + hash, Namespace: r.Config.ArgoNamespace, Labels: labels},
		Spec:       spec,
	}
}

// withReschedule returns a copy of p with the reschedule token (none when
// empty).
func withReschedule(p *clusterv1beta1.Placement, token string) *clusterv1beta1.Placement {
	p = p.DeepCopy()
	if token != "" {
		p.Annotations = map[string]string{rescheduleAnnotation: token}
	}
	return p
}

// isCandidatePlacement tells whether a Placement is a candidate Placement
// FleetVM made (its labels match its name).
func isCandidatePlacement(p client.Object) bool {
	l := p.GetLabels()
	return l[fleetv1alpha1.LabelPartOf] == fleetv1alpha1.PartOfValue && l[candidatesLabel] != "" &&
		p.GetName() == CandidatePlacementPrefix+l[candidatesLabel]
}

// stickyAnnotation records on the Placement the clusters its fit
// predicate admits whatever their score.
const stickyAnnotation = "fleetvm.io/sticky-clusters"

// stickyClusters chooses the sticky list of the Placement: the one it has,
// as long as it names only clusters the VM is delivered to and every such
// cluster is either on it or in the scheduler's current answer; otherwise
// exactly the delivered clusters. So the Placement is rewritten only when
// the set of clusters the VM runs on changes in a way the scheduler has
// not already answered: a new FleetVirtualMachine is scheduled once, and
// no decision feeds back into the Placement in a loop.
func stickyClusters(current []string, hasCurrent bool, delivered, decision []string, scheduled bool) []string {
	if hasCurrent {
		keep := true
		for _, c := range current {
			if !slices.Contains(delivered, c) {
				keep = false
			}
		}
		for _, c := range delivered {
			if !slices.Contains(current, c) && (!scheduled || !slices.Contains(decision, c)) {
				keep = false
			}
		}
		if keep {
			return current
		}
	}
	return delivered
}

// currentSticky reads the sticky list a Placement was written with.
func currentSticky(p *clusterv1beta1.Placement) ([]string, bool) {
	if p == nil {
		return nil, false
	}
	v, ok := p.Annotations[stickyAnnotation]
	if !ok {
		return nil, false
	}
	if v == "" {
		return nil, true
	}
	return strings.Split(v, ","), true
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
	case fleetv1alpha1.PrioritizerFreeCapacity:
		return clusterv1beta1.PrioritizerPolicy{Mode: clusterv1beta1.PrioritizerPolicyModeExact,
			Configurations: []clusterv1beta1.PrioritizerConfig{
				addOn(capacity.ScoreCPUFree), addOn(capacity.ScoreMemoryFree), builtIn("Steady", weightSteady),
			}}
	case fleetv1alpha1.PrioritizerSteady:
		return clusterv1beta1.PrioritizerPolicy{Mode: clusterv1beta1.PrioritizerPolicyModeExact,
			Configurations: []clusterv1beta1.PrioritizerConfig{builtIn("Steady", 1)}}
	default:
		// No AddOnPlacementScore in the ranking: OCM schedules a Placement
		// again on every write of a score its prioritizers use, and the
		// agents write theirs whenever capacity moves and every 90 s to
		// renew it. The fit predicate reads the scores without that; the
		// hub asks for a new schedule when they let the VM in where it
		// was not (rescheduleToken).
		return clusterv1beta1.PrioritizerPolicy{Mode: clusterv1beta1.PrioritizerPolicyModeExact,
			Configurations: []clusterv1beta1.PrioritizerConfig{builtIn("Balance", 1), builtIn("Steady", weightSteady)}}
	}
}

// reconcilePlacement creates the Placement, or updates it when the intent,
// the sticky list or the reschedule token changed. got is the Placement as read (nil: none;
// after an update it holds the API server's copy). It returns the
// Placement as the API server holds it and whether it was written.
func (r *Reconciler) reconcilePlacement(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, want, got *clusterv1beta1.Placement) (*clusterv1beta1.Placement, bool, error) {
	switch out, err := write.Ensure(ctx, r.Client, want, got); {
	case err != nil:
		return nil, false, fmt.Errorf("write Placement %s: %w", klog.KObj(want), err)
	case out == write.Created:
		if meta.IsStatusConditionTrue(fvm.Status.Conditions, fleetv1alpha1.ConditionPlaced) {
			// It was there: someone deleted it.
			r.Recorder.Eventf(fvm, "Warning", "PlacementRecreated", "Recreated Placement %s, which was deleted", klog.KObj(want))
		}
		return want, true, nil
	case out == write.Updated:
		return got, true, nil
	default:
		return got, false, nil
	}
}

// ensureBindings mirrors into the Argo CD namespace the bindings of the
// cluster sets the FleetVirtualMachine uses that are bound to its own
// namespace: never more than that namespace may use. A binding that
// exists is left alone, whoever made it.
func (r *Reconciler) ensureBindings(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, sets []string) error {
	var errs []error
	for _, set := range sets {
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
		created, err := write.CreateOnly(ctx, r.Client, b)
		if err != nil {
			errs = append(errs, fmt.Errorf("create ManagedClusterSetBinding %s: %w", key, err))
			continue
		}
		if created {
			r.Recorder.Eventf(fvm, "Normal", "ClusterSetBound", "Bound ManagedClusterSet %s to namespace %s", set, r.Config.ArgoNamespace)
		}
	}
	return joinErrors(errs)
}
