// Package certs gives fleetvm-hub's admission webhook a serving certificate
// when no cert-manager does: a CA and a serving certificate for the webhook
// Service, kept in one Secret, renewed well before they expire, and the CA
// bundle written into the MutatingWebhookConfiguration and the
// ValidatingWebhookConfiguration so the API server trusts the webhooks.
//
// Every replica runs a Rotator. It serves the certificate from memory (the
// webhook server's GetCertificate), so no Secret volume and no wait for the
// kubelet to refresh one; it reads the Secret and the two webhook
// configurations by name, never lists or watches them, so its RBAC names
// exactly those objects. Replicas that race to renew are serialized by the API server's
// optimistic concurrency: the loser re-reads and finds nothing due.
//
// On every pass a Rotator writes the Secret first, then the CA bundle into
// the webhook configurations, and only then serves the new certificate: the
// API server trusts a new CA before any replica presents a certificate it
// signed. Earlier CAs stay in the bundle until they expire, so replicas that
// still serve an older certificate stay trusted.
package certs

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetvm/fleetvm/pkg/write"
)

// Mode says where the webhook's serving certificate comes from.
type Mode string

const (
	// ModeExternal: files in the webhook certificate folder, written by
	// someone else (cert-manager, or an operator), reloaded on change.
	ModeExternal Mode = "external"
	// ModeSelfManaged: a Rotator generates, stores and renews it.
	ModeSelfManaged Mode = "self-managed"
)

// Defaults of Options.
const (
	DefaultSecretName        = "fleetvm-hub-webhook-cert"
	DefaultServiceName       = "fleetvm-hub-webhook"
	DefaultWebhookConfigName = "fleetvm-hub"
	DefaultCAValidity        = 5 * 365 * 24 * time.Hour
	DefaultCertValidity      = 90 * 24 * time.Hour
	DefaultSyncInterval      = 5 * time.Minute
	DefaultRetryInterval     = 10 * time.Second
)

// Options configure the webhook certificate.
type Options struct {
	// Mode; ModeExternal when empty. NewRotator ignores it: whoever calls
	// it has chosen ModeSelfManaged.
	Mode Mode
	// Namespace of the webhook Service and of the Secret. Required with
	// ModeSelfManaged.
	Namespace string
	// SecretName is the Secret that holds the CA and the serving
	// certificate. It must exist: the Rotator updates it but never creates
	// it, so its RBAC can name it.
	SecretName string
	// ServiceName is the webhook Service; the serving certificate is for
	// its DNS names.
	ServiceName string
	// WebhookConfigName names the MutatingWebhookConfiguration and the
	// ValidatingWebhookConfiguration (one name, two kinds) whose webhooks
	// get the CA bundle.
	WebhookConfigName string
	// CAValidity and CertValidity are the lifetimes of new CAs and serving
	// certificates; each is renewed when a third of it is left.
	CAValidity   time.Duration
	CertValidity time.Duration
	// SyncInterval is the longest time between two checks of the Secret
	// and the webhook configurations (a bundle someone reset is repaired
	// within it); RetryInterval the time after a failed pass.
	SyncInterval  time.Duration
	RetryInterval time.Duration
}

// BindFlags registers the flags of the webhook certificate.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	if o.Mode == "" {
		o.Mode = ModeExternal
	}
	fs.Func("webhook-cert-mode", `Where the webhook serving certificate comes from: "external" (files in --webhook-cert-dir, e.g. from cert-manager) or "self-managed" (generated into a Secret and renewed by fleetvm-hub, CA bundle written into the webhook configuration). Default "external".`,
		func(s string) error {
			switch m := Mode(s); m {
			case ModeExternal, ModeSelfManaged:
				o.Mode = m
				return nil
			}
			return fmt.Errorf("must be %q or %q", ModeExternal, ModeSelfManaged)
		})
	fs.StringVar(&o.Namespace, "webhook-namespace", o.Namespace, "Namespace of the webhook Service and certificate Secret (self-managed certificates).")
	fs.StringVar(&o.SecretName, "webhook-secret-name", DefaultSecretName, "Existing Secret that holds the webhook CA and serving certificate (self-managed certificates).")
	fs.StringVar(&o.ServiceName, "webhook-service-name", DefaultServiceName, "Webhook Service whose DNS names the serving certificate is for (self-managed certificates).")
	fs.StringVar(&o.WebhookConfigName, "webhook-configuration-name", DefaultWebhookConfigName, "Name of the MutatingWebhookConfiguration and the ValidatingWebhookConfiguration that get the CA bundle (self-managed certificates).")
}

func (o Options) withDefaults() (Options, error) {
	if o.SecretName == "" {
		o.SecretName = DefaultSecretName
	}
	if o.ServiceName == "" {
		o.ServiceName = DefaultServiceName
	}
	if o.WebhookConfigName == "" {
		o.WebhookConfigName = DefaultWebhookConfigName
	}
	if o.CAValidity == 0 {
		o.CAValidity = DefaultCAValidity
	}
	if o.CertValidity == 0 {
		o.CertValidity = DefaultCertValidity
	}
	if o.SyncInterval == 0 {
		o.SyncInterval = DefaultSyncInterval
	}
	if o.RetryInterval == 0 {
		o.RetryInterval = DefaultRetryInterval
	}
	var errs []error
	if o.Namespace == "" {
		errs = append(errs, errors.New("webhook namespace: required for self-managed certificates"))
	}
	if o.CAValidity < 0 || o.CertValidity < 0 || o.SyncInterval < 0 || o.RetryInterval < 0 {
		errs = append(errs, errors.New("webhook certificate durations must be positive"))
	}
	return o, errors.Join(errs...)
}

// DNSNames are the names the serving certificate is for; the first is the
// one the API server uses for a webhook Service.
func (o Options) DNSNames() []string {
	svc, ns := o.ServiceName, o.Namespace
	return []string{
		svc + "." + ns + ".svc",
		svc + "." + ns + ".svc.cluster.local",
		svc + "." + ns,
		svc,
	}
}

// Rotator keeps the webhook certificate. Add it to the manager (it runs on
// every replica, not only the leader), set TLSOpt on the webhook server and
// ReadyCheck as a readiness check.
type Rotator struct {
	client client.Client
	clock  clock.Clock
	rand   io.Reader
	log    logr.Logger
	opts   Options

	current atomic.Pointer[tls.Certificate]
}

// NewRotator returns a Rotator that reads and writes with c. Give it a
// client without a cache: it gets two objects by name, and a cached client
// would list and watch every Secret of the hub.
func NewRotator(c client.Client, clk clock.Clock, log logr.Logger, opts Options) (*Rotator, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Rotator{client: c, clock: clk, rand: rand.Reader, log: log, opts: opts}, nil
}

// TLSOpt makes a webhook server serve the Rotator's certificate.
func (r *Rotator) TLSOpt(cfg *tls.Config) {
	cfg.GetCertificate = r.GetCertificate
}

// GetCertificate returns the serving certificate, once the first pass has
// loaded one.
func (r *Rotator) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := r.current.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("webhook serving certificate not loaded yet")
}

// ReadyCheck fails until a serving certificate is loaded.
func (r *Rotator) ReadyCheck(*http.Request) error {
	if r.current.Load() == nil {
		return errors.New("webhook serving certificate not loaded yet")
	}
	return nil
}

// NeedLeaderElection is false: every replica serves the webhook.
func (r *Rotator) NeedLeaderElection() bool { return false }

// Start runs Sync now and again whenever something is due, at the latest
// every SyncInterval, and after RetryInterval when a pass failed, until
// ctx ends.
func (r *Rotator) Start(ctx context.Context) error {
	for {
		wait := r.opts.SyncInterval
		next, err := r.Sync(ctx)
		if err != nil {
			r.log.Error(err, "webhook certificate pass failed; retrying", "retryIn", r.opts.RetryInterval)
			wait = r.opts.RetryInterval
		} else if d := next.Sub(r.clock.Now()); d < wait {
			wait = max(d, time.Second)
		}
		t := r.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
	}
}

// Sync makes one pass: renew what is due in the Secret, make every webhook
// of both configurations trust the CA bundle, then serve the Secret's
// certificate. It returns when the next renewal is due.
func (r *Rotator) Sync(ctx context.Context) (time.Time, error) {
	key := types.NamespacedName{Namespace: r.opts.Namespace, Name: r.opts.SecretName}
	var secret corev1.Secret
	if err := r.client.Get(ctx, key, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return time.Time{}, fmt.Errorf("webhook certificate Secret %s does not exist (the fleetvm-hub chart creates it): %w", key, err)
		}
		return time.Time{}, fmt.Errorf("get webhook certificate Secret %s: %w", key, err)
	}
	out, err := plan(r.clock.Now(), secret.Data, params{
		dnsNames:     r.opts.DNSNames(),
		caName:       "fleetvm-hub-webhook-ca." + r.opts.Namespace,
		caValidity:   r.opts.CAValidity,
		certValidity: r.opts.CertValidity,
	}, r.rand)
	if err != nil {
		return time.Time{}, err
	}
	if out.changed {
		if _, err := write.Mutate(ctx, r.client, &secret, func() { secret.Data = out.data }); err != nil {
			return time.Time{}, fmt.Errorf("update webhook certificate Secret %s: %w", key, err)
		}
		r.log.Info("webhook certificate renewed", "secret", key.String(), "newCA", out.newCA, "newCertificate", out.newCert, "notAfter", out.notAfter)
	}
	if err := r.ensureCABundle(ctx, out.bundle); err != nil {
		return time.Time{}, err
	}
	cert, err := tls.X509KeyPair(out.data[KeyCert], out.data[KeyKey])
	if err != nil {
		return time.Time{}, fmt.Errorf("load webhook serving certificate: %w", err)
	}
	if old := r.current.Load(); old == nil || !bytes.Equal(old.Certificate[0], cert.Certificate[0]) {
		r.current.Store(&cert)
		r.log.Info("serving webhook certificate", "notAfter", out.notAfter)
	}
	return out.next, nil
}

// ensureCABundle makes every webhook of the mutating and the validating
// configuration trust bundle.
func (r *Rotator) ensureCABundle(ctx context.Context, bundle []byte) error {
	key := types.NamespacedName{Name: r.opts.WebhookConfigName}
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	if err := r.client.Get(ctx, key, &mwc); err != nil {
		return fmt.Errorf("get MutatingWebhookConfiguration %s: %w", key.Name, err)
	}
	if err := r.writeCABundle(ctx, &mwc, "MutatingWebhookConfiguration", func() {
		for i := range mwc.Webhooks {
			mwc.Webhooks[i].ClientConfig.CABundle = bundle
		}
	}); err != nil {
		return err
	}
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := r.client.Get(ctx, key, &vwc); err != nil {
		return fmt.Errorf("get ValidatingWebhookConfiguration %s: %w", key.Name, err)
	}
	return r.writeCABundle(ctx, &vwc, "ValidatingWebhookConfiguration", func() {
		for i := range vwc.Webhooks {
			vwc.Webhooks[i].ClientConfig.CABundle = bundle
		}
	})
}

// writeCABundle writes set's change to the webhook configuration obj of
// kind, if it changes anything.
func (r *Rotator) writeCABundle(ctx context.Context, obj client.Object, kind string, set func()) error {
	changed, err := write.Mutate(ctx, r.client, obj, set)
	if err != nil {
		return fmt.Errorf("write the CA bundle into %s %s: %w", kind, obj.GetName(), err)
	}
	if changed {
		r.log.Info("CA bundle written into the webhook configuration", "kind", kind, "name", obj.GetName())
	}
	return nil
}
