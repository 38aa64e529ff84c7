package drain

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/move"
	"github.com/fleetvm/fleetvm/pkg/write"
)

// +kubebuilder:rbac:groups=fleetvm.io,resources=fleetvirtualmachinemoves,verbs=get;list;watch;create;delete

// Reconciler drains the ManagedClusters that carry the drain taint: it
// creates a FleetVirtualMachineMove for every FleetVirtualMachine copy
// on the cluster, at most Limits at once, and lets each move choose its
// target by the FleetVirtualMachine's placement rules. A copy whose move
// failed is not retried: it stays on the cluster and its move says why.
// Removing the taint ends the drain: moves not started are deleted,
// moves under way finish; a drain started again starts afresh. A drain
// knows its moves by the label fleetv1alpha1.LabelDrain and the
// cluster's UID in AnnotationCluster (Made): a move with the label alone
// counts for nothing.
type Reconciler struct {
	Client   client.Client
	Recorder record.EventRecorder
	Limits   Limits
}

// SetupWithManager watches ManagedClusters, the drains' moves, and the
// FleetVirtualMachines on draining clusters. It needs the indexes of
// fleetvirtualmachine.SetupIndexes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Limits == (Limits{}) {
		r.Limits = DefaultLimits
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("drain").
		// A cluster's drain starts and ends with its taint.
		For(&clusterv1.ManagedCluster{}, builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(e event.CreateEvent) bool {
				return fleetvirtualmachine.Draining(e.Object.(*clusterv1.ManagedCluster))
			},
			UpdateFunc: func(e event.UpdateEvent) bool {
				return fleetvirtualmachine.Draining(e.ObjectOld.(*clusterv1.ManagedCluster)) != fleetvirtualmachine.Draining(e.ObjectNew.(*clusterv1.ManagedCluster))
			},
		})).
		Watches(&fleetv1alpha1.FleetVirtualMachineMove{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			if c := o.GetLabels()[fleetv1alpha1.LabelDrain]; c != "" {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: c}}}
			}
			return nil
		})).
		Watches(&fleetv1alpha1.FleetVirtualMachine{}, handler.EnqueueRequestsFromMapFunc(r.drainingClustersOf)).
		Complete(r)
}

// drainingClustersOf maps a FleetVirtualMachine to the draining clusters
// its status lists: a copy may have arrived there or left.
func (r *Reconciler) drainingClustersOf(ctx context.Context, o client.Object) []reconcile.Request {
	list := &clusterv1.ManagedClusterList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{fleetvirtualmachine.IndexDraining: "true"}); err != nil || len(list.Items) == 0 {
		return nil
	}
	fvm := o.(*fleetv1alpha1.FleetVirtualMachine)
	var out []reconcile.Request
	for _, mc := range list.Items {
		for _, c := range fvm.Status.Clusters {
			if c.Cluster == mc.Name {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: mc.Name}})
				break
			}
		}
	}
	return out
}

// Reconcile drains one cluster, or ends its drain.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cluster := req.Name
	labelled := &fleetv1alpha1.FleetVirtualMachineMoveList{}
	if err := r.Client.List(ctx, labelled, client.MatchingLabels{fleetv1alpha1.LabelDrain: cluster}); err != nil {
		return ctrl.Result{}, fmt.Errorf("list the drain's moves: %w", err)
	}
	mc := &clusterv1.ManagedCluster{}
	switch err := r.Client.Get(ctx, req.NamespacedName, mc); {
	case apierrors.IsNotFound(err):
		return ctrl.Result{}, r.end(ctx, labelled.Items, func(m *fleetv1alpha1.FleetVirtualMachineMove) bool { return madeByAnyDrainOf(m, cluster) })
	case err != nil:
		return ctrl.Result{}, err
	case !fleetvirtualmachine.Draining(mc):
		return ctrl.Result{}, r.end(ctx, labelled.Items, func(m *fleetv1alpha1.FleetVirtualMachineMove) bool { return Made(m, mc) })
	}
	// Only the moves this drain made count (Made): a move carrying the
	// label but not the cluster's UID neither takes a slot nor keeps a
	// copy on the cluster.
	moves := ownMoves(labelled.Items, mc)

	fvms := &fleetv1alpha1.FleetVirtualMachineList{}
	if err := r.Client.List(ctx, fvms, client.MatchingFields{fleetvirtualmachine.IndexStatusCluster: cluster}); err != nil {
		return ctrl.Result{}, fmt.Errorf("list the FleetVirtualMachines on cluster %s: %w", cluster, err)
	}
	copies := CopiesOn(fvms.Items, cluster)
	had := map[string]bool{}
	var active []Copy
	for _, m := range moves {
		k := m.Namespace + "/" + m.Spec.FleetVirtualMachine
		had[k] = true
		if move.Active(m) {
			// The node the copy ran on when its move started: a VM held
			// stopped for the move runs on none.
			active = append(active, Copy{Namespace: m.Namespace, FleetVM: m.Spec.FleetVirtualMachine, Node: m.Annotations[AnnotationNode]})
		}
	}
	var waiting []Copy
	for _, c := range copies {
		if !had[c.key()] {
			waiting = append(waiting, c)
		}
	}
	next := Next(waiting, active, r.Limits)
	for _, c := range next {
		m := &fleetv1alpha1.FleetVirtualMachineMove{
			ObjectMeta: metav1.ObjectMeta{
				Name: MoveName(cluster, c.FleetVM), Namespace: c.Namespace,
				Labels:      map[string]string{fleetv1alpha1.LabelDrain: cluster, fleetv1alpha1.LabelPartOf: fleetv1alpha1.PartOfValue},
				Annotations: map[string]string{AnnotationNode: c.Node, AnnotationCluster: string(mc.UID)},
			},
			Spec: fleetv1alpha1.FleetVirtualMachineMoveSpec{FleetVirtualMachine: c.FleetVM, From: cluster, Method: fleetv1alpha1.MoveMethodAuto},
		}
		// One move per copy and drain: a move of that name, made before
		// a restart or by a reconcile from a cache behind, is left alone.
		if _, err := write.CreateOnly(ctx, r.Client, m); err != nil {
			return ctrl.Result{}, fmt.Errorf("create move %s/%s: %w", m.Namespace, m.Name, err)
		}
	}
	if len(next) > 0 && r.Recorder != nil {
		r.Recorder.Eventf(mc, "Normal", "Draining", "moving %d FleetVirtualMachine copies off the cluster (%d moving before, %d waiting after)",
			len(next), len(active), len(waiting)-len(next))
	}
	log.FromContext(ctx).V(1).Info("drain", "cluster", cluster, "copies", len(copies), "started", len(next), "active", len(active))
	return ctrl.Result{}, nil
}

// ownMoves are the moves of labelled that the drain of mc made.
func ownMoves(labelled []fleetv1alpha1.FleetVirtualMachineMove, mc *clusterv1.ManagedCluster) []*fleetv1alpha1.FleetVirtualMachineMove {
	var out []*fleetv1alpha1.FleetVirtualMachineMove
	for i := range labelled {
		if m := &labelled[i]; Made(m, mc) {
			out = append(out, m)
		}
	}
	return out
}

// end ends a drain: of the moves it made (own), those not started are
// deleted, the others kept (those under way finish; ended ones go, so a
// later drain starts afresh). A move it did not make is left alone,
// whatever its label says.
func (r *Reconciler) end(ctx context.Context, moves []fleetv1alpha1.FleetVirtualMachineMove, own func(*fleetv1alpha1.FleetVirtualMachineMove) bool) error {
	for i := range moves {
		m := &moves[i]
		if !own(m) || move.Started(m) {
			continue
		}
		if err := r.Client.Delete(ctx, m, client.Preconditions{ResourceVersion: &m.ResourceVersion}); err != nil &&
			!apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete move %s/%s: %w", m.Namespace, m.Name, err)
		}
	}
	return nil
}

// AnnotationNode on a drain's move names the node its copy ran on when
// the drain started moving it: the per-node limit counts it there.
const AnnotationNode = "fleetvm.io/node"

// MoveName is the name of the move a drain of cluster makes for a
// FleetVirtualMachine: "drain-<cluster>-<name>", shortened with a hash
// to fit 253 characters, so a drain makes one move per copy whatever
// restarts.
func MoveName(cluster, fvm string) string {
	name := "drain-" + cluster + "-" + fvm
	const maxLen = 253
	if len(name) <= maxLen {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return strings.TrimRight(name[:maxLen-11], "-.") + "-" + hex.EncodeToString(sum[:])[:10]
}
