// Package appsetsim runs Argo CD's own ApplicationSet code (its generators,
// template renderer and Application write, from the argo-cd v3 module)
// against a hub API server, once per call, the way the
// applicationset-controller does with policy create-update: Applications
// are created or updated, never deleted. Tests use it where no Argo CD
// controller runs; nothing is reimplemented but the controller's few
// lines that set an Application's fields before it writes it (restated in
// appsetwrite): what Argo CD would render and write is what the tests
// check.
package appsetsim

import (
	"context"
	"fmt"

	appsettemplate "github.com/argoproj/argo-cd/v3/applicationset/controllers/template"
	"github.com/argoproj/argo-cd/v3/applicationset/generators"
	"github.com/argoproj/argo-cd/v3/applicationset/utils"
	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	log "github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetvm/fleetvm/test/appsetwrite"
)

// Sim renders ApplicationSets in one Argo CD namespace.
type Sim struct {
	Namespace string
	Client    client.Client
	gens      map[string]generators.Generator
}

// New builds a Sim for the hub at cfg.
func New(ctx context.Context, cfg *rest.Config, c client.Client, namespace string) (*Sim, error) {
	log.SetLevel(log.WarnLevel)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Sim{
		Namespace: namespace,
		Client:    c,
		gens:      generators.GetGenerators(ctx, c, kube, namespace, nil, dyn, generators.SCMConfig{}),
	}, nil
}

// Setup creates the acm-placement ConfigMap the clusterDecisionResource
// generator reads (as OCM's GitOps integration installs it).
func (s *Sim) Setup(ctx context.Context) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "acm-placement", Namespace: s.Namespace},
		Data: map[string]string{
			"apiVersion":    "cluster.open-cluster-management.io/v1beta1",
			"kind":          "placementdecisions",
			"statusListKey": "decisions",
			"matchKey":      "clusterName",
		},
	}
	if err := s.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.Namespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err := s.Client.Create(ctx, cm); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// ClusterSecret creates the Argo CD cluster secret GitOpsCluster makes for
// a managed cluster: named after it, labelled with its name and with the
// ManagedCluster's labels.
func (s *Sim) ClusterSecret(ctx context.Context, cluster string, labels map[string]string) error {
	l := map[string]string{
		"argocd.argoproj.io/secret-type":               "cluster",
		"apps.open-cluster-management.io/cluster-name": cluster,
		"apps.open-cluster-management.io/acm-cluster":  "true",
	}
	for k, v := range labels {
		l[k] = v
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: cluster + "-cluster-secret", Namespace: s.Namespace, Labels: l},
		StringData: map[string]string{"name": cluster, "server": "https://" + cluster + ".fleet.invalid:6443", "config": "{}"},
	}
	if err := s.Client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// Render returns the Applications Argo CD generates for an ApplicationSet.
func (s *Sim) Render(appSet *argov1alpha1.ApplicationSet) ([]argov1alpha1.Application, error) {
	apps, reason, err := appsettemplate.GenerateApplications(log.NewEntry(log.StandardLogger()), *appSet, s.gens, &utils.Render{}, s.Client)
	if err != nil {
		return nil, fmt.Errorf("generate Applications of %s (%s): %w", appSet.Name, reason, err)
	}
	return apps, nil
}

// Sync renders the ApplicationSet and creates or updates its Applications,
// owned by it, as the applicationset-controller does with create-update.
// Like it, it writes nothing for an ApplicationSet being deleted (Argo CD
// then also takes its owner references off the Applications; FleetVM does
// that itself before it lets an ApplicationSet go).
func (s *Sim) Sync(ctx context.Context, key client.ObjectKey) ([]argov1alpha1.Application, error) {
	appSet := &argov1alpha1.ApplicationSet{}
	if err := s.Client.Get(ctx, key, appSet); err != nil {
		return nil, err
	}
	if appSet.DeletionTimestamp != nil {
		return nil, nil
	}
	return s.SyncFrom(ctx, appSet)
}

// SyncFrom renders appSet as given and creates or updates its
// Applications, each as the applicationset-controller writes it
// (appsetwrite): from the ApplicationSet its cache holds, which may be
// behind the API server, one deleted there among them.
func (s *Sim) SyncFrom(ctx context.Context, appSet *argov1alpha1.ApplicationSet) ([]argov1alpha1.Application, error) {
	apps, err := s.Render(appSet)
	if err != nil {
		return nil, err
	}
	for i := range apps {
		want := apps[i]
		want.Namespace = s.Namespace
		if _, err := appsetwrite.Application(ctx, s.Client, appSet, want); err != nil {
			return nil, fmt.Errorf("create or update Application %s: %w", want.Name, err)
		}
	}
	return apps, nil
}
