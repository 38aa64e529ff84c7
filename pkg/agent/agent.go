// Package agent runs the fleetvm agent of one managed cluster: it reads
// nodes, pods and KubeVirt/CDI objects on its spoke and writes the
// cluster's capacity score, VM reports and image inventory into the
// cluster namespace on the hub.
package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/agent/capacity"
	"github.com/fleetvm/fleetvm/pkg/agent/inventory"
	"github.com/fleetvm/fleetvm/pkg/agent/vmstatus"
)

// Options configure the agent.
type Options struct {
	// ClusterName is the managed cluster's name: its namespace on the hub.
	ClusterName string
	// SpokeConfig reaches the managed cluster.
	SpokeConfig *rest.Config
	// HubConfig reaches the hub (the addon's hub kubeconfig).
	HubConfig *rest.Config

	// HealthProbeBindAddress serves /healthz and /readyz; "0" or "" turns it off.
	HealthProbeBindAddress string
	// MetricsBindAddress serves metrics; "0" or "" turns them off.
	MetricsBindAddress string

	// AlsoRun adds more controllers to the spoke manager before it
	// starts. The product sets none; the local fleet and the tests add
	// their KubeVirt simulator (test/simulator) this way, so that it runs
	// beside the agent without being part of it.
	AlsoRun func(spoke manager.Manager) error

	// CapacityDebounce, CapacityResync and ScoreValidity tune the capacity
	// score; the capacity package's defaults when 0.
	CapacityDebounce, CapacityResync, ScoreValidity time.Duration

	// Clock is the capacity score's clock; the real clock when nil.
	Clock clock.PassiveClock
	// Logger is the agent's logger; controller-runtime's global one when unset.
	Logger logr.Logger
	// WrapHubClient, when set, wraps the client the agent writes the hub
	// with (tests count writes with it).
	WrapHubClient func(client.Client) client.Client
}

// NewScheme returns a scheme with every type the agent reads or writes.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		fleetv1alpha1.AddToScheme,
		clusterv1alpha1.Install,
		kubevirtv1.AddToScheme,
		cdiv1beta1.AddToScheme,
	} {
		utilruntime.Must(add(s))
	}
	return s
}

func orOff(addr string) string {
	if addr == "" {
		return "0"
	}
	return addr
}

// Run runs the agent until ctx ends.
func Run(ctx context.Context, opts Options) error {
	if opts.ClusterName == "" {
		return errors.New("agent: the cluster name is required")
	}
	if opts.SpokeConfig == nil || opts.HubConfig == nil {
		return errors.New("agent: both the spoke and the hub configs are required")
	}
	clk := opts.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	logger := opts.Logger
	if logger.GetSink() == nil {
		logger = ctrl.Log.WithName("fleetvm-agent")
	}
	logger = logger.WithValues("cluster", opts.ClusterName)
	scheme := NewScheme()

	mgr, err := ctrl.NewManager(opts.SpokeConfig, ctrl.Options{
		Scheme:                 scheme,
		Logger:                 logger,
		Metrics:                metricsserver.Options{BindAddress: orOff(opts.MetricsBindAddress)},
		HealthProbeBindAddress: orOff(opts.HealthProbeBindAddress),
		// Several agents may run in one process (the local fleet, tests).
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		Cache: cache.Options{
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				// Only pods bound to a node hold capacity.
				&corev1.Pod{}: {Field: fields.OneTermNotEqualSelector("spec.nodeName", "")},
			},
		},
	})
	if err != nil {
		return fmt.Errorf("spoke manager: %w", err)
	}
	hub, err := cluster.New(opts.HubConfig, func(o *cluster.Options) {
		o.Scheme = scheme
		o.Logger = logger.WithName("hub")
		o.Cache = cache.Options{
			DefaultNamespaces: map[string]cache.Config{opts.ClusterName: {}},
			DefaultTransform:  cache.TransformStripManagedFields(),
			// The agent may read one ConfigMap of its namespace, by name:
			// its hub Role grants list/watch on fleetvm-shapes only.
			ByObject: map[client.Object]cache.ByObject{
				&corev1.ConfigMap{}: {Field: fields.OneTermEqualSelector("metadata.name", fleetv1alpha1.ShapesConfigMapName)},
			},
		}
	})
	if err != nil {
		return fmt.Errorf("hub client: %w", err)
	}
	if err := mgr.Add(hub); err != nil {
		return fmt.Errorf("add hub cluster: %w", err)
	}
	hubClient := hub.GetClient()
	if opts.WrapHubClient != nil {
		hubClient = opts.WrapHubClient(hubClient)
	}

	capRec := &capacity.Reconciler{
		Spoke: mgr.GetClient(), Hub: hubClient, Namespace: opts.ClusterName, Clock: clk,
		Debounce: opts.CapacityDebounce, Resync: opts.CapacityResync, Validity: opts.ScoreValidity,
	}
	if err := capRec.SetupWithManager(mgr, hub); err != nil {
		return err
	}
	vs := &vmstatus.Reconciler{Spoke: mgr.GetClient(), Hub: hubClient, Namespace: opts.ClusterName}
	if err := vs.SetupWithManager(mgr, hub); err != nil {
		return err
	}
	inv := &inventory.Reconciler{Spoke: mgr.GetClient(), Hub: hubClient, Namespace: opts.ClusterName}
	if err := inv.SetupWithManager(mgr, hub); err != nil {
		return err
	}
	if opts.AlsoRun != nil {
		if err := opts.AlsoRun(mgr); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("add health check: %w", err)
	}
	var hubSynced atomic.Bool
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		hubSynced.Store(hub.GetCache().WaitForCacheSync(ctx))
		<-ctx.Done()
		return nil
	})); err != nil {
		return fmt.Errorf("add hub sync watcher: %w", err)
	}
	if err := mgr.AddReadyzCheck("hub-cache", func(*http.Request) error {
		if !hubSynced.Load() {
			return errors.New("hub cache not synced yet")
		}
		return nil
	}); err != nil {
		return fmt.Errorf("add ready check: %w", err)
	}
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("agent of cluster %s: %w", opts.ClusterName, err)
	}
	return nil
}
