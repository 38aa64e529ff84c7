package fleetenv

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ManagedCluster describes a cluster to register on the hub.
type ManagedCluster struct {
	// Name of the ManagedCluster (and of its namespace on the hub).
	Name string
	// Labels of the ManagedCluster, such as env=prod.
	Labels map[string]string
	// ClusterSet the cluster joins; "default" when empty.
	ClusterSet string
}

// RegisterManagedCluster does on the hub what OCM registration does when a
// spoke joins: the ManagedCluster (accepted, Available=True), its cluster
// namespace, and membership of a ManagedClusterSet (created if missing, with
// the exclusive cluster-set label selector).
func (f *Fleet) RegisterManagedCluster(ctx context.Context, mc ManagedCluster) error {
	c := f.Hub.Client
	set := mc.ClusterSet
	if set == "" {
		set = "default"
	}
	if err := EnsureClusterSet(ctx, c, set); err != nil {
		return err
	}
	labels := map[string]string{clusterv1beta2.ClusterSetLabel: set}
	for k, v := range mc.Labels {
		labels[k] = v
	}
	cluster := &clusterv1.ManagedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: mc.Name, Labels: labels},
		Spec:       clusterv1.ManagedClusterSpec{HubAcceptsClient: true},
	}
	if err := c.Create(ctx, cluster); err != nil {
		return fmt.Errorf("create ManagedCluster %s: %w", mc.Name, err)
	}
	if err := ensureNamespace(ctx, c, mc.Name); err != nil {
		return fmt.Errorf("create cluster namespace %s: %w", mc.Name, err)
	}
	return SetClusterAvailable(ctx, c, mc.Name, metav1.ConditionTrue)
}

// SetClusterAvailable sets the ManagedCluster's Available condition and, as
// the OCM registration controller does, the matching taint: unreachable
// (Unknown) or unavailable (False). True removes both taints.
func SetClusterAvailable(ctx context.Context, c client.Client, name string, status metav1.ConditionStatus) error {
	cluster := &clusterv1.ManagedCluster{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, cluster); err != nil {
		return err
	}
	reason := map[metav1.ConditionStatus]string{
		metav1.ConditionTrue:    "ManagedClusterAvailable",
		metav1.ConditionFalse:   "ManagedClusterUnavailable",
		metav1.ConditionUnknown: "ManagedClusterLeaseUpdateStopped",
	}[status]
	meta.SetStatusCondition(&cluster.Status.Conditions, metav1.Condition{
		Type: clusterv1.ManagedClusterConditionAvailable, Status: status, Reason: reason,
		Message: "set by the test environment",
	})
	meta.SetStatusCondition(&cluster.Status.Conditions, metav1.Condition{
		Type: clusterv1.ManagedClusterConditionJoined, Status: metav1.ConditionTrue, Reason: "ManagedClusterJoined",
	})
	meta.SetStatusCondition(&cluster.Status.Conditions, metav1.Condition{
		Type: clusterv1.ManagedClusterConditionHubAccepted, Status: metav1.ConditionTrue, Reason: "HubClusterAdminAccepted",
	})
	if err := c.Status().Update(ctx, cluster); err != nil {
		return fmt.Errorf("update ManagedCluster %s status: %w", name, err)
	}

	var taints []clusterv1.Taint
	for _, t := range cluster.Spec.Taints {
		if t.Key != clusterv1.ManagedClusterTaintUnavailable && t.Key != clusterv1.ManagedClusterTaintUnreachable {
			taints = append(taints, t)
		}
	}
	switch status {
	case metav1.ConditionFalse:
		taints = append(taints, clusterv1.Taint{Key: clusterv1.ManagedClusterTaintUnavailable, Effect: clusterv1.TaintEffectNoSelect, TimeAdded: metav1.Now()})
	case metav1.ConditionUnknown:
		taints = append(taints, clusterv1.Taint{Key: clusterv1.ManagedClusterTaintUnreachable, Effect: clusterv1.TaintEffectNoSelect, TimeAdded: metav1.Now()})
	}
	cluster.Spec.Taints = taints
	if err := c.Update(ctx, cluster); err != nil {
		return fmt.Errorf("update ManagedCluster %s taints: %w", name, err)
	}
	return nil
}

// ExposeClusterClaims does what OCM's registration agent does with a
// spoke's ClusterClaims: it copies them into the status.clusterClaims of
// the spoke's ManagedCluster, sorted by name, leaving out those labelled
// open-cluster-management.io/spoke-only. Once: the agent keeps them in
// step, but the fleet's claims do not change after they are made.
func (f *Fleet) ExposeClusterClaims(ctx context.Context, name string) error {
	spoke := f.Spoke(name)
	if spoke == nil {
		return fmt.Errorf("no spoke %s", name)
	}
	var list clusterv1alpha1.ClusterClaimList
	if err := spoke.Client.List(ctx, &list); err != nil {
		return fmt.Errorf("list ClusterClaims of %s: %w", name, err)
	}
	var claims []clusterv1.ManagedClusterClaim
	for _, c := range list.Items {
		if _, spokeOnly := c.Labels["open-cluster-management.io/spoke-only"]; !spokeOnly {
			claims = append(claims, clusterv1.ManagedClusterClaim{Name: c.Name, Value: c.Spec.Value})
		}
	}
	slices.SortFunc(claims, func(a, b clusterv1.ManagedClusterClaim) int { return strings.Compare(a.Name, b.Name) })
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cluster := &clusterv1.ManagedCluster{}
		if err := f.Hub.Client.Get(ctx, client.ObjectKey{Name: name}, cluster); err != nil {
			return err
		}
		cluster.Status.ClusterClaims = claims
		return f.Hub.Client.Status().Update(ctx, cluster)
	})
	if err != nil {
		return fmt.Errorf("expose the cluster claims of %s on its ManagedCluster: %w", name, err)
	}
	return nil
}

// EnsureClusterSet creates a ManagedClusterSet that selects its members by
// the exclusive cluster-set label, if it does not exist.
func EnsureClusterSet(ctx context.Context, c client.Client, name string) error {
	set := &clusterv1beta2.ManagedClusterSet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: clusterv1beta2.ManagedClusterSetSpec{ClusterSelector: clusterv1beta2.ManagedClusterSelector{
			SelectorType: clusterv1beta2.ExclusiveClusterSetLabel,
		}},
	}
	if err := c.Create(ctx, set); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ManagedClusterSet %s: %w", name, err)
	}
	return nil
}

// Tenant prepares a namespace of FleetVirtualMachines on the hub as an
// operator does for a team: the namespace, and a ManagedClusterSetBinding
// for each cluster set ("default" when none is given), so FleetVMs there
// may use them.
func (c *Cluster) Tenant(ctx context.Context, namespace string, sets ...string) error {
	if len(sets) == 0 {
		sets = []string{"default"}
	}
	for _, set := range sets {
		if err := BindClusterSet(ctx, c.Client, set, namespace); err != nil {
			return err
		}
	}
	return nil
}

// BindClusterSet binds a ManagedClusterSet to a namespace, so Placements
// there can select its clusters, and marks the binding Bound as the OCM
// registration controller would.
func BindClusterSet(ctx context.Context, c client.Client, set, namespace string) error {
	if err := ensureNamespace(ctx, c, namespace); err != nil {
		return err
	}
	b := &clusterv1beta2.ManagedClusterSetBinding{
		ObjectMeta: metav1.ObjectMeta{Name: set, Namespace: namespace},
		Spec:       clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: set},
	}
	if err := c.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ManagedClusterSetBinding %s/%s: %w", namespace, set, err)
	}
	return MarkBindingsBound(ctx, c, namespace)
}

// MarkBindingsBound sets Bound=True on every ManagedClusterSetBinding in the
// namespace whose ManagedClusterSet exists: the job of the OCM registration
// hub controller, which the fleet does not run.
func MarkBindingsBound(ctx context.Context, c client.Client, namespace string) error {
	var list clusterv1beta2.ManagedClusterSetBindingList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return err
	}
	for i := range list.Items {
		key := client.ObjectKeyFromObject(&list.Items[i])
		// The binding stand-in and a test may mark the same binding at
		// once: re-read on conflict, and stop when it is already Bound.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			b := &clusterv1beta2.ManagedClusterSetBinding{}
			if err := c.Get(ctx, key, b); err != nil {
				return client.IgnoreNotFound(err)
			}
			if meta.IsStatusConditionTrue(b.Status.Conditions, clusterv1beta2.ClusterSetBindingBoundType) {
				return nil
			}
			if err := c.Get(ctx, client.ObjectKey{Name: b.Spec.ClusterSet}, &clusterv1beta2.ManagedClusterSet{}); err != nil {
				return nil //nolint:nilerr // no set yet: the set's creation marks it later
			}
			meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{
				Type: clusterv1beta2.ClusterSetBindingBoundType, Status: metav1.ConditionTrue, Reason: "ClusterSetBound",
			})
			return c.Status().Update(ctx, b)
		})
		if err != nil {
			return fmt.Errorf("mark ManagedClusterSetBinding %s bound: %w", key, err)
		}
	}
	return nil
}
