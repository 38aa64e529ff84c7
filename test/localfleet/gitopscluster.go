package localfleet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Labels of Argo CD cluster secrets, as OCM's GitOpsCluster controller sets them.
const (
	labelArgoSecretType  = "argocd.argoproj.io/secret-type"
	labelACMCluster      = "apps.open-cluster-management.io/acm-cluster"
	labelClusterName     = "apps.open-cluster-management.io/cluster-name"
	labelClusterServer   = "apps.open-cluster-management.io/cluster-server"
	acmPlacementConfig   = "acm-placement"
	importSecretSuffix   = "-cluster-secret"
	gitOpsClusterPhaseOK = "successful"
	gitOpsClusterPhaseKO = "failed"
)

var gitOpsClusterGVK = schema.GroupVersionKind{Group: "apps.open-cluster-management.io", Version: "v1beta1", Kind: "GitOpsCluster"}

// GitOpsClusterStandIn stands in for OCM's GitOpsCluster controller (from
// multicloud-integrations), which cannot be built alongside this project's
// pinned dependencies. It does, for the local fleet, the part FleetVM
// relies on:
//
//   - for every GitOpsCluster, it reads the PlacementDecisions of its
//     placementRef and, for every decided ManagedCluster, copies the
//     cluster's credentials secret "<cluster>-cluster-secret" from the
//     cluster namespace (what OCM's cluster import leaves there; the local
//     fleet writes it, with admin credentials to the spoke's API server)
//     into the Argo CD namespace as an Argo CD cluster secret, labelled
//     argocd.argoproj.io/secret-type=cluster,
//     apps.open-cluster-management.io/acm-cluster=true,
//     apps.open-cluster-management.io/cluster-name and -cluster-server,
//     plus the ManagedCluster's own labels (env=prod, ...), which do not
//     override the former;
//   - it deletes the ACM cluster secrets no GitOpsCluster decides anymore;
//   - it creates the acm-placement ConfigMap that Argo CD's
//     clusterDecisionResource generator reads;
//   - it writes status.phase and status.message on each GitOpsCluster.
//
// It leaves out what the local fleet does not use: ManagedServiceAccount
// tokens, blank secrets for the pull model, the Argo CD agent, policy
// templates and the applicationset-controller RBAC (the local Argo CD runs
// with admin credentials).
type GitOpsClusterStandIn struct {
	Client client.Client
}

// SetupWithManager watches GitOpsClusters, PlacementDecisions,
// ManagedClusters and import secrets; any change reconciles every
// GitOpsCluster at once, as the real controller does.
func (g *GitOpsClusterStandIn) SetupWithManager(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: "all"}}}
	})
	gitOpsCluster := &unstructured.Unstructured{}
	gitOpsCluster.SetGroupVersionKind(gitOpsClusterGVK)
	return ctrl.NewControllerManagedBy(mgr).
		Named("gitopscluster-stand-in").
		Watches(gitOpsCluster, all).
		Watches(&clusterv1beta1.PlacementDecision{}, all).
		Watches(&clusterv1.ManagedCluster{}, all).
		Watches(&corev1.Secret{}, all).
		Complete(g)
}

// Reconcile brings every GitOpsCluster's cluster secrets in line.
func (g *GitOpsClusterStandIn) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gitOpsClusterGVK.GroupVersion().WithKind("GitOpsClusterList"))
	if err := g.Client.List(ctx, list); err != nil {
		return reconcile.Result{}, fmt.Errorf("list GitOpsClusters: %w", err)
	}
	var existing corev1.SecretList
	if err := g.Client.List(ctx, &existing, client.MatchingLabels{labelACMCluster: "true", labelArgoSecretType: "cluster"}); err != nil {
		return reconcile.Result{}, fmt.Errorf("list Argo CD cluster secrets: %w", err)
	}
	orphans := map[client.ObjectKey]bool{}
	for i := range existing.Items {
		orphans[client.ObjectKeyFromObject(&existing.Items[i])] = true
	}
	var errs []error
	for i := range list.Items {
		keep, err := g.reconcileOne(ctx, &list.Items[i])
		for _, k := range keep {
			delete(orphans, k)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		for key := range orphans {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}}
			if err := g.Client.Delete(ctx, s); client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("delete orphan cluster secret %s: %w", key, err))
			}
		}
	}
	return reconcile.Result{}, errors.Join(errs...)
}

// reconcileOne writes the cluster secrets of one GitOpsCluster and returns
// their keys.
func (g *GitOpsClusterStandIn) reconcileOne(ctx context.Context, gc *unstructured.Unstructured) ([]client.ObjectKey, error) {
	argoNS, _, _ := unstructured.NestedString(gc.Object, "spec", "argoServer", "argoNamespace")
	refKind, _, _ := unstructured.NestedString(gc.Object, "spec", "placementRef", "kind")
	refName, _, _ := unstructured.NestedString(gc.Object, "spec", "placementRef", "name")
	var keep []client.ObjectKey
	err := func() error {
		if argoNS == "" {
			return errors.New("spec.argoServer.argoNamespace is empty")
		}
		if refKind != "Placement" || refName == "" {
			return fmt.Errorf("spec.placementRef must name a Placement, got kind %q name %q", refKind, refName)
		}
		if err := g.ensureACMPlacementConfigMap(ctx, argoNS); err != nil {
			return err
		}
		clusters, err := g.decidedClusters(ctx, gc.GetNamespace(), refName)
		if err != nil {
			return err
		}
		var errs []error
		for _, mc := range clusters {
			key, err := g.ensureClusterSecret(ctx, argoNS, mc)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			keep = append(keep, key)
		}
		return errors.Join(errs...)
	}()
	phase, msg := gitOpsClusterPhaseOK, ""
	if err != nil {
		phase, msg = gitOpsClusterPhaseKO, err.Error()
	} else {
		names := make([]string, 0, len(keep))
		for _, k := range keep {
			names = append(names, strings.TrimSuffix(k.Name, importSecretSuffix))
		}
		msg = fmt.Sprintf("Added managed clusters [%s] to gitops namespace %s", strings.Join(names, " "), argoNS)
	}
	if serr := g.writeStatus(ctx, gc, phase, msg); serr != nil {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return keep, fmt.Errorf("GitOpsCluster %s/%s: %w", gc.GetNamespace(), gc.GetName(), err)
	}
	return keep, nil
}

func (g *GitOpsClusterStandIn) writeStatus(ctx context.Context, gc *unstructured.Unstructured, phase, msg string) error {
	oldPhase, _, _ := unstructured.NestedString(gc.Object, "status", "phase")
	oldMsg, _, _ := unstructured.NestedString(gc.Object, "status", "message")
	if oldPhase == phase && oldMsg == msg {
		return nil
	}
	patch := client.MergeFrom(gc.DeepCopy())
	_ = unstructured.SetNestedField(gc.Object, phase, "status", "phase")
	_ = unstructured.SetNestedField(gc.Object, msg, "status", "message")
	_ = unstructured.SetNestedField(gc.Object, metav1.Now().UTC().Format("2006-01-02T15:04:05Z"), "status", "lastUpdateTime")
	if err := g.Client.Status().Patch(ctx, gc, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("write status: %w", err)
	}
	return nil
}

// decidedClusters lists the ManagedClusters the Placement's decisions name.
func (g *GitOpsClusterStandIn) decidedClusters(ctx context.Context, ns, placement string) ([]*clusterv1.ManagedCluster, error) {
	var decisions clusterv1beta1.PlacementDecisionList
	if err := g.Client.List(ctx, &decisions, client.InNamespace(ns),
		client.MatchingLabels{clusterv1beta1.PlacementLabel: placement}); err != nil {
		return nil, fmt.Errorf("list PlacementDecisions of %s/%s: %w", ns, placement, err)
	}
	if len(decisions.Items) == 0 {
		return nil, fmt.Errorf("no placement decision found for placement: %s", placement)
	}
	var out []*clusterv1.ManagedCluster
	for _, d := range decisions.Items {
		for _, dec := range d.Status.Decisions {
			mc := &clusterv1.ManagedCluster{}
			if err := g.Client.Get(ctx, client.ObjectKey{Name: dec.ClusterName}, mc); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return nil, err
			}
			out = append(out, mc)
		}
	}
	slices.SortFunc(out, func(a, b *clusterv1.ManagedCluster) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// ensureClusterSecret copies the cluster's import secret into the Argo CD
// namespace with the labels Argo CD and ApplicationSets select on.
func (g *GitOpsClusterStandIn) ensureClusterSecret(ctx context.Context, argoNS string, mc *clusterv1.ManagedCluster) (client.ObjectKey, error) {
	name := mc.Name + importSecretSuffix
	src := &corev1.Secret{}
	if err := g.Client.Get(ctx, client.ObjectKey{Namespace: mc.Name, Name: name}, src); err != nil {
		return client.ObjectKey{}, fmt.Errorf("credentials of cluster %s (secret %s/%s): %w", mc.Name, mc.Name, name, err)
	}
	want := map[string]string{
		labelArgoSecretType: "cluster",
		labelACMCluster:     "true",
		labelClusterName:    mc.Name,
		labelClusterServer:  serverLabel(string(src.Data["server"])),
	}
	for k, v := range mc.Labels {
		if _, ok := want[k]; !ok {
			want[k] = v
		}
	}
	data := map[string][]byte{"name": []byte(mc.Name), "server": src.Data["server"], "config": src.Data["config"]}

	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: argoNS}}
	key := client.ObjectKeyFromObject(s)
	err := g.Client.Get(ctx, key, s)
	switch {
	case apierrors.IsNotFound(err):
		s.Labels, s.Data, s.Type = want, data, corev1.SecretTypeOpaque
		if err := g.Client.Create(ctx, s); err != nil {
			return key, fmt.Errorf("create cluster secret %s: %w", key, err)
		}
		return key, nil
	case err != nil:
		return key, err
	}
	if labelsContain(s.Labels, want) && maps.EqualFunc(s.Data, data, func(a, b []byte) bool { return string(a) == string(b) }) {
		return key, nil
	}
	patch := client.MergeFrom(s.DeepCopy())
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	maps.Copy(s.Labels, want)
	s.Data = data
	if err := g.Client.Patch(ctx, s, patch); err != nil {
		return key, fmt.Errorf("update cluster secret %s: %w", key, err)
	}
	return key, nil
}

// ensureACMPlacementConfigMap creates the ConfigMap that tells Argo CD's
// clusterDecisionResource generator how to read PlacementDecisions.
func (g *GitOpsClusterStandIn) ensureACMPlacementConfigMap(ctx context.Context, ns string) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: acmPlacementConfig, Namespace: ns},
		Data: map[string]string{
			"apiVersion":    clusterv1beta1.GroupVersion.String(),
			"kind":          "placementdecisions",
			"statusListKey": "decisions",
			"matchKey":      "clusterName",
		},
	}
	if err := g.Client.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ConfigMap %s/%s: %w", ns, acmPlacementConfig, err)
	}
	return nil
}

// serverLabel is the API server's host, the form the real controller puts
// in a label (no scheme, no port, at most 63 characters).
func serverLabel(server string) string {
	host := server
	if u, err := url.Parse(server); err == nil && u.Hostname() != "" {
		host = u.Hostname()
	}
	if len(host) > 63 {
		host = host[:63]
	}
	return host
}

func labelsContain(have, want map[string]string) bool {
	return labels.SelectorFromSet(want).Matches(labels.Set(have))
}
