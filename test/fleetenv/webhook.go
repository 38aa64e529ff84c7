package fleetenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	fleetv1alpha1 "github.com/fleetvm/fleetvm/apis/fleetvm/v1alpha1"
	"github.com/fleetvm/fleetvm/pkg/vmclaim"
	fleetwebhook "github.com/fleetvm/fleetvm/pkg/webhook"
)

// WebhookOptions makes the hub call FleetVM's admission webhooks (from
// deploy/webhook) on a local port. Pass it as Options.HubWebhook, then call
// ServeWebhooks once the fleet runs.
func WebhookOptions() (*envtest.WebhookInstallOptions, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	return &envtest.WebhookInstallOptions{
		Paths:                    []string{filepath.Join(root, "deploy", "webhook")},
		IgnoreErrorIfPathMissing: false,
	}, nil
}

// ClaimReader returns a started cache of the hub, as cfg sees it, that
// indexes FleetVirtualMachines by the VM they deliver: the reader the
// FleetVirtualMachine webhook checks claims with. It runs until ctx ends.
func ClaimReader(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme) (client.Reader, error) {
	c, err := cache.New(cfg, cache.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	if err := vmclaim.SetupIndex(ctx, c); err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the claim cache did not sync")
	}
	// Start the FleetVirtualMachine informer now, not on the first request.
	if _, err := c.GetInformer(ctx, &fleetv1alpha1.FleetVirtualMachine{}); err != nil {
		return nil, err
	}
	return c, nil
}

// ServeWebhooks serves FleetVM's admission webhooks in this process, where
// the hub's webhook configuration points, until ctx ends. It returns once
// the server accepts connections.
func (f *Fleet) ServeWebhooks(ctx context.Context, opts *envtest.WebhookInstallOptions) error {
	server := webhook.NewServer(webhook.Options{
		Host:    opts.LocalServingHost,
		Port:    opts.LocalServingPort,
		CertDir: opts.LocalServingCertDir,
	})
	reader, err := ClaimReader(ctx, f.Hub.Config, f.Scheme)
	if err != nil {
		return err
	}
	fleetwebhook.Register(server, f.Scheme, reader, fleetwebhook.Options{LiveReader: f.Hub.Client})
	fleetwebhook.RegisterDiskImageGuard(server, f.Scheme, f.Hub.Client, fleetwebhook.Options{})
	go func() { _ = server.Start(ctx) }()

	addr := net.JoinHostPort(opts.LocalServingHost, strconv.Itoa(opts.LocalServingPort))
	dialer := &net.Dialer{Timeout: time.Second}
	return Eventually(ctx, 10*time.Second, func() (bool, error) {
		conn, err := tls.DialWithDialer(dialer, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // local test server
		if err != nil {
			return false, fmt.Errorf("webhook server %s: %w", addr, err)
		}
		_ = conn.Close()
		return true, nil
	})
}
