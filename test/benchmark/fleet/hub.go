package fleet

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fleetvm/fleetvm/pkg/memlimit"
	"github.com/fleetvm/fleetvm/test/fleetenv"
)

// hubProcess is fleetvm-hub running as its own process.
type hubProcess struct {
	cmd        *exec.Cmd
	args       []string
	metricsURL string
	pprofURL   string
	done       chan error
	exited     error
}

// grantHubRBAC gives the hub's user fleetvm-hub's own ClusterRole and
// Argo CD namespace Role, as generated from the code markers
// (deploy/rbac/role.yaml): the benchmark runs the hub with the permissions
// it ships with.
func grantHubRBAC(ctx context.Context, admin client.Client) error {
	return fleetenv.GrantHubRBAC(ctx, admin, "fleetvm-bench-hub", hubUser, argoNS)
}

// writeKubeconfig writes a kubeconfig file for cfg.
func writeKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.Config{
		Clusters:       map[string]*clientcmdapi.Cluster{"hub": {Server: cfg.Host, CertificateAuthorityData: cfg.CAData}},
		AuthInfos:      map[string]*clientcmdapi.AuthInfo{"hub": {ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}},
		Contexts:       map[string]*clientcmdapi.Context{"hub": {Cluster: "hub", AuthInfo: "hub"}},
		CurrentContext: "hub",
	}
	return clientcmd.WriteToFile(kc, path)
}

// errPortTaken says the hub exited because a port picked for it was taken
// between freePort and the hub's own bind: any outgoing connection on the
// machine may get that port as its local end.
var errPortTaken = errors.New("a port picked for fleetvm-hub was taken before it bound it")

// startHub starts the fleetvm-hub binary against the hub API server and
// waits until it is ready and, unless webhook is nil, serves its webhooks
// where the hub API server calls them. A start that loses one of its ports
// to another process is tried again with new ports (the webhook's port is
// the one the webhook configurations name: it stays).
func startHub(ctx context.Context, cfg Config, kubeconfig string, webhook *envtest.WebhookInstallOptions, logTo io.Writer) (*hubProcess, error) {
	var err error
	for range 5 {
		var h *hubProcess
		h, err = startHubOnce(ctx, cfg, kubeconfig, webhook, logTo)
		if !errors.Is(err, errPortTaken) {
			return h, err
		}
	}
	return nil, err
}

// bindWatch notices the hub's report of a port already in use.
type bindWatch struct {
	mu    sync.Mutex
	taken bool
}

func (w *bindWatch) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("address already in use")) {
		w.mu.Lock()
		w.taken = true
		w.mu.Unlock()
	}
	return len(p), nil
}

func (w *bindWatch) portTaken() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.taken
}

func startHubOnce(ctx context.Context, cfg Config, kubeconfig string, webhook *envtest.WebhookInstallOptions, logTo io.Writer) (*hubProcess, error) {
	ports, err := fleetenv.FreePorts(3)
	if err != nil {
		return nil, err
	}
	metricsPort, probePort, pprofPort := ports[0], ports[1], ports[2]
	admission := []string{"--disable-webhooks"}
	if webhook != nil {
		// External certificates: envtest's, for the address the
		// webhook configurations name.
		admission = []string{
			"--webhook-port=" + strconv.Itoa(webhook.LocalServingPort),
			"--webhook-cert-dir=" + webhook.LocalServingCertDir,
		}
	}
	args := append([]string{
		"--kubeconfig=" + kubeconfig,
		"--argocd-namespace=" + argoNS,
	}, admission...)
	args = append(args,
		"--disable-addon",
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(metricsPort),
		// The harness scrapes the hub's reconcile counters on loopback.
		"--metrics-secure=false",
		"--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(probePort),
		"--pprof-bind-address=127.0.0.1:"+strconv.Itoa(pprofPort),
		"--kube-api-qps="+strconv.FormatFloat(cfg.HubQPS, 'f', -1, 64),
		"--kube-api-burst="+strconv.Itoa(cfg.HubBurst),
		"--workers="+strconv.Itoa(cfg.HubWorkers),
		"--removal-grace-period="+cfg.GracePeriod.String(),
		"--zap-log-level=info",
	)
	cmd := exec.Command(cfg.HubBinary, args...)
	watch := &bindWatch{}
	out := io.MultiWriter(logTo, watch)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = os.Environ()
	if cfg.HubMemoryLimit > 0 {
		// What the hub sets itself from its container's limit (pkg/memlimit).
		soft := int64(float64(cfg.HubMemoryLimit) * memlimit.Share)
		cmd.Env = append(cmd.Env, "GOMEMLIMIT="+strconv.FormatInt(soft, 10))
	}
	// The kernel kills the hub if the benchmark dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cfg.HubBinary, err)
	}
	h := &hubProcess{cmd: cmd, args: args, done: make(chan error, 1),
		metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort),
		pprofURL:   fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/", pprofPort)}
	go func() { h.done <- cmd.Wait() }()

	ready := fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort)
	err = fleetenv.Eventually(ctx, 2*time.Minute, func() (bool, error) {
		select {
		case err := <-h.done:
			h.exited = fmt.Errorf("fleetvm-hub exited: %v", err)
			return true, nil // nothing to wait for
		default:
		}
		resp, err := http.Get(ready) //nolint:noctx // bounded by the poll
		if err != nil {
			return false, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if h.exited != nil {
		if watch.portTaken() {
			return nil, fmt.Errorf("%w: %v", errPortTaken, h.exited)
		}
		return nil, h.exited
	}
	if err == nil && webhook != nil {
		// Ready does not wait for the webhook server, and the validating
		// webhook fails closed: FleetVMs are created only once it answers.
		err = waitWebhook(ctx, webhook)
	}
	if err != nil {
		h.stop()
		return nil, fmt.Errorf("fleetvm-hub not ready: %w", err)
	}
	return h, nil
}

// waitWebhook waits until the webhook server accepts TLS connections that
// the configurations' CA verifies.
func waitWebhook(ctx context.Context, webhook *envtest.WebhookInstallOptions) error {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(webhook.LocalServingCAData) {
		return errors.New("webhook CA: no certificate")
	}
	addr := net.JoinHostPort(webhook.LocalServingHost, strconv.Itoa(webhook.LocalServingPort))
	dialer := &net.Dialer{Timeout: time.Second}
	return fleetenv.Eventually(ctx, time.Minute, func() (bool, error) {
		conn, err := tls.DialWithDialer(dialer, "tcp", addr, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
		if err != nil {
			return false, fmt.Errorf("webhook server %s: %w", addr, err)
		}
		_ = conn.Close()
		return true, nil
	})
}

func (h *hubProcess) pid() int { return h.cmd.Process.Pid }

// alive returns an error if the hub has exited.
func (h *hubProcess) alive() error {
	if h.exited != nil {
		return h.exited
	}
	select {
	case err := <-h.done:
		h.exited = fmt.Errorf("fleetvm-hub exited: %v", err)
		return h.exited
	default:
		return nil
	}
}

// kill ends the hub with SIGKILL, mid-flight, and waits until it exited.
func (h *hubProcess) kill() {
	if h.alive() != nil {
		return
	}
	_ = h.cmd.Process.Kill()
	<-h.done
	h.exited = errors.New("fleetvm-hub killed")
}

// stop ends the hub: SIGTERM, then SIGKILL after 20 s.
func (h *hubProcess) stop() {
	if h.alive() != nil {
		return
	}
	_ = h.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-h.done:
	case <-time.After(20 * time.Second):
		_ = h.cmd.Process.Kill()
		<-h.done
	}
	h.exited = errors.New("fleetvm-hub stopped")
}

// saveHeapProfile writes the hub's heap profile, after a garbage
// collection, to path.
func (h *hubProcess) saveHeapProfile(ctx context.Context, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.pprofURL+"heap?gc=1", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", req.URL, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
