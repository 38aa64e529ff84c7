package localfleet

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	argov1alpha1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetvm/fleetvm/test/fleetenv"
)

// Names of the Argo CD binaries: one multi-call binary (bin/argocd) under
// the names of the components, the helm and kustomize its repo server
// runs, and the embedded Redis.
const (
	argoBinary           = "argocd"
	appControllerName    = "argocd-application-controller"
	appSetControllerName = "argocd-applicationset-controller"
	repoServerName       = "argocd-repo-server"
	gitAskPassName       = "argocd-git-ask-pass"
	redisName            = "miniredis"
)

// argoBinaries are the files `make test-binaries` builds for Argo CD.
var argoBinaries = []string{argoBinary, "helm", "kustomize", redisName}

// argoCD is the running Argo CD: Redis, the repo server, the application
// controller and the ApplicationSet controller, each its own process as
// in Argo CD's own installation.
type argoCD struct {
	procs []*process
}

// installArgoCD creates what Argo CD's installation puts in its namespace
// and the components read: argocd-cm (with sync impersonation on),
// argocd-rbac-cm, argocd-secret and the AppProject "default", which may
// deploy anything anywhere (the local fleet's clusters are its own).
func installArgoCD(ctx context.Context, c client.Client, ns string) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	partOf := func(name string) map[string]string {
		return map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "argocd"}
	}
	objs := []client.Object{
		&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "argocd-cm", Namespace: ns, Labels: partOf("argocd-cm")},
			Data: map[string]string{
				// Annotation tracking, Argo CD 3's default, said out loud.
				"application.resourceTrackingMethod": "annotation",
				// Look at every Application at least every 30 seconds.
				"timeout.reconciliation": "30s",
				// Sync as the AppProject's destination ServiceAccount: a
				// team's Applications are applied as its fleetvm-tenant
				// account on each spoke (the spokes' cluster secrets hold
				// admin credentials, which may impersonate).
				"application.sync.impersonation.enabled": "true",
			},
		},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "argocd-rbac-cm", Namespace: ns, Labels: partOf("argocd-rbac-cm")}},
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "argocd-secret", Namespace: ns, Labels: partOf("argocd-secret")},
			Data:       map[string][]byte{"server.secretkey": []byte(base64.StdEncoding.EncodeToString(key))},
		},
		&argov1alpha1.AppProject{
			ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: ns},
			Spec: argov1alpha1.AppProjectSpec{
				SourceRepos:              []string{"*"},
				Destinations:             []argov1alpha1.ApplicationDestination{{Server: "*", Name: "*", Namespace: "*"}},
				ClusterResourceWhitelist: []metav1.GroupKind{{Group: "*", Kind: "*"}},
			},
		},
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %T %s/%s: %w", o, ns, o.GetName(), err)
		}
	}
	return nil
}

// argoConfig is where Argo CD's components find the hub and the tools.
type argoConfig struct {
	bin, dir, logDir string
	namespace        string
	hub              *rest.Config
}

// startArgoCD starts Redis, the repo server and both controllers, and
// waits for Redis and the repo server to serve.
func startArgoCD(ctx context.Context, cfg argoConfig) (*argoCD, error) {
	if err := requireFiles(cfg.bin, argoBinaries...); err != nil {
		return nil, err
	}
	if err := linkNames(cfg.bin, argoBinary, appControllerName, appSetControllerName, repoServerName, gitAskPassName); err != nil {
		return nil, err
	}
	if err := linkNames(cfg.bin, "", redisName); err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(cfg.dir, "argocd.kubeconfig")
	if err := writeNamespacedKubeconfig(kubeconfig, cfg.hub, cfg.namespace); err != nil {
		return nil, err
	}
	tmp := filepath.Join(cfg.dir, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, err
	}
	ports, err := fleetenv.FreePorts(6)
	if err != nil {
		return nil, err
	}
	redisAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
	repoPort, repoMetrics, ctrlMetrics, appSetWebhook := ports[1], ports[2], ports[3], ports[4]
	repoAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(repoPort))

	env := []string{
		"KUBECONFIG=" + kubeconfig,
		// The repo server finds helm, kustomize and argocd-git-ask-pass
		// in bin/, git where the system has it.
		"PATH=" + cfg.bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		// Its checkouts, Helm caches and askpass socket stay in this fleet's
		// folder: two fleets on one machine do not meet.
		"TMPDIR=" + tmp,
		"ARGOCD_ASK_PASS_SOCK=" + filepath.Join(tmp, "askpass.sock"),
		"ARGOCD_GPG_ENABLED=false",
		"ARGOCD_BINARY_NAME=",
		"HOME=" + tmp,
	}
	a := &argoCD{}
	start := func(name string, args ...string) (*process, error) {
		p, err := startProcess(cfg.bin, cfg.logDir, name, name, append(args, "--logformat", "text"), env)
		if err == nil {
			a.procs = append(a.procs, p)
		}
		return p, err
	}
	fail := func(err error) (*argoCD, error) {
		a.stop()
		return nil, err
	}

	// miniredis takes no --logformat.
	redis, err := startProcess(cfg.bin, cfg.logDir, redisName, redisName, []string{"--addr", redisAddr}, nil)
	if err != nil {
		return fail(err)
	}
	a.procs = append(a.procs, redis)
	if err := waitListening(ctx, redis, redisAddr, 30*time.Second); err != nil {
		return fail(err)
	}
	repo, err := start(repoServerName,
		"--address", "127.0.0.1", "--port", strconv.Itoa(repoPort),
		"--metrics-address", "127.0.0.1", "--metrics-port", strconv.Itoa(repoMetrics),
		"--disable-tls", "--redis", redisAddr, "--parallelismlimit", "4")
	if err != nil {
		return fail(err)
	}
	if _, err := start(appControllerName,
		"--namespace", cfg.namespace, "--repo-server", repoAddr, "--repo-server-plaintext",
		"--redis", redisAddr, "--metrics-port", strconv.Itoa(ctrlMetrics),
		"--status-processors", "4", "--operation-processors", "4",
		// Self-heal and retry quickly: a local fleet is for watching
		// things happen.
		"--self-heal-timeout-seconds", "2", "--app-resync", "30"); err != nil {
		return fail(err)
	}
	if _, err := start(appSetControllerName,
		"--namespace", cfg.namespace, "--argocd-repo-server", repoAddr, "--repo-server-plaintext",
		"--metrics-addr", "0", "--probe-addr", "0",
		"--webhook-addr", net.JoinHostPort("127.0.0.1", strconv.Itoa(appSetWebhook)),
		"--enable-scm-providers=false"); err != nil {
		return fail(err)
	}
	if err := waitListening(ctx, repo, repoAddr, 60*time.Second); err != nil {
		return fail(err)
	}
	return a, nil
}

// check returns an error naming the first component that exited.
func (a *argoCD) check() error {
	if a == nil {
		return nil
	}
	for _, p := range a.procs {
		if ok, err := p.exited(); ok {
			return fmt.Errorf("%s exited (%v); see %s", p.name, err, p.log)
		}
	}
	return nil
}

// stop stops the components, the controllers first and Redis last.
func (a *argoCD) stop() {
	if a == nil {
		return
	}
	for i := len(a.procs) - 1; i >= 0; i-- {
		a.procs[i].stop(10 * time.Second)
	}
}

// writeNamespacedKubeconfig writes an admin kubeconfig whose context's
// namespace is ns: Argo CD's components take their namespace from it.
func writeNamespacedKubeconfig(path string, cfg *rest.Config, ns string) error {
	kc := clientcmdapi.Config{
		Clusters: map[string]*clientcmdapi.Cluster{"hub": {Server: cfg.Host, CertificateAuthorityData: cfg.CAData}},
		AuthInfos: map[string]*clientcmdapi.AuthInfo{"hub": {
			ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken,
		}},
		Contexts:       map[string]*clientcmdapi.Context{"hub": {Cluster: "hub", AuthInfo: "hub", Namespace: ns}},
		CurrentContext: "hub",
	}
	return clientcmd.WriteToFile(kc, path)
}
