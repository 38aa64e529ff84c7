package chart

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/addon"
	fleetwebhook "github.com/fleetvm/fleetvm/pkg/webhook"
	"github.com/fleetvm/fleetvm/test/fleetenv"
)

// install creates the release's namespace and applies every rendered
// object for real (CRDs are installed by the test environment already).
func install(t *testing.T, r rendered) {
	t.Helper()
	ctx := t.Context()
	hub := fleet(t).Hub.Client
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.namespace}}
	if err := hub.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	for _, o := range r.objs {
		if err := hub.Patch(ctx, o.DeepCopy(), client.Apply, client.ForceOwnership, client.FieldOwner("helm")); err != nil {
			t.Fatalf("apply %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}

// serviceAccount returns a config that authenticates as the chart's
// ServiceAccount, as a pod of the Deployment would, so the hub's real RBAC
// authorizer decides with exactly what the chart granted.
func serviceAccount(t *testing.T, r rendered) *rest.Config {
	t.Helper()
	sa := one[corev1.ServiceAccount](t, r, "ServiceAccount")
	cfg, err := fleet(t).Hub.AddUser("system:serviceaccount:"+r.namespace+":"+sa.Name,
		"system:serviceaccounts", "system:serviceaccounts:"+r.namespace, "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestInstalledPermissions installs the default release and checks, as its
// ServiceAccount, what it must not be able to do.
func TestInstalledPermissions(t *testing.T) {
	ctx := t.Context()
	f := fleet(t)
	r := mustRender(t, release{name: "fleetvm-hub", namespace: "fleetvm-denied"})
	install(t, r)
	sa, err := client.New(serviceAccount(t, r), client.Options{Scheme: f.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.namespace, Name: "not-the-webhook-cert"}}
	if err := f.Hub.Client.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	otherVWC := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "someone-elses"}}
	if err := f.Hub.Client.Create(ctx, otherVWC); err != nil {
		t.Fatal(err)
	}
	cases := map[string]func() error{
		"get another Secret in its namespace": func() error {
			return sa.Get(ctx, client.ObjectKeyFromObject(other), &corev1.Secret{})
		},
		"list Secrets in its namespace": func() error {
			return sa.List(ctx, &corev1.SecretList{}, client.InNamespace(r.namespace))
		},
		"get a Secret in kube-system": func() error {
			return sa.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "any"}, &corev1.Secret{})
		},
		"create a Secret": func() error {
			return sa.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.namespace, Name: "new"}})
		},
		"update another webhook configuration": func() error {
			var v admissionregistrationv1.ValidatingWebhookConfiguration
			if err := f.Hub.Client.Get(ctx, client.ObjectKeyFromObject(otherVWC), &v); err != nil {
				return err
			}
			v.Labels = map[string]string{"x": "y"}
			return sa.Update(ctx, &v)
		},
		"list webhook configurations": func() error {
			return sa.List(ctx, &admissionregistrationv1.ValidatingWebhookConfigurationList{})
		},
		"get another Lease in its namespace": func() error {
			return sa.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: "some-other-lock"}, &metav1.PartialObjectMetadata{
				TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
			})
		},
		"bind cluster-admin": func() error {
			return sa.Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "escalate"},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
				Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "x", Namespace: r.namespace}},
			})
		},
		"delete FleetVirtualMachines": func() error {
			return sa.DeleteAllOf(ctx, &fleetv1alpha1.FleetVirtualMachine{}, client.InNamespace("default"))
		},
	}
	for name, do := range cases {
		t.Run(name, func(t *testing.T) {
			if err := do(); !apierrors.IsForbidden(err) {
				t.Errorf("got %v, want Forbidden", err)
			}
		})
	}
}

// TestInstalledHubRuns installs the default release and runs the real
// fleetvm-hub binary with the Deployment's arguments, authenticated as the
// chart's ServiceAccount. It must become ready (self-managed certificate
// loaded), serve the webhook with a certificate the configuration's CA
// bundle trusts, create the ClusterManagementAddOn, deploy the agent to a
// cluster and grant it its hub Role, and reconcile a FleetVirtualMachine, with
// no request forbidden on the way. Leader election is off (it needs the
// in-cluster namespace file); TestInstalledLeaderElection covers its
// permissions.
func TestInstalledHubRuns(t *testing.T) {
	ctx := t.Context()
	f := fleet(t)
	hub := f.Hub.Client
	// Every optional flag set, so the binary proves it knows them all.
	r := mustRender(t, release{name: "fleetvm-hub", namespace: "fleetvm-run", values: `
diskImages: {namespace: fleetvm-images, inventoryMaxAge: 15m}
`})
	install(t, r)
	kubeconfig := writeKubeconfig(t, serviceAccount(t, r))
	bin := buildHub(t)

	d := one[appsv1.Deployment](t, r, "Deployment")
	probePort, webhookPort, metricsPort := freePort(t), freePort(t), freePort(t)
	var hubArgs []string
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		if a != "--leader-elect" {
			hubArgs = append(hubArgs, a)
		}
	}
	hubArgs = append(hubArgs, "--kubeconfig="+kubeconfig, fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probePort), fmt.Sprintf("--webhook-port=%d", webhookPort))
	out := runHub(t, bin, hubArgs)

	// Ready: the self-managed certificate is loaded.
	readyz := fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort)
	if err := fleetenv.Eventually(ctx, 60*time.Second, func() (bool, error) {
		resp, err := http.Get(readyz) //nolint:gosec,noctx // local test URL
		if err != nil {
			return false, err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Errorf("readyz: %s", resp.Status)
		}
		return true, nil
	}); err != nil {
		t.Fatalf("fleetvm-hub not ready: %v\n%s", err, out)
	}

	checkMetricsSecured(t, r, metricsPort)

	// The Secret holds the certificate, the configuration trusts its CA,
	// and the webhook answers over TLS verified as the API server does.
	a := args(t, d)
	var secret corev1.Secret
	if err := hub.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: a["webhook-secret-name"]}, &secret); err != nil {
		t.Fatal(err)
	}
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := hub.Get(ctx, client.ObjectKey{Name: a["webhook-configuration-name"]}, &vwc); err != nil {
		t.Fatal(err)
	}
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	if err := hub.Get(ctx, client.ObjectKey{Name: a["webhook-configuration-name"]}, &mwc); err != nil {
		t.Fatal(err)
	}
	bundles := map[string][]byte{}
	for _, w := range vwc.Webhooks {
		bundles[w.Name] = w.ClientConfig.CABundle
	}
	for _, w := range mwc.Webhooks {
		bundles[w.Name] = w.ClientConfig.CABundle
	}
	for name, bundle := range bundles {
		if !bytes.Equal(bundle, secret.Data["ca.crt"]) || len(bundle) == 0 {
			t.Errorf("webhook %s caBundle differs from the Secret's ca.crt", name)
		}
	}
	serverName := a["webhook-service-name"] + "." + r.namespace + ".svc"
	resp, err := review(ctx, webhookPort, fleetwebhook.ValidateFleetVirtualMachinePath, serverName, vwc.Webhooks[0].ClientConfig.CABundle, time.Now)
	if err != nil {
		t.Fatalf("admission review: %v\n%s", err, out)
	}
	if resp.Allowed || !strings.Contains(resp.Result.Message, "cpuu") {
		t.Errorf("admission response allowed=%v message=%q, want the typo refused", resp.Allowed, resp.Result.Message)
	}
	resp, err = review(ctx, webhookPort, fleetwebhook.FinalizerPath, serverName, mwc.Webhooks[0].ClientConfig.CABundle, time.Now)
	if err != nil {
		t.Fatalf("admission review of the finalizer webhook: %v\n%s", err, out)
	}
	if !resp.Allowed || !strings.Contains(string(resp.Patch), fleetv1alpha1.FleetVirtualMachineFinalizer) {
		t.Errorf("finalizer webhook response allowed=%v patch=%s, want the finalizer added", resp.Allowed, resp.Patch)
	}

	// The addon: the hub created the ClusterManagementAddOn; for a
	// cluster with a ManagedClusterAddOn (OCM's addon manager creates it
	// from the Placement) it grants the agent its Role and deploys it.
	var cma addonv1alpha1.ClusterManagementAddOn
	if err := fleetenv.Eventually(ctx, 30*time.Second, func() (bool, error) {
		err := hub.Get(ctx, client.ObjectKey{Name: addon.AddonName}, &cma)
		return err == nil, err
	}); err != nil {
		t.Fatalf("ClusterManagementAddOn: %v\n%s", err, out)
	}
	if got := cma.Spec.InstallStrategy; got.Type != addonv1alpha1.AddonInstallStrategyPlacements ||
		len(got.Placements) != 1 || got.Placements[0].Name != a["addon-placement-name"] || got.Placements[0].Namespace != a["addon-placement-namespace"] {
		t.Errorf("install strategy %+v, want Placements with %s/%s", got, a["addon-placement-namespace"], a["addon-placement-name"])
	}
	if err := fleetenv.Eventually(ctx, 30*time.Second, func() (bool, error) {
		err := hub.Get(ctx, client.ObjectKey{Namespace: a["addon-placement-namespace"], Name: a["addon-placement-name"]}, &clusterv1beta1.Placement{})
		return err == nil, err
	}); err != nil {
		t.Errorf("addon Placement: %v", err)
	}
	const cluster = "cluster-run"
	if err := f.RegisterManagedCluster(ctx, fleetenv.ManagedCluster{Name: cluster}); err != nil {
		t.Fatal(err)
	}
	mca := &addonv1alpha1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{
		Name: addon.AddonName, Namespace: cluster,
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: addonv1alpha1.GroupVersion.String(), Kind: "ClusterManagementAddOn", Name: cma.Name, UID: cma.UID,
		}},
	}}
	if err := hub.Create(ctx, mca); err != nil {
		t.Fatal(err)
	}
	if err := fleetenv.Eventually(ctx, 30*time.Second, func() (bool, error) {
		if err := hub.Get(ctx, client.ObjectKey{Namespace: cluster, Name: addon.AgentHubRoleName}, &rbacv1.RoleBinding{}); err != nil {
			return false, err
		}
		var works workv1.ManifestWorkList
		if err := hub.List(ctx, &works, client.InNamespace(cluster), client.MatchingLabels{addonv1alpha1.AddonLabelKey: addon.AddonName}); err != nil {
			return false, err
		}
		return len(works.Items) > 0, nil
	}); err != nil {
		t.Fatalf("agent Role binding and ManifestWork in %s: %v\n%s", cluster, err, out)
	}

	// A FleetVirtualMachine is reconciled. The API server cannot reach the
	// webhooks through their Service here (no cluster network), so the
	// configurations go first; the webhooks themselves were checked
	// above. Without the finalizer webhook, the controller adds the
	// finalizer itself.
	if err := hub.Delete(ctx, &vwc); err != nil {
		t.Fatal(err)
	}
	if err := hub.Delete(ctx, &mwc); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{a["argocd-namespace"], "vms"} {
		if err := hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
	fvm := &fleetv1alpha1.FleetVirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "vms", Name: "probe"},
		Spec: fleetv1alpha1.FleetVirtualMachineSpec{
			Placement:      fleetv1alpha1.FleetPlacement{Environment: "prod"},
			RunStrategy:    fleetv1alpha1.RunStrategyAlways,
			DeletionPolicy: fleetv1alpha1.DeletionPolicyDelete,
			Template: &runtime.RawExtension{Raw: []byte(`{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine",` +
				`"spec":{"template":{"spec":{"domain":{"cpu":{"cores":1},"memory":{"guest":"1Gi"},"devices":{}}}}}}`)},
		},
	}
	if err := hub.Create(ctx, fvm); err != nil {
		t.Fatal(err)
	}
	if err := fleetenv.Eventually(ctx, 30*time.Second, func() (bool, error) {
		if err := hub.Get(ctx, client.ObjectKeyFromObject(fvm), fvm); err != nil {
			return false, err
		}
		return fvm.Status.ObservedGeneration == fvm.Generation && len(fvm.Status.Conditions) > 0, nil
	}); err != nil {
		t.Fatalf("FleetVirtualMachine not reconciled: %v\n%s", err, out)
	}
	if !slices.Contains(fvm.Finalizers, fleetv1alpha1.FleetVirtualMachineFinalizer) {
		t.Errorf("finalizers %v: the controller did not add %s to a FleetVirtualMachine created without it", fvm.Finalizers, fleetv1alpha1.FleetVirtualMachineFinalizer)
	}

	if s := out.String(); strings.Contains(strings.ToLower(s), "forbidden") {
		t.Errorf("fleetvm-hub was refused a request with the chart's RBAC:\n%s", s)
	}
}

// checkMetricsSecured scrapes the hub's metrics as Prometheus would: over
// HTTPS with a ServiceAccount token. Without a token it is refused (401),
// with one whose user may not get /metrics too (403), and with one bound
// to the chart's metrics-reader ClusterRole it gets FleetVM's metrics.
func checkMetricsSecured(t *testing.T, r rendered, port int) {
	t.Helper()
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(fleet(t).Hub.Config)
	token := func(name string) string {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: r.namespace, Name: name}}
		if _, err := kube.CoreV1().ServiceAccounts(r.namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		tr, err := kube.CoreV1().ServiceAccounts(r.namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(600))},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	var reader string
	for _, u := range r.ofKind("ClusterRole") {
		if strings.HasSuffix(u.GetName(), "-metrics-reader") {
			reader = u.GetName()
		}
	}
	if reader == "" {
		t.Fatal("the chart has no metrics-reader ClusterRole")
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "prometheus-reads-fleetvm"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: r.namespace, Name: "prometheus"}},
	}
	if err := fleet(t).Hub.Client.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	httpClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // the hub's self-signed metrics certificate
	}}
	scrape := func(token string) (int, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", port), nil)
		if err != nil {
			return 0, "", err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), err
	}
	for _, tc := range []struct {
		who   string
		token string
		want  int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a ServiceAccount not allowed /metrics", token("stranger"), http.StatusForbidden},
		{"Prometheus's ServiceAccount, bound to " + reader, token("prometheus"), http.StatusOK},
	} {
		var code int
		var body string
		err := fleetenv.Eventually(ctx, 30*time.Second, func() (bool, error) {
			var err error
			code, body, err = scrape(tc.token)
			return err == nil && code == tc.want, nil
		})
		if err != nil {
			t.Errorf("metrics scraped by %s: HTTP %d, want %d", tc.who, code, tc.want)
			continue
		}
		if tc.want == http.StatusOK && !strings.Contains(body, `controller_runtime_reconcile_total{controller="fleetvirtualmachine"`) {
			t.Errorf("metrics scraped by %s lack FleetVM's metrics", tc.who)
		}
	}
}

// review sends the creation of a FleetVirtualMachine with a typo in its
// template to the webhook at path on a local port, verifying the server as
// the API server does: the Service's DNS name and the configuration's CA
// bundle, at now.
func review(ctx context.Context, port int, path, serverName string, caBundle []byte, now func() time.Time) (*admissionv1.AdmissionResponse, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caBundle) {
		return nil, fmt.Errorf("CA bundle holds no certificate")
	}
	fvm := `{"apiVersion":"fleetvm.io/v1alpha1","kind":"FleetVirtualMachine","metadata":{"name":"typo","namespace":"vms"},` +
		`"spec":{"placement":{},"template":{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine",` +
		`"spec":{"template":{"spec":{"domain":{"cpuu":{"cores":1},"devices":{}}}}}}}}`
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("review-1"),
			Kind:      metav1.GroupVersionKind{Group: "fleetvm.io", Version: "v1alpha1", Kind: "FleetVirtualMachine"},
			Resource:  metav1.GroupVersionResource{Group: "fleetvm.io", Version: "v1alpha1", Resource: "fleetvirtualmachines"},
			Name:      "typo",
			Namespace: "vms",
			Operation: admissionv1.Create,
			Object:    runtime.RawExtension{Raw: []byte(fvm)},
		},
	})
	if err != nil {
		return nil, err
	}
	httpClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: serverName, Time: now, MinVersion: tls.VersionTLS12},
	}}
	url := fmt.Sprintf("https://127.0.0.1:%d%s", port, path)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	var got admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		return nil, fmt.Errorf("%s: %w", resp.Status, err)
	}
	if got.Response == nil || got.Response.UID != "review-1" || got.Response.Result == nil {
		return nil, fmt.Errorf("%s: response %+v", resp.Status, got.Response)
	}
	return got.Response, nil
}

// buildHub builds fleetvm-hub into a temporary folder.
func buildHub(t *testing.T) string {
	t.Helper()
	root, err := fleetenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "fleetvm-hub")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./cmd/fleetvm-hub")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build fleetvm-hub: %v\n%s", err, b)
	}
	return bin
}

// runHub starts fleetvm-hub until the test ends; its output is returned.
func runHub(t *testing.T, bin string, hubArgs []string) *syncBuffer {
	t.Helper()
	out := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	cmd := exec.CommandContext(ctx, bin, hubArgs...)
	cmd.Stdout, cmd.Stderr = out, out
	killWithParent(cmd)
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("fleetvm-hub output:\n%s", out)
		}
	})
	return out
}

// writeKubeconfig writes cfg (client certificate authentication) as a
// kubeconfig file.
func writeKubeconfig(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["hub"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["hub"] = &clientcmdapi.Context{Cluster: "hub", AuthInfo: "user"}
	kc.CurrentContext = "hub"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func freePort(t *testing.T) int {
	t.Helper()
	p, err := fleetenv.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
