package fleetenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

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

// ServeWebhooks serves FleetVM's admission webhooks in this process, where
// the hub's webhook configuration points, until ctx ends. It returns once
// the server accepts connections.
func (f *Fleet) ServeWebhooks(ctx context.Context, opts *envtest.WebhookInstallOptions) error {
	server := webhook.NewServer(webhook.Options{
		Host:    opts.LocalServingHost,
		Port:    opts.LocalServingPort,
		CertDir: opts.LocalServingCertDir,
	})
	fleetwebhook.Register(server, f.Scheme)
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
