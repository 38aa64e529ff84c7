// Command fleetvm-hub runs FleetVM on an OCM hub: the FleetVirtualMachine
// controller, the admission webhooks, and metrics and health endpoints.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	fleetaddon "github.com/fleetvm/fleetvm/pkg/addon"
	"github.com/fleetvm/fleetvm/pkg/certs"
	"github.com/fleetvm/fleetvm/pkg/controller/drain"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetdiskimage"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine"
	"github.com/fleetvm/fleetvm/pkg/hub"
	"github.com/fleetvm/fleetvm/pkg/memlimit"
	fleetmetrics "github.com/fleetvm/fleetvm/pkg/metrics"
	"github.com/fleetvm/fleetvm/pkg/tenancy"
	"github.com/fleetvm/fleetvm/pkg/validation"
	fleetwebhook "github.com/fleetvm/fleetvm/pkg/webhook"
)

func main() {
	var (
		opts           = hub.Options{FleetVM: fleetvirtualmachine.DefaultConfig()}
		metricsAddr    string
		metricsSecure  bool
		probeAddr      string
		pprofAddr      string
		webhookPort    int
		certDir        string
		leaderElection bool
		disableWebhook bool
		qps            float64
		burst          int
		streamingLists bool
		agentImage     string
		disableAddon   bool
		addonOpts      fleetaddon.Options
		certOpts       certs.Options
	)
	c := &opts.FleetVM
	flag.StringVar(&c.ArgoNamespace, "argocd-namespace", c.ArgoNamespace, "Namespace of Argo CD (argocd, openshift-gitops, ...): Placements, ApplicationSets and GitOpsClusters go there.")
	flag.StringVar(&c.EnvironmentLabel, "environment-label", c.EnvironmentLabel, "ManagedCluster label whose value spec.placement.environment selects.")
	flag.StringVar(&c.Chart.RepoURL, "vm-chart-repo-url", c.Chart.RepoURL, "Repository of the fleetvm-vm Helm chart that carries inline VM templates (git or Helm repository).")
	flag.StringVar(&c.Chart.Path, "vm-chart-path", c.Chart.Path, "Path of the chart in a git repository (empty for a Helm repository).")
	flag.StringVar(&c.Chart.Chart, "vm-chart-name", c.Chart.Chart, "Chart name in a Helm repository (empty for a git repository).")
	flag.StringVar(&c.Chart.TargetRevision, "vm-chart-revision", c.Chart.TargetRevision, "Git revision or chart version of the fleetvm-vm chart.")
	flag.DurationVar(&c.GracePeriod, "removal-grace-period", c.GracePeriod, "How long a cluster must stay excluded by the user's intent (its labels or cluster sets, the FleetVirtualMachine's spec) before its VM is removed. Capacity and availability never remove a VM.")
	flag.Var(tenancy.KindsFlag(&c.TenantKinds), "tenant-kinds", "Namespaced kinds a namespace's FleetVirtualMachines may deliver, as group/Kind (Kind alone for the core group), comma-separated: their Argo CD AppProject allows these and nothing cluster-scoped.")
	opts.DiskImages = fleetdiskimage.DefaultConfig()
	flag.StringVar(&c.ImageNamespace, "image-namespace", c.ImageNamespace, "Namespace on the managed clusters where FleetDiskImages are imported (CDI DataVolume + DataSource).")
	flag.Var(validation.NamespacesFlag(&c.SharedImageNamespaces), "shared-image-namespaces", "Namespaces on the managed clusters whose DataSources, PVCs and snapshots every team's inline VM may clone, comma-separated (empty: none); any other namespace but the team's own is refused. Never the image namespace.")
	flag.IntVar(&c.ShapesPerNamespace, "shapes-per-namespace", c.ShapesPerNamespace, "Most distinct VM shapes (CPU, memory, networks) one namespace's FleetVirtualMachines add to the shapes every agent scores; a FleetVirtualMachine past it is placed nowhere new (reason ShapeLimitExceeded).")
	flag.DurationVar(&opts.DiskImages.InventoryMaxAge, "image-inventory-max-age", opts.DiskImages.InventoryMaxAge, "An agent's image inventory older than this is stale: no image is pruned on its word.")
	flag.IntVar(&opts.Workers, "workers", 0, "Parallel FleetVirtualMachine reconciles (0: one per CPU the hub gets, 8 to 32).")
	flag.IntVar(&opts.Drain.PerCluster, "drain-moves-per-cluster", drain.DefaultLimits.PerCluster, "Moves a drain runs at once off one cluster (KubeVirt's parallelMigrationsPerCluster default).")
	flag.IntVar(&opts.Drain.PerNode, "drain-moves-per-node", drain.DefaultLimits.PerNode, "Moves a drain runs at once off one node (KubeVirt's parallelOutboundMigrationsPerNode default).")
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8443", "Metrics endpoint address; 0 disables it.")
	flag.BoolVar(&metricsSecure, "metrics-secure", true, "Serve metrics over HTTPS to authenticated, authorized clients only (a token whose user may get the /metrics URL); false serves plain HTTP to anyone who reaches the port.")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "Health probe endpoint address.")
	flag.StringVar(&pprofAddr, "pprof-bind-address", "0", "Go profiling endpoint address (net/http/pprof, unauthenticated: bind it to localhost); 0 disables it.")
	flag.IntVar(&webhookPort, "webhook-port", 9443, "Admission webhook port.")
	flag.StringVar(&certDir, "webhook-cert-dir", "", "Folder with the webhook serving certificate (tls.crt, tls.key); controller-runtime's default when empty.")
	flag.BoolVar(&disableWebhook, "disable-webhooks", false, "Do not serve admission webhooks (the CRD's own validation still applies; the controller adds its finalizer to new FleetVirtualMachines itself).")
	flag.BoolVar(&leaderElection, "leader-elect", false, "Elect a leader, for more than one replica.")
	flag.Float64Var(&qps, "kube-api-qps", 0, "Queries per second to the hub API server (0: 60 per CPU the hub gets, 200 to 1,000).")
	flag.IntVar(&burst, "kube-api-burst", 0, "Burst of queries to the hub API server (0: twice the queries per second).")
	flag.BoolVar(&streamingLists, "streaming-lists", hub.StreamingListsDefault(), "Fill the caches with streaming lists (client-go's WatchListClient; default: "+hub.WatchListEnv+" in the environment, else false): a slower start and more API server CPU, and no lower a peak of memory than the hub's own lists, which it reads item by item. Kept for hubs that set it.")
	flag.StringVar(&agentImage, "agent-image", "ghcr.io/fleetvm/fleetvm:v0.1.0", "Image of fleetvm-agent that the addon deploys to managed clusters.")
	flag.BoolVar(&disableAddon, "disable-addon", false, "Do not run the OCM addon manager that installs fleetvm-agent on managed clusters.")
	flag.StringVar((*string)(&addonOpts.InstallStrategy), "addon-install-strategy", string(fleetaddon.InstallPlacements), "Which managed clusters get fleetvm-agent: Placements (those the addon Placement selects) or Manual (where an operator creates a ManagedClusterAddOn named fleetvm).")
	flag.StringVar(&addonOpts.PlacementNamespace, "addon-placement-namespace", fleetaddon.DefaultPlacementNamespace, "Namespace of the Placement that selects the clusters for fleetvm-agent (Placements strategy); created with every cluster of the global set when missing.")
	flag.StringVar(&addonOpts.PlacementName, "addon-placement-name", fleetaddon.DefaultPlacementName, "Name of the Placement that selects the clusters for fleetvm-agent (Placements strategy).")
	certOpts.BindFlags(flag.CommandLine)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	opts.DiskImages.ImageNamespace = c.ImageNamespace

	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")
	memlimit.Setup(log)
	cpus := runtime.GOMAXPROCS(0) // the container's CPU limit, or the node's cores
	if opts.Workers <= 0 {
		opts.Workers = hub.DefaultWorkers(cpus)
	}
	if qps <= 0 {
		qps = hub.DefaultQPS(cpus)
	}
	if burst <= 0 {
		burst = hub.DefaultBurst(qps)
	}
	hub.StreamLists(streamingLists)
	log.Info("parallel reconciles and client limits", "cpus", cpus, "workers", opts.Workers, "qps", qps, "burst", burst, "streamingLists", streamingLists)

	// Everything after flags and logger fails one way: logged once, exit 1.
	run := func() error {
		if slices.Contains(c.SharedImageNamespaces, c.ImageNamespace) {
			return fmt.Errorf("invalid settings: --shared-image-namespaces lists the image namespace %s, which holds every namespace's FleetDiskImages", c.ImageNamespace)
		}
		addonOpts.AgentImage = agentImage
		if _, err := fleetaddon.ClusterManagementAddOn(addonOpts); err != nil && !disableAddon {
			return fmt.Errorf("invalid addon settings: %w", err)
		}
		cfg, err := ctrl.GetConfig()
		if err != nil {
			return fmt.Errorf("no hub kubeconfig: %w", err)
		}
		cfg.QPS, cfg.Burst = float32(qps), burst
		cfg.WarningHandlerWithContext = hub.WarningHandler()

		webhookOpts := webhook.Options{Port: webhookPort, CertDir: certDir}
		var rotator *certs.Rotator
		if certOpts.Mode == certs.ModeSelfManaged && !disableWebhook {
			// Uncached: the rotator gets one Secret and one webhook
			// configuration by name, and must not watch every Secret.
			c, err := client.New(cfg, client.Options{Scheme: hub.Scheme()})
			if err == nil {
				rotator, err = certs.NewRotator(c, clock.RealClock{}, ctrl.Log.WithName("webhook-certs"), certOpts)
			}
			if err != nil {
				return fmt.Errorf("set up self-managed webhook certificates: %w", err)
			}
			webhookOpts.TLSOpts = append(webhookOpts.TLSOpts, rotator.TLSOpt)
		}

		// A correlator of bounded memory (hub.EventCacheSize); the
		// manager does not stop a broadcaster it is given, so it is shut
		// down here once the manager stopped.
		events := hub.EventBroadcaster()
		defer events.Shutdown()
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{
			Scheme:                 hub.Scheme(),
			Cache:                  hub.CacheOptions(cfg, c.ArgoNamespace),
			MapperProvider:         hub.MapperProvider,
			Client:                 hub.ClientOptions(),
			Metrics:                metricsOptions(metricsAddr, metricsSecure),
			HealthProbeBindAddress: probeAddr,
			PprofBindAddress:       pprofAddr,
			WebhookServer:          webhook.NewServer(webhookOpts),
			LeaderElection:         leaderElection,
			LeaderElectionID:       "fleetvm-hub.fleetvm.io",
			// Deprecated for managers shorter-lived than their process;
			// the hub's lives as long.
			EventBroadcaster: events,
		})
		if err != nil {
			return fmt.Errorf("create manager: %w", err)
		}
		ctx := ctrl.SetupSignalHandler()
		if err := hub.SetupReconcilers(ctx, mgr, opts); err != nil {
			return fmt.Errorf("set up reconcilers: %w", err)
		}
		if err := fleetmetrics.Register(mgr.GetCache()); err != nil {
			return fmt.Errorf("register fleet metrics: %w", err)
		}
		if !disableWebhook {
			if err := fleetwebhook.SetupWithManager(mgr, fleetwebhook.Options{ImageNamespace: opts.FleetVM.ImageNamespace,
				SharedImageNamespaces: opts.FleetVM.SharedImageNamespaces, ArgoNamespace: c.ArgoNamespace}); err != nil {
				return fmt.Errorf("set up webhooks: %w", err)
			}
		}
		if rotator != nil {
			if err := mgr.Add(rotator); err != nil {
				return fmt.Errorf("set up self-managed webhook certificates: %w", err)
			}
			if err := mgr.AddReadyzCheck("webhook-certificate", rotator.ReadyCheck); err != nil {
				return fmt.Errorf("add ready check: %w", err)
			}
		}
		if !disableAddon {
			// The addon manager runs on the elected leader only.
			if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
				return fleetaddon.Run(ctx, mgr.GetConfig(), addonOpts)
			})); err != nil {
				return fmt.Errorf("set up addon manager: %w", err)
			}
		}
		if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
			return fmt.Errorf("add health check: %w", err)
		}
		if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
			return fmt.Errorf("add ready check: %w", err)
		}
		log.Info("starting fleetvm-hub", "argocdNamespace", c.ArgoNamespace, "environmentLabel", c.EnvironmentLabel)
		if err := mgr.Start(ctx); err != nil {
			return fmt.Errorf("manager stopped: %w", err)
		}
		return nil
	}
	if err := run(); err != nil {
		log.Error(err, "fleetvm-hub stopped")
		os.Exit(1)
	}
}

// metricsOptions serves metrics as kubebuilder scaffolds it: over HTTPS
// (a self-signed certificate), each request's bearer token authenticated
// with a TokenReview and its user authorized with a SubjectAccessReview
// for get on the /metrics URL.
func metricsOptions(addr string, secure bool) metricsserver.Options {
	opts := metricsserver.Options{BindAddress: addr, SecureServing: secure}
	if secure {
		opts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return opts
}
