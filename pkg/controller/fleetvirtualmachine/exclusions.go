package fleetvirtualmachine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/capacity"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/move/runner"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/placement"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/status"
	"github.com/fleetvm/fleetvm/pkg/explain"
)

// +kubebuilder:rbac:groups=cluster.open-cluster-management.io,resources=addonplacementscores,verbs=get;list;watch

// wantsExclusions: the status says why clusters were left out while the
// FleetVirtualMachine asks for every qualifying cluster, or has fewer than
// it asks for. Once it has what it asks for, the others are not needed,
// and their reasons (which change with every cluster's load) are left to
// `kubectl fleetvm explain`, so a placed FleetVirtualMachine's status does
// not change with its neighbours' capacity.
func wantsExclusions(spec fleetv1alpha1.FleetVirtualMachineSpec, placed int) bool {
	return spec.Placement.Clusters == nil || int32(placed) < *spec.Placement.Clusters
}

// exclusions says, for the clusters of the bound sets the VM is not placed
// on, why: counted per reason, naming the first few. It reads what the
// OCM scheduler reads (the clusters and the agents' capacity scores) from
// the cache. qualifying are the clusters that qualify by those inputs but
// are not in the scheduler's decision.
//
// With shared Placements (candidates not nil), decision is what the hub
// picked, and qualifying are the clusters that qualify but are not in the
// candidate Placement's decision: the same for every FleetVirtualMachine
// that shares it, so the ones waiting agree on the reschedule token.
func (r *Reconciler) exclusions(ctx context.Context, fvm *fleetv1alpha1.FleetVirtualMachine, decision, candidates []string, outcome placement.Outcome, now metav1.Time) (excluded []fleetv1alpha1.ExclusionCount, qualifying []string, err error) {
	in, err := explain.ReadScores(ctx, r.Client, &r.scores, fvm, r.Config.EnvironmentLabel)
	if err != nil {
		return nil, nil, fmt.Errorf("explain the placement: %w", err)
	}
	in.Now, in.Decided, in.Running = now.Time, decision, outcome.InState(placement.Placed)
	if in.Shape != nil {
		// A cluster whose room copies on their way took says so, not
		// "qualifies": the hub's pick skipped it for them.
		shape := *in.Shape
		in.Arriving = func(c string) int32 { return r.arriving.Slots(c, shape) }
	}
	verdicts, err := explain.Explain(in)
	if err != nil {
		return nil, nil, err
	}
	asked := verdicts
	var fit map[string]string
	if candidates != nil {
		in.Decided, in.Running = candidates, nil
		if asked, err = explain.Explain(in); err != nil {
			return nil, nil, err
		}
		fit = fitValues(in, asked)
	}
	for _, v := range asked {
		if v.Reason == explain.NotNeeded {
			qualifying = append(qualifying, v.Cluster+fit[v.Cluster])
		}
	}
	return status.ExclusionCounts(explain.Summarize(verdicts, status.ExclusionNames)), qualifying, nil
}

// fitValues are each cluster's fit value for the VM's shape, as the
// reschedule token takes them ("=N"). A candidate Placement outlives the
// schedules it had: one made while a cluster was full must be asked again
// once it fits, even if the same clusters qualified the last time it was
// asked.
//
// Only the clusters the token names (those that qualify but are not
// needed) are formatted: at 10,000 FleetVMs waiting for room over 1,000
// clusters, formatting every cluster's value was 1 GB of the burst's
// allocations.
func fitValues(in explain.Input, verdicts []explain.Verdict) map[string]string {
	if in.Shape == nil {
		return nil
	}
	qualifying := map[string]bool{}
	for _, v := range verdicts {
		if v.Reason == explain.NotNeeded {
			qualifying[v.Cluster] = true
		}
	}
	fit := make(map[string]string, len(qualifying))
	name := in.Shape.Name()
	for _, c := range in.Clusters {
		if qualifying[c.Name] {
			fit[c.Name] = "=" + strconv.FormatInt(int64(c.Scores[name]), 10)
		}
	}
	return fit
}

// rescheduleAnnotation on a Placement asks the OCM scheduler for a new
// schedule: it changes when clusters that fit the VM are left out of the
// decision while the FleetVirtualMachine waits for clusters.
const rescheduleAnnotation = "fleetvm.io/reschedule"

// rescheduleToken is the Placement's rescheduleAnnotation. The OCM
// scheduler schedules a Placement again when a score its prioritizers use
// changes, not when a score its CEL predicates read does; FleetVM ranks
// without scores, so a cluster whose capacity now fits the VM does not
// reach a Placement that waits for clusters by itself. The hub sees it
// (the Placement is waiting, and the same inputs say a cluster qualifies),
// and writes a token naming those clusters: one schedule for each new set
// of them, and none while nothing changes, so a scheduler that still
// disagrees is not asked again and again. Otherwise the token stays as it
// is.
func rescheduleToken(current *clusterv1beta1.Placement, waiting bool, qualifying []string) string {
	if waiting && len(qualifying) > 0 {
		sorted := slices.Sorted(slices.Values(qualifying))
		sum := sha256.Sum256([]byte(strings.Join(sorted, ",")))
		return hex.EncodeToString(sum[:4])
	}
	if current == nil {
		return ""
	}
	return current.Annotations[rescheduleAnnotation]
}

// waitingForClusters: the FleetVirtualMachine has fewer clusters than it
// asks for, or asks for every cluster that qualifies, and its status says
// why some are left out. Those reasons change with the clusters' labels,
// taints and capacity scores, which do not bring a reconcile while the
// OCM scheduler's decision stays the same (an expired score is one: the
// scheduler's CEL reads it whatever its validity, the hub does not).
func waitingForClusters(fvm *fleetv1alpha1.FleetVirtualMachine) bool {
	return fvm.Status.Placement != nil && len(fvm.Status.Placement.Excluded) > 0 &&
		(fvm.Spec.Placement.Clusters == nil || meta.IsStatusConditionFalse(fvm.Status.Conditions, fleetv1alpha1.ConditionPlaced))
}

// fleetVMsWaitingForClusters maps a cluster or its capacity score to the
// FleetVirtualMachines waiting for clusters, so the reasons they show stay
// current. FleetVirtualMachines placed as asked are not woken.
func (r *Reconciler) fleetVMsWaitingForClusters(ctx context.Context, obj client.Object) []reconcile.Request {
	return append(r.fleetVMsMatching(ctx, "waiting for clusters", obj, client.MatchingFields{IndexWaiting: "true"}),
		runner.FleetVMsNotStarted(ctx, r.Client)...)
}

// scoresChanged passes a capacity score whose values changed, or whose
// renewal brings back a score that had expired (the cluster fits again),
// not one whose validity was only renewed.
func (r *Reconciler) scoresChanged() predicate.Predicate {
	return updateChanged(func(o, n *clusterv1alpha1.AddOnPlacementScore) bool {
		now := r.Clock.Now()
		return !equality.Semantic.DeepEqual(o.Status.Scores, n.Status.Scores) ||
			capacity.Expired(o, now) && !capacity.Expired(n, now)
	})
}
