// Package localfleet runs the FleetVM local fleet: a hub and three spokes
// as real kube-apiservers (test/fleetenv), the real OCM placement
// scheduler, real Argo CD (application controller, ApplicationSet
// controller, repo server, with Redis, helm and kustomize) built from the
// argo-cd v3 module, fleetvm-hub, one fleetvm-agent per spoke with the
// KubeVirt simulator, the fleetvm-vm chart on a loopback Helm repository
// and examples/git on a loopback git server. `make run` and the end-to-end
// tests start it with Start.
//
// What stands in for something real, and why:
//   - spokes have no kubelet: nodes are API objects, and the KubeVirt
//     simulator (pkg/simulator) plays KubeVirt and CDI; of
//     kube-controller-manager, only the garbage collector, namespace and
//     claim protection controllers run (real, built like kube-apiserver);
//   - GitOpsClusterStandIn plays OCM's GitOpsCluster controller, which
//     cannot be built with this project's dependencies;
//   - a ValidatingAdmissionPolicy on each spoke plays CDI's and KubeVirt's
//     clone authorization (fleetenv.InstallCloneAuthorization);
//   - OCM's registration is not running: fleetenv registers the
//     ManagedClusters, marks them available, copies each spoke's
//     ClusterClaims (its console URL, ConsoleURL) into its status and
//     binds cluster sets, and this package writes each cluster's
//     credentials secret as OCM's cluster import would and grants each
//     agent the hub permissions the fleetvm addon grants (the agents run
//     in-process rather than being deployed by the addon, which needs a
//     kubelet).
package localfleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	frameworkagent "open-cluster-management.io/addon-framework/pkg/agent"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fleetvm/fleetvm/pkg/addon"
	"github.com/fleetvm/fleetvm/pkg/agent"
	agentcapacity "github.com/fleetvm/fleetvm/pkg/agent/capacity"
	"github.com/fleetvm/fleetvm/pkg/consolelink"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine"
	"github.com/fleetvm/fleetvm/pkg/controller/fleetvirtualmachine/delivery"
	"github.com/fleetvm/fleetvm/pkg/hub"
	"github.com/fleetvm/fleetvm/test/fleetenv"
	"github.com/fleetvm/fleetvm/test/simulator"
)

// ArgoNamespace is where the local fleet's Argo CD runs.
const ArgoNamespace = "argocd"

// GoldenImageNamespace holds the DataSources the seed VMs boot from, as
// OpenShift Virtualization's golden images do on a real cluster.
const GoldenImageNamespace = "openshift-virtualization-os-images"

// Cluster describes a spoke: its ManagedCluster labels, its nodes and its
// bridged networks.
type Cluster struct {
	Name   string
	Labels map[string]string
	Nodes  []fleetenv.Node
	// Networks are the NetworkAttachmentDefinitions the cluster has.
	Networks []Network
}

// Network is a NetworkAttachmentDefinition onto a Linux bridge, as seed
// 001 builds them: Bridge names the bridge; the nodes that have it offer
// the resource bridge.network.kubevirt.io/<bridge> (bridge-marker), and
// the NAD asks for it.
type Network struct {
	Namespace, Name, Bridge string
	VLAN                    int
}

// Vlan2003 is seed 001's VLAN 2003 network, which seed 000's Windows VMs
// attach to.
var Vlan2003 = Network{Namespace: "default", Name: "vlan2003", Bridge: "bridge2003", VLAN: 2003}

// BridgeResource is the node resource bridge-marker publishes for a
// bridge.
func BridgeResource(bridge string) corev1.ResourceName {
	return corev1.ResourceName("bridge.network.kubevirt.io/" + bridge)
}

// bridged is what a node with the bridge offers: bridge-marker's 1k.
func bridged(bridge string) map[corev1.ResourceName]string {
	return map[corev1.ResourceName]string{BridgeResource(bridge): "1k"}
}

// DefaultClusters are the local fleet's spokes: two env=prod, one env=dev,
// with nodes of different sizes. VLAN 2003 reaches prod-a and dev-a, each
// on its bigger node only; prod-b is not on it.
func DefaultClusters() []Cluster {
	return []Cluster{
		{Name: "prod-a", Labels: map[string]string{"env": "prod", "region": "east"}, Nodes: []fleetenv.Node{
			{Name: "prod-a-large", CPU: "32", Memory: "128Gi", Extended: bridged(Vlan2003.Bridge)},
			{Name: "prod-a-small", CPU: "8", Memory: "16Gi"},
		}, Networks: []Network{Vlan2003}},
		{Name: "prod-b", Labels: map[string]string{"env": "prod", "region": "west"}, Nodes: []fleetenv.Node{
			{Name: "prod-b-large", CPU: "16", Memory: "64Gi"},
			{Name: "prod-b-medium", CPU: "8", Memory: "32Gi"},
			{Name: "prod-b-small", CPU: "4", Memory: "8Gi"},
		}},
		{Name: "dev-a", Labels: map[string]string{"env": "dev", "region": "east"}, Nodes: []fleetenv.Node{
			{Name: "dev-a-medium", CPU: "12", Memory: "48Gi", Extended: bridged(Vlan2003.Bridge)},
			{Name: "dev-a-small", CPU: "4", Memory: "8Gi"},
		}, Networks: []Network{Vlan2003}},
	}
}

// GoldenImages are the DataSources every spoke offers (seed 000's VMs
// clone their root disks from them).
var GoldenImages = []string{"rhel9", "windows10", "server2019"}

// Options configure the local fleet. The zero value is the `make run` fleet.
type Options struct {
	// Clusters are the spokes; DefaultClusters when empty.
	Clusters []Cluster
	// GitAddr is where the git server listens; 127.0.0.1:0 (a free port)
	// when empty.
	GitAddr string
	// GitRepos are more git repositories to serve beside examples/git:
	// repository name ("<name>.git") → folder (tests serve test data).
	GitRepos map[string]string
	// GitHistories are git repositories of several commits: repository
	// name → folders, committed in order, each tagged with its folder's
	// name (a rollout from one tag to the next).
	GitHistories map[string][]string
	// GracePeriod is fleetvm-hub's --removal-grace-period; 1m when 0.
	GracePeriod time.Duration
	// SimulatorStepDelay is the KubeVirt simulator's delay between status
	// steps; the simulator's default when 0.
	SimulatorStepDelay time.Duration
	// Progress receives one line per step while the fleet starts; nothing
	// when nil.
	Progress io.Writer
	// Logger is the in-process components' logger (fleetvm-hub, agents,
	// stand-ins); discarded when unset.
	Logger logr.Logger
	// LogDir receives the Argo CD components' logs; a folder inside the
	// fleet's temporary folder when empty.
	LogDir string
}

// Fleet is a running local fleet.
type Fleet struct {
	*fleetenv.Fleet
	// HubKubeconfig is the path of an admin kubeconfig of the hub.
	HubKubeconfig string
	// ChartRepoURL is the Helm repository serving the fleetvm-vm chart.
	ChartRepoURL string
	// GitRepoURL is the git repository serving examples/git; GitRepoURLs
	// those of Options.GitRepos, by name.
	GitRepoURL  string
	GitRepoURLs map[string]string
	// LogDir holds the Argo CD components' logs.
	LogDir string
	// HubConfig is the configuration fleetvm-hub runs with.
	HubConfig fleetvirtualmachine.Config

	chart *chartRepo
	git   *gitRepo
	argo  *argoCD
	// peers wires the spokes' KubeVirt simulators together, as the
	// network between real clusters would: a Cold move's target reads the
	// source's export.
	peers *simulator.Peers
	// controllerManagers run the garbage collector of each cluster.
	controllerManagers []*process
	cancel             context.CancelFunc
	runners            []chan error
}

// Start starts the whole local fleet and returns once every component
// runs. Stop tears it down; Start stops what it started when it fails.
func Start(ctx context.Context, opts Options) (f *Fleet, err error) {
	progress := func(format string, args ...any) {
		if opts.Progress != nil {
			_, _ = fmt.Fprintf(opts.Progress, format+"\n", args...)
		}
	}
	if len(opts.Clusters) == 0 {
		opts.Clusters = DefaultClusters()
	}
	if opts.GitAddr == "" {
		opts.GitAddr = "127.0.0.1:0"
	}
	if opts.GracePeriod == 0 {
		opts.GracePeriod = time.Minute
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	root, err := fleetenv.RepoRoot()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(root, "bin")
	if err := requireFiles(bin, append(argoBinaries, controllerManagerName)...); err != nil {
		return nil, err
	}

	started := time.Now()
	names := make([]string, len(opts.Clusters))
	for i, c := range opts.Clusters {
		names[i] = c.Name
	}
	progress("starting the hub and %d spokes (kube-apiserver + etcd each) and the OCM placement scheduler", len(names))
	webhooks, err := fleetenv.WebhookOptions()
	if err != nil {
		return nil, err
	}
	env, err := fleetenv.Start(ctx, fleetenv.Options{Spokes: names, WorkAgents: true, HubWebhook: webhooks})
	if err != nil {
		return nil, err
	}
	f = &Fleet{Fleet: env, HubKubeconfig: env.Hub.Kubeconfig, LogDir: opts.LogDir}
	defer func() {
		if err != nil {
			_ = f.Stop()
			f = nil
		}
	}()
	if f.LogDir == "" {
		f.LogDir = filepath.Join(env.Dir(), "logs")
	}
	if err := os.MkdirAll(f.LogDir, 0o755); err != nil {
		return f, err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f.cancel = cancel
	if err := f.ServeWebhooks(runCtx, webhooks); err != nil {
		return f, fmt.Errorf("serve FleetVM webhooks: %w", err)
	}

	progress("starting kube-controller-manager (garbage collector, namespace and claim protection controllers) for every cluster")
	all := append([]*fleetenv.Cluster{env.Hub}, env.Spokes...)
	if f.controllerManagers, err = startControllerManagers(bin, f.LogDir, all); err != nil {
		return f, err
	}

	progress("registering the managed clusters, their nodes and golden images")
	hubKube, err := kubernetes.NewForConfig(env.Hub.Config)
	if err != nil {
		return f, err
	}
	for _, c := range opts.Clusters {
		if err := f.joinCluster(ctx, hubKube, c); err != nil {
			return f, err
		}
	}

	progress("serving the fleetvm-vm chart and examples/git on loopback")
	if f.chart, err = serveChart(filepath.Join(root, "deploy", "charts", "fleetvm-vm")); err != nil {
		return f, err
	}
	f.ChartRepoURL = f.chart.URL
	repos := map[string]string{GitRepoName: filepath.Join(root, "examples", "git")}
	for name, dir := range opts.GitRepos {
		repos[name] = dir
	}
	if f.git, err = serveGit(repos, opts.GitHistories, filepath.Join(env.Dir(), "git"), opts.GitAddr); err != nil {
		return f, err
	}
	f.GitRepoURL, f.GitRepoURLs = f.git.URLs[GitRepoName], f.git.URLs

	progress("starting Argo CD: Redis (miniredis), repo server, application controller, ApplicationSet controller (logs in %s)", f.LogDir)
	if err := installArgoCD(ctx, env.Hub.Client, ArgoNamespace); err != nil {
		return f, err
	}
	f.argo, err = startArgoCD(ctx, argoConfig{bin: bin, dir: env.Dir(), logDir: f.LogDir, namespace: ArgoNamespace, hub: env.Hub.Config})
	if err != nil {
		return f, err
	}

	progress("starting the GitOpsCluster stand-in and fleetvm-hub")
	if err := f.runGitOpsClusterStandIn(runCtx, opts.Logger); err != nil {
		return f, err
	}
	f.HubConfig = fleetvirtualmachine.DefaultConfig()
	f.HubConfig.ArgoNamespace = ArgoNamespace
	f.HubConfig.GracePeriod = opts.GracePeriod
	f.HubConfig.Chart = delivery.ChartSource{
		RepoURL: f.chart.URL, Chart: f.chart.Chart.Name, TargetRevision: f.chart.Chart.Version,
	}
	if err := f.runHub(runCtx, opts.Logger); err != nil {
		return f, err
	}

	progress("starting one fleetvm-agent per spoke, each with the KubeVirt simulator")
	for _, c := range opts.Clusters {
		if err := f.runAgent(runCtx, c.Name, opts); err != nil {
			return f, err
		}
	}
	progress("local fleet up in %s", time.Since(started).Round(time.Second))
	return f, nil
}

// joinCluster registers a spoke on the hub as OCM registration would
// (ManagedCluster with its labels and client config, cluster namespace),
// leaves its credentials where OCM's cluster import does, grants its agent
// the addon's hub permissions, and creates its nodes and golden images.
func (f *Fleet) joinCluster(ctx context.Context, hubKube kubernetes.Interface, c Cluster) error {
	spoke := f.Spoke(c.Name)
	if err := f.RegisterManagedCluster(ctx, fleetenv.ManagedCluster{Name: c.Name, Labels: c.Labels}); err != nil {
		return err
	}
	hubClient := f.Hub.Client
	mc := &clusterv1.ManagedCluster{}
	if err := hubClient.Get(ctx, client.ObjectKey{Name: c.Name}, mc); err != nil {
		return err
	}
	patch := client.MergeFrom(mc.DeepCopy())
	mc.Spec.ManagedClusterClientConfigs = []clusterv1.ClientConfig{{URL: spoke.Config.Host, CABundle: spoke.Config.CAData}}
	if err := hubClient.Patch(ctx, mc, patch); err != nil {
		return fmt.Errorf("set the client config of ManagedCluster %s: %w", c.Name, err)
	}
	if err := f.writeImportSecret(ctx, c.Name, spoke.Config); err != nil {
		return err
	}
	if err := f.claimConsole(ctx, c.Name); err != nil {
		return err
	}

	// The addon's ManagedClusterAddOn and the agent's hub Role and
	// RoleBinding, made by the addon's own PermissionConfig.
	mca := &addonv1alpha1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Name: addon.AddonName, Namespace: c.Name}}
	if err := hubClient.Create(ctx, mca); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ManagedClusterAddOn %s/%s: %w", c.Name, addon.AddonName, err)
	}
	if err := hubClient.Get(ctx, client.ObjectKeyFromObject(mca), mca); err != nil {
		return err
	}
	if err := addon.PermissionConfig(hubKube)(mc, mca); err != nil {
		return err
	}

	for _, n := range c.Nodes {
		if _, err := spoke.CreateNode(ctx, n); err != nil {
			return err
		}
	}
	for _, n := range c.Networks {
		if err := createNetwork(ctx, spoke.Client, n); err != nil {
			return fmt.Errorf("cluster %s: %w", c.Name, err)
		}
	}
	if err := spoke.EnsureNamespace(ctx, GoldenImageNamespace); err != nil {
		return err
	}
	if err := allowGoldenImageClones(ctx, spoke.Client); err != nil {
		return fmt.Errorf("cluster %s: %w", c.Name, err)
	}
	for _, name := range GoldenImages {
		ds := &cdiv1beta1.DataSource{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: GoldenImageNamespace},
			Spec: cdiv1beta1.DataSourceSpec{Source: cdiv1beta1.DataSourceSource{
				PVC: &cdiv1beta1.DataVolumeSourcePVC{Namespace: GoldenImageNamespace, Name: name},
			}},
		}
		if err := spoke.Client.Create(ctx, ds); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create DataSource %s on %s: %w", name, c.Name, err)
		}
		ds.Status.Conditions = []cdiv1beta1.DataSourceCondition{{
			Type: cdiv1beta1.DataSourceReady,
			ConditionState: cdiv1beta1.ConditionState{
				Status: corev1.ConditionTrue, Reason: "Ready", Message: "golden image of the local fleet",
				LastTransitionTime: metav1.Now(), LastHeartbeatTime: metav1.Now(),
			},
		}}
		if err := updateStatus(ctx, spoke.Client, ds); err != nil {
			return fmt.Errorf("mark DataSource %s on %s ready: %w", name, c.Name, err)
		}
	}
	return nil
}

// ConsoleURL is the web console URL a local fleet cluster claims, shaped
// like an OpenShift cluster's. No console runs there: the links it makes
// (kubectl fleetvm status and console) lead nowhere, but they are made as
// on a real fleet.
func ConsoleURL(cluster string) string {
	return "https://console-openshift-console.apps." + cluster + ".localfleet.example"
}

// claimConsole makes the spoke claim its console URL as ACM's klusterlet
// claims an OpenShift cluster's (a ClusterClaim on the spoke), and exposes
// its claims on its ManagedCluster as OCM's registration agent does.
func (f *Fleet) claimConsole(ctx context.Context, cluster string) error {
	claim := &clusterv1alpha1.ClusterClaim{
		ObjectMeta: metav1.ObjectMeta{Name: consolelink.ClaimConsoleURL},
		Spec:       clusterv1alpha1.ClusterClaimSpec{Value: ConsoleURL(cluster)},
	}
	if err := f.Spoke(cluster).Client.Create(ctx, claim); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ClusterClaim %s on %s: %w", claim.Name, cluster, err)
	}
	return f.ExposeClusterClaims(ctx, cluster)
}

// createNetwork creates a bridge network's NetworkAttachmentDefinition,
// naming the bridge's node resource as bridge NADs do.
func createNetwork(ctx context.Context, c client.Client, n Network) error {
	nad := &unstructured.Unstructured{}
	nad.SetAPIVersion("k8s.cni.cncf.io/v1")
	nad.SetKind("NetworkAttachmentDefinition")
	nad.SetNamespace(n.Namespace)
	nad.SetName(n.Name)
	nad.SetAnnotations(map[string]string{agentcapacity.AnnotationResourceName: string(BridgeResource(n.Bridge))})
	config, err := json.Marshal(map[string]any{"cniVersion": "0.3.1", "name": n.Name, "type": "bridge", "bridge": n.Bridge, "vlan": n.VLAN})
	if err != nil {
		return err
	}
	nad.Object["spec"] = map[string]any{"config": string(config)}
	if err := c.Create(ctx, nad); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create NetworkAttachmentDefinition %s/%s: %w", n.Namespace, n.Name, err)
	}
	return nil
}

// updateStatus writes an object's status through the status subresource,
// or with the object where its CRD has none.
func updateStatus(ctx context.Context, c client.Client, obj client.Object) error {
	err := c.Status().Update(ctx, obj)
	if apierrors.IsNotFound(err) {
		return c.Update(ctx, obj)
	}
	return err
}

// clusterConfig is the "config" of an Argo CD cluster secret.
type clusterConfig struct {
	BearerToken     string          `json:"bearerToken,omitempty"`
	TLSClientConfig tlsClientConfig `json:"tlsClientConfig"`
}

type tlsClientConfig struct {
	CAData   []byte `json:"caData,omitempty"`
	CertData []byte `json:"certData,omitempty"`
	KeyData  []byte `json:"keyData,omitempty"`
}

// writeImportSecret leaves "<cluster>-cluster-secret" in the cluster
// namespace on the hub, in the shape of Argo CD's cluster secrets, as OCM's
// cluster import does; the GitOpsCluster stand-in copies it into Argo CD.
// The credentials are the spoke's admin (group system:masters): Argo CD
// manages what it deploys there with full rights, as with a real managed
// cluster, and may impersonate, which sync impersonation needs: it
// applies each team's objects as that team's ServiceAccount.
func (f *Fleet) writeImportSecret(ctx context.Context, cluster string, cfg *rest.Config) error {
	conf, err := json.Marshal(clusterConfig{
		BearerToken:     cfg.BearerToken,
		TLSClientConfig: tlsClientConfig{CAData: cfg.CAData, CertData: cfg.CertData, KeyData: cfg.KeyData},
	})
	if err != nil {
		return err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: cluster + importSecretSuffix, Namespace: cluster,
			Labels: map[string]string{
				labelClusterName:    cluster,
				labelClusterServer:  serverLabel(cfg.Host),
				labelArgoSecretType: "cluster",
			},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"name": []byte(cluster), "server": []byte(cfg.Host), "config": conf},
	}
	if err := f.Hub.Client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create secret %s/%s: %w", cluster, s.Name, err)
	}
	return nil
}

// runGitOpsClusterStandIn runs the stand-in on its own manager, like a
// separate controller process.
func (f *Fleet) runGitOpsClusterStandIn(ctx context.Context, log logr.Logger) error {
	hasClusterName, err := labels.NewRequirement(labelClusterName, selection.Exists, nil)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(rest.CopyConfig(f.Hub.Config), ctrl.Options{
		Scheme:                 f.Scheme,
		Logger:                 log.WithName("gitopscluster-stand-in"),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			// Only cluster credentials and Argo CD cluster secrets.
			&corev1.Secret{}: {Label: labels.NewSelector().Add(*hasClusterName)},
		}},
	})
	if err != nil {
		return err
	}
	if err := (&GitOpsClusterStandIn{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return err
	}
	f.goRun(ctx, mgr)
	return nil
}

// runHub runs fleetvm-hub's reconcilers in this process, as
// cmd/fleetvm-hub does (its admission webhooks are served by the fleet,
// see ServeWebhooks; the addon manager is off: the agents run here).
func (f *Fleet) runHub(ctx context.Context, log logr.Logger) error {
	mgr, err := ctrl.NewManager(rest.CopyConfig(f.Hub.Config), ctrl.Options{
		Scheme:                 hub.Scheme(),
		Cache:                  hub.CacheOptions(f.Hub.Config, ArgoNamespace),
		MapperProvider:         hub.MapperProvider,
		Client:                 hub.ClientOptions(),
		Logger:                 log.WithName("fleetvm-hub"),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return err
	}
	if err := hub.SetupReconcilers(ctx, mgr, hub.Options{FleetVM: f.HubConfig, Workers: 4}); err != nil {
		return err
	}
	f.goRun(ctx, mgr)
	return nil
}

// simulators is the wiring of the spokes' simulators, made once.
func (f *Fleet) simulators() *simulator.Peers {
	if f.peers == nil {
		f.peers = simulator.NewPeers(simulator.Faults{})
	}
	return f.peers
}

// runAgent runs a spoke's fleetvm-agent with the KubeVirt simulator. On
// the hub it acts as the identity the addon registers for it (user and
// groups of its client certificate), so it has exactly the addon's hub
// permissions; on its spoke it is admin, since the simulator writes there.
func (f *Fleet) runAgent(ctx context.Context, cluster string, opts Options) error {
	hubCfg, err := f.Hub.AddUser(addon.AgentUser(cluster), frameworkagent.DefaultGroups(cluster, addon.AddonName)...)
	if err != nil {
		return err
	}
	spokeCfg := rest.CopyConfig(f.Spoke(cluster).Config)
	done := make(chan error, 1)
	f.runners = append(f.runners, done)
	go func() {
		done <- agent.Run(ctx, agent.Options{
			ClusterName: cluster, SpokeConfig: spokeCfg, HubConfig: hubCfg,
			Logger:           opts.Logger.WithName("fleetvm-agent"),
			AlsoRun:          f.simulators().RunBeside(cluster, opts.SimulatorStepDelay),
			CapacityDebounce: time.Second,
		})
	}()
	return nil
}

type starter interface {
	Start(context.Context) error
}

func (f *Fleet) goRun(ctx context.Context, r starter) {
	done := make(chan error, 1)
	f.runners = append(f.runners, done)
	go func() { done <- r.Start(ctx) }()
}

// Check returns an error when an Argo CD component or a
// kube-controller-manager has exited.
func (f *Fleet) Check() error {
	for _, p := range f.controllerManagers {
		if ok, err := p.exited(); ok {
			return fmt.Errorf("%s exited (%v); see %s", p.name, err, p.log)
		}
	}
	return f.argo.check()
}

// Stop stops everything: the in-process controllers and agents, Argo CD,
// the loopback servers, then the API servers, etcd and the scheduler.
func (f *Fleet) Stop() error {
	if f == nil {
		return nil
	}
	var errs []error
	if f.cancel != nil {
		f.cancel()
	}
	for _, done := range f.runners {
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				errs = append(errs, err)
			}
		case <-time.After(30 * time.Second):
			errs = append(errs, errors.New("a controller did not stop within 30s"))
		}
	}
	f.runners = nil
	f.argo.stop()
	stopAll(f.controllerManagers)
	f.chart.close()
	f.git.close()
	if err := f.Fleet.Stop(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// allowGoldenImageClones lets every authenticated user clone the golden
// images, as OpenShift Virtualization does (its os-images.kubevirt.io:view
// role, bound to system:authenticated in the golden image namespace): the
// seed VMs clone their root disks from there, and with sync impersonation
// they are applied as their team's ServiceAccount, whose clones the
// spokes authorize (fleetenv.InstallCloneAuthorization).
func allowGoldenImageClones(ctx context.Context, c client.Client) error {
	const name = "os-images.kubevirt.io:view"
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: GoldenImageNamespace, Name: name},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"cdi.kubevirt.io"}, Resources: []string{"datavolumes/source"}, Verbs: []string{"create"}},
			{APIGroups: []string{"cdi.kubevirt.io"}, Resources: []string{"datasources", "datavolumes"}, Verbs: []string{"get", "list", "watch"}},
		},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: GoldenImageNamespace, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: "system:authenticated"}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %T %s/%s: %w", o, o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}
