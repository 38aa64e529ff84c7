package fleetenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
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

// WebhooksDown makes the hub's FleetVM webhooks unreachable, as when
// fleetvm-hub is down: every one of them, mutating and validating, is
// pointed at a closed port (its failurePolicy decides what the API server
// does then). restore points them back.
func (f *Fleet) WebhooksDown(ctx context.Context) (restore func(context.Context) error, err error) {
	return f.webhooksUnreachable(ctx, false)
}

// WebhooksOff makes the hub admit FleetVM's objects without its webhooks,
// as when an operator set them to failurePolicy Ignore and fleetvm-hub's
// webhook server is down: every one, mutating and validating, is pointed
// at a closed port and set to Ignore. What the webhooks would refuse is
// then stored, what they would add is missing, and only the controllers
// stand between it and the clusters. The API server takes the change up a
// moment later: wait for its effect. restore puts them back.
func (f *Fleet) WebhooksOff(ctx context.Context) (restore func(context.Context) error, err error) {
	return f.webhooksUnreachable(ctx, true)
}

func (f *Fleet) webhooksUnreachable(ctx context.Context, ignore bool) (restore func(context.Context) error, err error) {
	var restores []func(context.Context) error
	var mutating admissionregistrationv1.MutatingWebhookConfigurationList
	if err := f.Hub.Client.List(ctx, &mutating); err != nil {
		return nil, err
	}
	for i := range mutating.Items {
		cfg := &mutating.Items[i]
		saved := cfg.DeepCopy().Webhooks
		changed := false
		for j := range cfg.Webhooks {
			w := &cfg.Webhooks[j]
			ok, err := pointAway(&w.ClientConfig, &w.FailurePolicy, ignore)
			if err != nil {
				return nil, err
			}
			changed = changed || ok
		}
		if !changed {
			continue
		}
		if err := f.Hub.Client.Update(ctx, cfg); err != nil {
			return nil, fmt.Errorf("point webhook configuration %s at a closed port: %w", cfg.Name, err)
		}
		restores = append(restores, func(ctx context.Context) error {
			cur := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := f.Hub.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cur); err != nil {
				return err
			}
			cur.Webhooks = saved
			if err := f.Hub.Client.Update(ctx, cur); err != nil {
				return fmt.Errorf("restore webhook configuration %s: %w", cur.Name, err)
			}
			return nil
		})
	}
	var validating admissionregistrationv1.ValidatingWebhookConfigurationList
	if err := f.Hub.Client.List(ctx, &validating); err != nil {
		return nil, err
	}
	for i := range validating.Items {
		cfg := &validating.Items[i]
		saved := cfg.DeepCopy().Webhooks
		changed := false
		for j := range cfg.Webhooks {
			w := &cfg.Webhooks[j]
			ok, err := pointAway(&w.ClientConfig, &w.FailurePolicy, ignore)
			if err != nil {
				return nil, err
			}
			changed = changed || ok
		}
		if !changed {
			continue
		}
		if err := f.Hub.Client.Update(ctx, cfg); err != nil {
			return nil, fmt.Errorf("point webhook configuration %s at a closed port: %w", cfg.Name, err)
		}
		restores = append(restores, func(ctx context.Context) error {
			cur := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := f.Hub.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cur); err != nil {
				return err
			}
			cur.Webhooks = saved
			if err := f.Hub.Client.Update(ctx, cur); err != nil {
				return fmt.Errorf("restore webhook configuration %s: %w", cur.Name, err)
			}
			return nil
		})
	}
	if len(restores) == 0 {
		return nil, fmt.Errorf("no FleetVM webhook is installed on the hub")
	}
	return func(ctx context.Context) error {
		for _, restore := range restores {
			if err := restore(ctx); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// pointAway points a FleetVM webhook at a port nothing listens on, and
// with ignore sets its failurePolicy to Ignore. It tells whether the
// webhook was FleetVM's.
func pointAway(cc *admissionregistrationv1.WebhookClientConfig, policy **admissionregistrationv1.FailurePolicyType, ignore bool) (bool, error) {
	if cc.URL == nil || !strings.Contains(*cc.URL, "fleetvm-io") {
		return false, nil
	}
	u, err := url.Parse(*cc.URL)
	if err != nil {
		return false, err
	}
	u.Host = "127.0.0.1:1" // nothing listens there
	cc.URL = ptr.To(u.String())
	if ignore {
		*policy = ptr.To(admissionregistrationv1.Ignore)
	}
	return true, nil
}
