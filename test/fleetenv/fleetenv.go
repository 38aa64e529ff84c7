// Package fleetenv starts a local OCM fleet for tests and the local fleet:
// one hub and any number of spokes, each a real kube-apiserver and etcd
// (controller-runtime envtest), with every CRD FleetVM talks to installed and
// the real OCM placement scheduler running in-process against the hub. On
// request, the real OCM work agent runs in-process for every spoke, so
// ManifestWorks on the hub land on the spokes.
//
// kube-apiserver and etcd are built from the Go module proxy into bin/ by
// `make test-binaries`. They are started through bin/pdeathsig so the kernel
// kills them if the test binary dies without cleaning up.
package fleetenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/openshift/library-go/pkg/controller/controllercmd"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	ocmoptions "open-cluster-management.io/ocm/pkg/common/options"
	placementcontrollers "open-cluster-management.io/ocm/pkg/placement/controllers"
)

// Options configure a fleet.
type Options struct {
	// Spokes are the names of the spoke clusters to start. Each spoke gets
	// its own API server. ManagedClusters are not registered automatically:
	// call RegisterManagedCluster so each test states the labels it needs.
	Spokes []string

	// NoPlacementController skips the in-process OCM placement scheduler.
	NoPlacementController bool

	// WorkAgents runs the real OCM work agent in-process for every spoke:
	// ManifestWorks in the spoke's cluster namespace on the hub (the
	// namespace RegisterManagedCluster creates) are applied to the spoke,
	// and their Applied and Available conditions and status feedback are
	// written back; deleting a ManifestWork removes what it applied. Off by
	// default: most tests play the agent themselves.
	WorkAgents bool

	// HubWebhook, when set, is installed into the hub so that its API server
	// calls webhooks served by the test process.
	HubWebhook *envtest.WebhookInstallOptions

	// HubAPIServerFlags are set on the hub's kube-apiserver command line
	// (the flag's name without dashes, its value).
	HubAPIServerFlags map[string]string

	// Scheme is used for the clients; DefaultScheme when nil.
	Scheme *runtime.Scheme
}

// Cluster is one running API server.
type Cluster struct {
	// Name is the cluster's name: "hub" or the spoke's name.
	Name string
	// Config is an admin rest.Config.
	Config *rest.Config
	// Client is an admin client with Scheme.
	Client client.Client
	// Kubeconfig is the path of an admin kubeconfig file.
	Kubeconfig string

	env *envtest.Environment
}

// crdInstallWait bounds how long the API servers may take to serve the
// CRDs. envtest's default (10s) is too short for ~40 CRDs on a loaded
// 2-core machine; the wait ends as soon as they are served.
const crdInstallWait = 2 * time.Minute

// controlPlaneStartWait bounds how long each kube-apiserver and etcd may
// take to answer its health check. envtest's default (20s) is too short
// when a fleet starts four of each at once on a loaded 2-core machine: an
// e2e run once failed at the start, kube-apiserver timed out five times
// in a row, with the load average at 25. The wait ends as soon as they
// answer.
const controlPlaneStartWait = 2 * time.Minute

// Fleet is a running hub and its spokes.
type Fleet struct {
	Hub    *Cluster
	Spokes []*Cluster
	Scheme *runtime.Scheme

	dir string
	// cancel stops the in-process controllers (placement scheduler, work
	// agents); background counts them, so Stop waits until they returned.
	cancel         context.CancelFunc
	background     sync.WaitGroup
	backgroundErrs chan error
	stopOnce       sync.Once

	// scheduler runs the OCM placement scheduler; stopScheduler ends it
	// and waits until it returned.
	schedulerMu   sync.Mutex
	stopScheduler func()
	schedulerCtx  context.Context
}

// Start starts the hub and the spokes in parallel and, unless disabled, the
// OCM placement scheduler. Call Stop when done (also on error paths: Start
// stops what it started when it fails).
func Start(ctx context.Context, opts Options) (*Fleet, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	assets, err := binaryAssets(root)
	if err != nil {
		return nil, err
	}
	crds, err := crdPaths(root)
	if err != nil {
		return nil, err
	}
	scheme := opts.Scheme
	if scheme == nil {
		scheme = DefaultScheme()
	}
	dir, err := os.MkdirTemp("", "fleetenv-")
	if err != nil {
		return nil, err
	}
	f := &Fleet{Scheme: scheme, dir: dir, backgroundErrs: make(chan error, len(opts.Spokes))}

	hubEnv := &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		CRDInstallOptions:        envtest.CRDInstallOptions{Paths: crds.hub, ErrorIfPathMissing: true, MaxTime: crdInstallWait},
		ControlPlaneStartTimeout: controlPlaneStartWait,
		ControlPlaneStopTimeout:  20 * time.Second,
	}
	if opts.HubWebhook != nil {
		hubEnv.WebhookInstallOptions = *opts.HubWebhook
	}
	for name, value := range opts.HubAPIServerFlags {
		hubEnv.ControlPlane.GetAPIServer().Configure().Set(name, value)
	}
	f.Hub = &Cluster{Name: "hub", env: hubEnv}
	for _, name := range opts.Spokes {
		f.Spokes = append(f.Spokes, &Cluster{Name: name, env: &envtest.Environment{
			BinaryAssetsDirectory:    assets,
			CRDInstallOptions:        envtest.CRDInstallOptions{Paths: crds.spoke, ErrorIfPathMissing: true, MaxTime: crdInstallWait},
			ControlPlaneStartTimeout: controlPlaneStartWait,
			ControlPlaneStopTimeout:  20 * time.Second,
		}})
	}

	all := append([]*Cluster{f.Hub}, f.Spokes...)
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, c := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.start(scheme, dir)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		_ = f.Stop()
		return nil, err
	}
	if opts.HubWebhook != nil {
		*opts.HubWebhook = hubEnv.WebhookInstallOptions
	}
	for _, spoke := range f.Spokes {
		if err := InstallCloneAuthorization(ctx, spoke.Client); err != nil {
			_ = f.Stop()
			return nil, fmt.Errorf("%s: %w", spoke.Name, err)
		}
	}

	if !opts.NoPlacementController || opts.WorkAgents {
		quietKlog()
		bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		f.cancel = cancel
		if err := f.startControllers(bctx, opts); err != nil {
			_ = f.Stop()
			return nil, err
		}
	}
	return f, nil
}

// startControllers starts the in-process controllers opts ask for; they
// run until ctx ends.
func (f *Fleet) startControllers(ctx context.Context, opts Options) error {
	if !opts.NoPlacementController {
		if err := runBindingStandIn(ctx, f.Hub.Config, f.Hub.Client); err != nil {
			return err
		}
		f.schedulerCtx = ctx
		f.startScheduler()
	}
	if opts.WorkAgents {
		if err := workFeatureGates(); err != nil {
			return err
		}
		for _, spoke := range f.Spokes {
			f.background.Add(1)
			go func() {
				defer f.background.Done()
				if err := runWorkAgent(ctx, f.Hub, spoke); err != nil {
					f.backgroundErrs <- fmt.Errorf("work agent of %s: %w", spoke.Name, err)
				}
			}()
		}
	}
	return nil
}

// startScheduler runs the OCM placement scheduler until the fleet stops
// or RestartPlacementController stops it.
func (f *Fleet) startScheduler() {
	f.schedulerMu.Lock()
	defer f.schedulerMu.Unlock()
	ctx, cancel := context.WithCancel(f.schedulerCtx)
	done := make(chan struct{})
	f.background.Add(1)
	go func() {
		defer f.background.Done()
		defer close(done)
		// The client limits OCM's placement command sets (its flags'
		// defaults), not this package's more generous ones.
		cfg, ocm := rest.CopyConfig(f.Hub.Config), ocmoptions.NewOptions()
		cfg.QPS, cfg.Burst = ocm.QPS, ocm.Burst
		_ = placementcontrollers.RunControllerManager(ctx, &controllercmd.ControllerContext{KubeConfig: cfg})
	}()
	f.stopScheduler = func() { cancel(); <-done }
}

// RestartPlacementController stops the OCM placement scheduler and starts
// a new one, with empty caches, as a restarted hub controller would be.
func (f *Fleet) RestartPlacementController() error {
	f.schedulerMu.Lock()
	stop := f.stopScheduler
	f.schedulerMu.Unlock()
	if stop == nil {
		return errors.New("the fleet runs no placement scheduler")
	}
	stop()
	f.startScheduler()
	return nil
}

// quietKlog silences the placement scheduler's klog output, which would
// bury test failures, unless FLEETENV_VERBOSE is set.
func quietKlog() {
	if os.Getenv("FLEETENV_VERBOSE") != "" {
		return
	}
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
}

func (c *Cluster) start(scheme *runtime.Scheme, dir string) error {
	cfg, err := c.env.Start()
	if err != nil {
		return fmt.Errorf("start %s API server: %w", c.Name, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	c.Config = cfg
	if c.Client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return fmt.Errorf("%s client: %w", c.Name, err)
	}
	c.Kubeconfig = filepath.Join(dir, c.Name+".kubeconfig")
	return writeKubeconfig(c.Kubeconfig, c.Name, cfg)
}

// Stop stops the placement scheduler, the work agents and every API server
// and etcd, and removes the temporary files. It returns the errors of work
// agents that failed. It is safe to call more than once.
func (f *Fleet) Stop() error {
	var errs []error
	f.stopOnce.Do(func() {
		if f.cancel != nil {
			f.cancel()
		}
		f.background.Wait()
		close(f.backgroundErrs)
		for err := range f.backgroundErrs {
			errs = append(errs, err)
		}
		all := append([]*Cluster{f.Hub}, f.Spokes...)
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, c := range all {
			if c == nil || c.Config == nil {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := c.env.Stop(); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("stop %s: %w", c.Name, err))
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		_ = os.RemoveAll(f.dir)
	})
	return errors.Join(errs...)
}

// Spoke returns the spoke called name, or nil.
func (f *Fleet) Spoke(name string) *Cluster {
	for _, s := range f.Spokes {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// URLs returns the API server and etcd URLs of the cluster.
func (c *Cluster) URLs() (apiserver, etcd string) {
	return c.env.ControlPlane.APIServer.SecureServing.URL("https", "/").String(), c.env.ControlPlane.Etcd.URL.String()
}

// Dir is a temporary folder that lives as long as the fleet.
func (f *Fleet) Dir() string { return f.dir }

// AddUser creates a user on the cluster (envtest's authentication) and
// returns a rest.Config acting as it. Used to test RBAC with real
// authorization.
func (c *Cluster) AddUser(name string, groups ...string) (*rest.Config, error) {
	u, err := c.env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	if err != nil {
		return nil, fmt.Errorf("add user %s to %s: %w", name, c.Name, err)
	}
	return u.Config(), nil
}

func writeKubeconfig(path, name string, cfg *rest.Config) error {
	kc := clientcmdConfig(name, cfg)
	return clientcmd.WriteToFile(kc, path)
}

// ensureNamespace creates ns if it does not exist.
func ensureNamespace(ctx context.Context, c client.Client, ns string) error {
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: objectMeta(ns, "")})
	return client.IgnoreAlreadyExists(err)
}
