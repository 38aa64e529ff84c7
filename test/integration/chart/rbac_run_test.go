package chart

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crleaderelection "sigs.k8s.io/controller-runtime/pkg/leaderelection"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/fleetvm/fleetvm/pkg/certs"
	fleetwebhook "github.com/fleetvm/fleetvm/pkg/webhook"
	"github.com/fleetvm/fleetvm/test/fleetenv"
)

// hubLeaderElectionID reads LeaderElectionID from cmd/fleetvm-hub, so the
// chart's Role is checked against the Lease the binary really takes.
func hubLeaderElectionID(t *testing.T) string {
	t.Helper()
	root, err := fleetenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	file, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, "cmd", "fleetvm-hub", "main.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var id string
	ast.Inspect(file, func(n ast.Node) bool {
		if kv, ok := n.(*ast.KeyValueExpr); ok {
			if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "LeaderElectionID" {
				if lit, ok := kv.Value.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					id, _ = strconv.Unquote(lit.Value)
				}
			}
		}
		return id == ""
	})
	if id == "" {
		t.Fatal("cmd/fleetvm-hub/main.go sets no literal LeaderElectionID")
	}
	return id
}

type recorders struct{}

func (recorders) GetEventRecorderFor(string) record.EventRecorder { return record.NewFakeRecorder(100) }

// TestInstalledLeaderElection runs controller-runtime's leader election,
// as fleetvm-hub does with --leader-elect, as the chart's ServiceAccount:
// it must take the Lease, renew it and release it.
func TestInstalledLeaderElection(t *testing.T) {
	ctx := t.Context()
	f := fleet(t)
	r := mustRender(t, release{name: "fleetvm-hub", namespace: "fleetvm-leader"})
	install(t, r)
	id := hubLeaderElectionID(t)

	// The chart's Role names the Lease the binary takes.
	var names []string
	for _, u := range r.ofKind("Role") {
		if !strings.HasSuffix(u.GetName(), "-leader-election") {
			continue
		}
		for _, rule := range convert[rbacv1.Role](t, u).Rules {
			names = append(names, rule.ResourceNames...)
		}
	}
	if len(names) != 1 || names[0] != id {
		t.Fatalf("leader-election Role names Leases %q, want only %q", names, id)
	}

	lock, err := crleaderelection.NewResourceLock(serviceAccount(t, r), recorders{}, crleaderelection.Options{
		LeaderElection: true, LeaderElectionID: id, LeaderElectionNamespace: r.namespace, RenewDeadline: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   4 * time.Second,
		RenewDeadline:   2 * time.Second,
		RetryPeriod:     200 * time.Millisecond,
		ReleaseOnCancel: true,
		Name:            id,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(started) },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	electCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		elector.Run(electCtx)
	}()
	t.Cleanup(func() { stop(); <-done })

	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the chart's ServiceAccount did not take the Lease within 30s")
	}
	key := client.ObjectKey{Namespace: r.namespace, Name: id}
	var lease coordinationv1.Lease
	if err := f.Hub.Client.Get(ctx, key, &lease); err != nil {
		t.Fatal(err)
	}
	first := lease.Spec.RenewTime.Time
	if err := fleetenv.Eventually(ctx, 10*time.Second, func() (bool, error) {
		if err := f.Hub.Client.Get(ctx, key, &lease); err != nil {
			return false, err
		}
		return lease.Spec.RenewTime.After(first), nil
	}); err != nil {
		t.Fatalf("Lease not renewed: %v", err)
	}
	stop()
	<-done
	if err := f.Hub.Client.Get(ctx, key, &lease); err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("Lease still held by %q after release", *h)
	}
}

// TestInstalledCertificateRotation runs the self-managed certificate
// rotator as fleetvm-hub does, with the names the chart passes it and as the
// chart's ServiceAccount, behind a webhook server, on a fake clock: it
// issues a certificate both webhook configurations trust, renews it before
// it expires, and repairs CA bundles someone reset.
func TestInstalledCertificateRotation(t *testing.T) {
	ctx := t.Context()
	f := fleet(t)
	r := mustRender(t, release{name: "rot", namespace: "fleetvm-rotation"})
	install(t, r)

	// The certificate flags exactly as the chart passes them.
	opts := certs.Options{CAValidity: 30 * time.Hour, CertValidity: 3 * time.Hour, SyncInterval: time.Hour, RetryInterval: time.Minute}
	fs := flag.NewFlagSet("fleetvm-hub", flag.ContinueOnError)
	opts.BindFlags(fs)
	var certArgs []string
	for _, a := range one[appsv1.Deployment](t, r, "Deployment").Spec.Template.Spec.Containers[0].Args {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if fs.Lookup(name) != nil {
			certArgs = append(certArgs, a)
		}
	}
	if err := fs.Parse(certArgs); err != nil {
		t.Fatal(err)
	}
	if opts.Mode != certs.ModeSelfManaged || len(certArgs) != 5 {
		t.Fatalf("certificate arguments %q, want self-managed and the four names", certArgs)
	}

	sa, err := client.New(serviceAccount(t, r), client.Options{Scheme: f.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	clock := clocktesting.NewFakeClock(time.Now())
	rot, err := certs.NewRotator(sa, clock, logr.Discard(), opts)
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	server := webhook.NewServer(webhook.Options{Host: "127.0.0.1", Port: port, TLSOpts: []func(*tls.Config){rot.TLSOpt}})
	runCtx, stop := context.WithCancel(ctx)
	// The webhook reads claims as the chart's ServiceAccount.
	claims, err := fleetenv.ClaimReader(runCtx, serviceAccount(t, r), f.Scheme)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	live, err := client.New(serviceAccount(t, r), client.Options{Scheme: f.Scheme})
	if err != nil {
		stop()
		t.Fatal(err)
	}
	fleetwebhook.Register(server, f.Scheme, claims, fleetwebhook.Options{LiveReader: live})
	serverDone, rotDone := make(chan error, 1), make(chan error, 1)
	go func() { serverDone <- server.Start(runCtx) }()
	go func() { rotDone <- rot.Start(runCtx) }()
	t.Cleanup(func() {
		stop()
		<-serverDone
		<-rotDone
	})

	if err := fleetenv.Eventually(ctx, 30*time.Second, func() (bool, error) {
		return rot.ReadyCheck(nil) == nil, nil
	}); err != nil {
		t.Fatalf("rotator never ready: %v", err)
	}
	serverName := opts.DNSNames()[0]
	vwcKey := client.ObjectKey{Name: opts.WebhookConfigName}
	bundle := func() []byte {
		var vwc admissionregistrationv1.ValidatingWebhookConfiguration
		if err := f.Hub.Client.Get(ctx, vwcKey, &vwc); err != nil {
			t.Fatal(err)
		}
		return vwc.Webhooks[0].ClientConfig.CABundle
	}
	mutatingBundle := func() []byte {
		var mwc admissionregistrationv1.MutatingWebhookConfiguration
		if err := f.Hub.Client.Get(ctx, vwcKey, &mwc); err != nil {
			t.Fatal(err)
		}
		return mwc.Webhooks[0].ClientConfig.CABundle
	}
	if len(bundle()) == 0 || !bytes.Equal(mutatingBundle(), bundle()) {
		t.Error("the mutating and the validating webhook configurations do not trust the same CA bundle")
	}
	first, err := served(port, serverName, bundle(), clock.Now())
	if err != nil {
		t.Fatalf("served certificate: %v", err)
	}
	resp, err := review(ctx, port, fleetwebhook.ValidateFleetVirtualMachinePath, serverName, bundle(), clock.Now)
	if err != nil || resp.Allowed {
		t.Fatalf("admission review through the rotated certificate: %+v, %v", resp, err)
	}

	// Two hours and ten minutes on, a third of the 3h certificate is left:
	// the timer of the rotator's loop fires and a new one is served, from
	// the same CA.
	waitForTimer(t, clock)
	firstBundle := bundle()
	clock.Step(2*time.Hour + 10*time.Minute)
	var renewed *x509.Certificate
	if err := fleetenv.Eventually(ctx, 30*time.Second, func() (bool, error) {
		c, err := served(port, serverName, bundle(), clock.Now())
		if err != nil {
			return false, err
		}
		renewed = c
		return c.SerialNumber.Cmp(first.SerialNumber) != 0, nil
	}); err != nil {
		t.Fatalf("certificate not renewed: %v", err)
	}
	if !renewed.NotAfter.After(first.NotAfter) {
		t.Errorf("renewed certificate expires %v, not after the first's %v", renewed.NotAfter, first.NotAfter)
	}
	if string(bundle()) != string(firstBundle) {
		t.Error("CA bundle changed for a serving certificate renewal")
	}

	// Someone resets the CA bundles: the next pass writes them back.
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := f.Hub.Client.Get(ctx, vwcKey, &vwc); err != nil {
		t.Fatal(err)
	}
	for i := range vwc.Webhooks {
		vwc.Webhooks[i].ClientConfig.CABundle = nil
	}
	if err := f.Hub.Client.Update(ctx, &vwc); err != nil {
		t.Fatal(err)
	}
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	if err := f.Hub.Client.Get(ctx, vwcKey, &mwc); err != nil {
		t.Fatal(err)
	}
	for i := range mwc.Webhooks {
		mwc.Webhooks[i].ClientConfig.CABundle = nil
	}
	if err := f.Hub.Client.Update(ctx, &mwc); err != nil {
		t.Fatal(err)
	}
	waitForTimer(t, clock)
	clock.Step(opts.SyncInterval)
	if err := fleetenv.Eventually(ctx, 30*time.Second, func() (bool, error) {
		return string(bundle()) == string(firstBundle) && string(mutatingBundle()) == string(firstBundle), nil
	}); err != nil {
		t.Fatalf("CA bundles not repaired: %v", err)
	}

	var secret corev1.Secret
	if err := f.Hub.Client.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: opts.SecretName}, &secret); err != nil {
		t.Fatal(err)
	}
	if string(secret.Data[certs.KeyCABundle]) != string(firstBundle) {
		t.Error("Secret ca.crt differs from the configuration's CA bundle")
	}
}

// waitForTimer waits until the rotator's loop waits on the fake clock.
func waitForTimer(t *testing.T, clock *clocktesting.FakeClock) {
	t.Helper()
	if err := fleetenv.Eventually(t.Context(), 30*time.Second, func() (bool, error) {
		return clock.HasWaiters(), nil
	}); err != nil {
		t.Fatalf("rotator loop not waiting: %v", err)
	}
}

// served returns the certificate the server on port presents, verified as
// the API server verifies it: for serverName, by the CA bundle, at now.
func served(port int, serverName string, caBundle []byte, now time.Time) (*x509.Certificate, error) {
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caBundle) {
		return nil, errors.New("CA bundle holds no certificate")
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{
		RootCAs: roots, ServerName: serverName, Time: func() time.Time { return now }, MinVersion: tls.VersionTLS12,
	})
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0], nil
}
