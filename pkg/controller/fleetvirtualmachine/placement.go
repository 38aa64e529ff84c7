package fleetvirtualmachine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

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
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/delivery"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/placement"
	"github.com/fleetvm/fleetvm/pkg/write"
)

// fitExpression is the CEL predicate that admits a cluster only if the VM
// fits on one of its nodes, by the fleetvm agent's capacity score. A
// cluster without the score (no agent yet) is not admitted: FleetVM never
// places a new copy it cannot show fits. Keeping a VM where it runs does
// not depend on it (placement.Decide).
func fitExpression(shape capacity.Shape) string {
	return fmt.Sprintf("managedCluster.scores(%s).exists(s, s.name == %s && s.value >= 1)",
		strconv.Quote(fleetv1alpha1.CapacityScoreName), strconv.Quote(shape.Name()))
}

// candidatesLabel marks a candidate Placement with the hash of its spec, which its name ends with.
const candidatesLabel = "fleetvm.io/candidates"

// CandidatePlacementPrefix starts the name of a candidate Placement. No
// FleetVirtualMachine's own objects ("fvm-<namespace>.<name>") nor a
// cluster set's shared ones ("fleetvm-<set>") start with it.
const CandidatePlacementPrefix = "fvm.candidates-"

// candidatePlacement builds the candidate Placement a FleetVirtualMachine
// picks its clusters from: every cluster of the sets bound to its
// namespace (sets, sorted, never empty: an empty list would mean every set
// bound to the Argo CD namespace, other tenants' included) that its
// environment and selector admit and where its VM fits. It has no
// numberOfClusters and is ranked by nothing that differs between
// FleetVirtualMachines, so every FleetVirtualMachine with the same intent
// builds the same spec, and the OCM scheduler decides it once for all of
// them; the hub picks each one's clusters from its decision (placement.Pick).
// Its name is a hash of that spec. The reschedule token is set by the
// caller (withReschedule).
func (r *Reconciler) candidatePlacement(fvm *fleetv1alpha1.FleetVirtualMachine, sets []string) *clusterv1beta1.Placement {
	fp := fvm.Spec.Placement
	predicate := clusterv1beta1.ClusterPredicate{
		RequiredClusterSelector: clusterv1beta1.ClusterSelector{LabelSelector: placement.LabelSelector(fp, r.Config.EnvironmentLabel)},
	}
	if shape, ok := r.shapes.Of(fvm); ok {
		predicate.RequiredClusterSelector.CelSelector = clusterv1beta1.ClusterCelSelector{
			CelExpressions: []string{fitExpression(shape)},
		}
	}
	spec := clusterv1beta1.PlacementSpec{
		ClusterSets: sets,
		Predicates:  []clusterv1beta1.ClusterPredicate{predicate},
		Tolerations: fp.Tolerations,
		// No AddOnPlacementScore in the ranking: OCM schedules a Placement
		// again on every write of a score its prioritizers use, and the
		// agents write theirs whenever capacity moves and every 90 s to
		// renew it. The fit predicate reads the scores without that; the
		// hub asks for a new schedule when they let the VM in where it was
		// not (rescheduleToken).
		PrioritizerPolicy: clusterv1beta1.PrioritizerPolicy{Mode: clusterv1beta1.PrioritizerPolicyModeExact,
			Configurations: []clusterv1beta1.PrioritizerConfig{{
				ScoreCoordinate: &clusterv1beta1.ScoreCoordinate{Type: clusterv1beta1.ScoreCoordinateTypeBuiltIn, BuiltIn: "Steady"}, Weight: 1,
			}}},
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		panic(fmt.Sprintf("marshal a PlacementSpec: %v", err)) // plain data: cannot fail
	}
	sum := sha256.Sum256(raw)
	hash := hex.EncodeToString(sum[:])[:16]
	labels := delivery.ManagedLabels()
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

// reconcilePlacement creates the candidate Placement, or updates it when
// the reschedule token changed. got is the Placement as read (nil: none;
// after an update it holds the API server's copy). It returns the
// Placement as the API server holds it and whether it was written.
func (r *Reconciler) reconcilePlacement(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, want, got *clusterv1beta1.Placement) (*clusterv1beta1.Placement, bool, error) {
	switch out, err := r.written.Ensure(ctx, r.Client, want, got); {
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
			ObjectMeta: metav1.ObjectMeta{Name: set, Namespace: r.Config.ArgoNamespace, Labels: delivery.ManagedLabels()},
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
