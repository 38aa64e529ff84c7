package capacity

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/capacity"
	"github.com/fleetvm/fleetvm/pkg/write"
)

// Condition of the AddOnPlacementScore and its reasons.
const (
	// ConditionScoresValid tells whether the scores cover every shape the hub asked for.
	ConditionScoresValid = "ScoresValid"
	// ReasonComputed: every score was computed.
	ReasonComputed = "Computed"
	// ReasonShapesInvalid: the shapes ConfigMap could not be decoded; only
	// the free CPU and memory scores are published.
	ReasonShapesInvalid = "ShapesInvalid"
)

// Defaults of the Reconciler's timings.
const (
	DefaultValidity = 3 * time.Minute
	DefaultResync   = 60 * time.Second
	DefaultDebounce = 5 * time.Second
)

// Reconciler publishes the fleetvm-capacity AddOnPlacementScore of one
// spoke into its cluster namespace on the hub.
type Reconciler struct {
	// Spoke reads nodes and pods of the spoke (a cached client).
	Spoke client.Reader
	// Hub reads the shapes ConfigMap and writes the score in Namespace.
	Hub client.Client
	// Namespace is the cluster namespace on the hub.
	Namespace string
	// Clock sets validUntil and decides when the score must be renewed.
	Clock clock.PassiveClock
	// Validity is how long a published score stays valid; DefaultValidity when 0.
	Validity time.Duration
	// Resync is the longest time between two computations; DefaultResync when 0.
	Resync time.Duration
	// Debounce delays a computation after a change so that bursts of
	// events cost one computation; DefaultDebounce when 0.
	Debounce time.Duration
}

func (r *Reconciler) validity() time.Duration {
	if r.Validity > 0 {
		return r.Validity
	}
	return DefaultValidity
}

func (r *Reconciler) resync() time.Duration {
	if r.Resync > 0 {
		return r.Resync
	}
	return DefaultResync
}

func (r *Reconciler) debounce() time.Duration {
	if r.Debounce > 0 {
		return r.Debounce
	}
	return DefaultDebounce
}

func (r *Reconciler) key() reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: r.Namespace, Name: fleetv1alpha1.CapacityScoreName}}
}

// Reconcile computes the scores and writes them when they changed or when
// validUntil is less than half the validity away.
func (r *Reconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	var nodes corev1.NodeList
	if err := r.Spoke.List(ctx, &nodes); err != nil {
		return reconcile.Result{}, fmt.Errorf("list nodes: %w", err)
	}
	var pods corev1.PodList
	if err := r.Spoke.List(ctx, &pods); err != nil {
		return reconcile.Result{}, fmt.Errorf("list pods: %w", err)
	}
	cond := metav1.Condition{Type: ConditionScoresValid, Status: metav1.ConditionTrue, Reason: ReasonComputed,
		Message: "free capacity and VM shape fits computed from schedulable nodes"}
	shapes, err := r.shapes(ctx)
	if err != nil {
		if !apierrors.IsNotFound(err) && !isDecodeError(err) {
			return reconcile.Result{}, err
		}
		if isDecodeError(err) {
			cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonShapesInvalid, err.Error()
		}
	}
	nets, err := ReadNetworks(ctx, r.Spoke)
	if err != nil {
		return reconcile.Result{}, err
	}
	scores := Scores(nodes.Items, pods.Items, shapes, nets)
	if err := r.publish(ctx, scores, cond); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: r.resync()}, nil
}

// NetworkAttachmentDefinitionGVK is Multus' NetworkAttachmentDefinition;
// the agent reads only its metadata.
var NetworkAttachmentDefinitionGVK = schema.GroupVersionKind{Group: "k8s.cni.cncf.io", Version: "v1", Kind: "NetworkAttachmentDefinition"}

// ReadNetworks lists the spoke's NetworkAttachmentDefinitions with the
// node resource each needs. A cluster without Multus (no such kind) has
// none.
func ReadNetworks(ctx context.Context, c client.Reader) (Networks, error) {
	var list metav1.PartialObjectMetadataList
	list.SetGroupVersionKind(NetworkAttachmentDefinitionGVK.GroupVersion().WithKind("NetworkAttachmentDefinitionList"))
	if err := c.List(ctx, &list); err != nil {
		if meta.IsNoMatchError(err) {
			return Networks{}, nil
		}
		return nil, fmt.Errorf("list NetworkAttachmentDefinitions: %w", err)
	}
	out := make(Networks, len(list.Items))
	for _, n := range list.Items {
		out[n.Namespace+"/"+n.Name] = corev1.ResourceName(n.Annotations[AnnotationResourceName])
	}
	return out, nil
}

type decodeError struct{ error }

func (e decodeError) Unwrap() error { return e.error }

func isDecodeError(err error) bool {
	var d decodeError
	return errors.As(err, &d)
}

func (r *Reconciler) shapes(ctx context.Context) ([]capacity.Shape, error) {
	var cm corev1.ConfigMap
	key := client.ObjectKey{Namespace: r.Namespace, Name: fleetv1alpha1.ShapesConfigMapName}
	if err := r.Hub.Get(ctx, key, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, err
		}
		return nil, fmt.Errorf("get ConfigMap %s: %w", key, err)
	}
	shapes, err := capacity.DecodeShapes(cm.Data[fleetv1alpha1.ShapesConfigMapKey])
	if err != nil {
		return nil, decodeError{fmt.Errorf("ConfigMap %s key %s: %w", key, fleetv1alpha1.ShapesConfigMapKey, err)}
	}
	return shapes, nil
}

func (r *Reconciler) publish(ctx context.Context, scores []clusterv1alpha1.AddOnPlacementScoreItem, cond metav1.Condition) error {
	now := r.Clock.Now()
	key := client.ObjectKey{Namespace: r.Namespace, Name: fleetv1alpha1.CapacityScoreName}
	want := &clusterv1alpha1.AddOnPlacementScore{ObjectMeta: metav1.ObjectMeta{
		Namespace: r.Namespace, Name: fleetv1alpha1.CapacityScoreName,
		Labels: map[string]string{fleetv1alpha1.LabelPartOf: fleetv1alpha1.PartOfValue},
	}}
	score := &clusterv1alpha1.AddOnPlacementScore{}
	switch err := r.Hub.Get(ctx, key, score); {
	case apierrors.IsNotFound(err):
		score = nil
	case err != nil:
		return fmt.Errorf("get AddOnPlacementScore %s: %w", key, err)
	}
	if out, err := write.Ensure(ctx, r.Hub, want, score); err != nil {
		return fmt.Errorf("write AddOnPlacementScore %s: %w", key, err)
	} else if out == write.Created {
		score = want
	}
	if !NeedsWrite(&score.Status, scores, cond, now, r.validity()) {
		return nil
	}
	before := score.DeepCopy()
	cond.LastTransitionTime = metav1.NewTime(now)
	meta.SetStatusCondition(&score.Status.Conditions, cond)
	score.Status.Scores = scores
	validUntil := metav1.NewTime(now.Add(r.validity()))
	score.Status.ValidUntil = &validUntil
	if _, err := write.Status(ctx, r.Hub, before, score); err != nil {
		return fmt.Errorf("write AddOnPlacementScore %s status: %w", key, err)
	}
	return nil
}

// NeedsWrite tells whether the published status must be rewritten: the
// scores or the condition changed, or validUntil is missing or less than
// half the validity away.
func NeedsWrite(status *clusterv1alpha1.AddOnPlacementScoreStatus, scores []clusterv1alpha1.AddOnPlacementScoreItem, cond metav1.Condition, now time.Time, validity time.Duration) bool {
	if !apiequality.Semantic.DeepEqual(status.Scores, scores) {
		return true
	}
	old := meta.FindStatusCondition(status.Conditions, cond.Type)
	if old == nil || old.Status != cond.Status || old.Reason != cond.Reason || old.Message != cond.Message {
		return true
	}
	return status.ValidUntil == nil || status.ValidUntil.Sub(now) < validity/2
}

// SetupWithManager registers the controller: nodes and pods on the spoke
// (the manager's cache), the shapes ConfigMap and the score on the hub.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, hub cluster.Cluster) error {
	key, d := r.key(), r.debounce()
	inNamespace := func(o client.Object) bool { return o.GetNamespace() == r.Namespace }
	err := r.watchNetworks(mgr, ctrl.NewControllerManagedBy(mgr)).
		Named("fleetvm-capacity").
		WatchesRawSource(source.Kind(mgr.GetCache(), &corev1.Node{}, debounced(key, d, nil, nodeChanged))).
		WatchesRawSource(source.Kind(mgr.GetCache(), &corev1.Pod{}, debounced(key, d, func(p *corev1.Pod) bool { return p.Spec.NodeName != "" }, podChanged))).
		WatchesRawSource(source.Kind(hub.GetCache(), &corev1.ConfigMap{}, debounced(key, d,
			func(cm *corev1.ConfigMap) bool {
				return inNamespace(cm) && cm.Name == fleetv1alpha1.ShapesConfigMapName
			},
			func(o, n *corev1.ConfigMap) bool { return !apiequality.Semantic.DeepEqual(o.Data, n.Data) }))).
		WatchesRawSource(source.Kind(hub.GetCache(), &clusterv1alpha1.AddOnPlacementScore{}, debounced(key, d,
			func(s *clusterv1alpha1.AddOnPlacementScore) bool {
				return inNamespace(s) && s.Name == fleetv1alpha1.CapacityScoreName
			},
			func(o, n *clusterv1alpha1.AddOnPlacementScore) bool {
				return !apiequality.Semantic.DeepEqual(o.Status, n.Status)
			}))).
		Complete(write.Requeue(r))
	if err != nil {
		return fmt.Errorf("set up capacity controller: %w", err)
	}
	return nil
}

// watchNetworks adds a watch on NetworkAttachmentDefinitions when the
// spoke serves them.
func (r *Reconciler) watchNetworks(mgr ctrl.Manager, b *builder.TypedBuilder[reconcile.Request]) *builder.TypedBuilder[reconcile.Request] {
	return WatchNetworks(mgr, b, debounced(r.key(), r.debounce(), nil,
		func(o, n client.Object) bool {
			return o.GetAnnotations()[AnnotationResourceName] != n.GetAnnotations()[AnnotationResourceName]
		}))
}

// WatchNetworks adds to b a watch, through h, on the spoke's
// NetworkAttachmentDefinitions (their metadata) when the spoke serves
// them; without Multus there is nothing to watch, and a Multus installed
// later is seen at the next resync.
func WatchNetworks(mgr ctrl.Manager, b *builder.TypedBuilder[reconcile.Request], h handler.TypedEventHandler[client.Object, reconcile.Request]) *builder.TypedBuilder[reconcile.Request] {
	if _, err := mgr.GetRESTMapper().RESTMapping(NetworkAttachmentDefinitionGVK.GroupKind(), NetworkAttachmentDefinitionGVK.Version); err != nil {
		return b
	}
	nad := &metav1.PartialObjectMetadata{}
	nad.SetGroupVersionKind(NetworkAttachmentDefinitionGVK)
	return b.WatchesRawSource(source.Kind(mgr.GetCache(), client.Object(nad), h))
}

func nodeChanged(o, n *corev1.Node) bool {
	return o.Spec.Unschedulable != n.Spec.Unschedulable ||
		nodeReady(o) != nodeReady(n) ||
		o.Labels[LabelKubeVirtSchedulable] != n.Labels[LabelKubeVirtSchedulable] ||
		!apiequality.Semantic.DeepEqual(o.Status.Allocatable, n.Status.Allocatable)
}

func podChanged(o, n *corev1.Pod) bool {
	if o.Spec.NodeName != n.Spec.NodeName || Terminated(o) != Terminated(n) {
		return true
	}
	oc, om := PodRequests(o)
	nc, nm := PodRequests(n)
	return oc.Cmp(nc) != 0 || om.Cmp(nm) != 0
}

// debounced enqueues key after d on every create and delete of an object
// for which relevant is true (every object when nil) and every update for
// which changed is true. The work queue keeps the earliest pending time, so
// a burst of events costs one computation at most d after the first.
func debounced[T client.Object](key reconcile.Request, d time.Duration, relevant func(T) bool, changed func(o, n T) bool) handler.TypedEventHandler[T, reconcile.Request] {
	ok := func(o T) bool { return relevant == nil || relevant(o) }
	return handler.TypedFuncs[T, reconcile.Request]{
		CreateFunc: func(_ context.Context, e event.TypedCreateEvent[T], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if ok(e.Object) {
				q.AddAfter(key, d)
			}
		},
		UpdateFunc: func(_ context.Context, e event.TypedUpdateEvent[T], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if ok(e.ObjectNew) && changed(e.ObjectOld, e.ObjectNew) {
				q.AddAfter(key, d)
			}
		},
		DeleteFunc: func(_ context.Context, e event.TypedDeleteEvent[T], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if ok(e.Object) {
				q.AddAfter(key, d)
			}
		},
	}
}
