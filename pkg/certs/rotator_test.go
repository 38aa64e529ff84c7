package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

var testOpts = Options{Mode: ModeSelfManaged, Namespace: "fleetvm-system"}

func testObjects() []client.Object {
	return []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleetvm-system", Name: DefaultSecretName}},
		&admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: DefaultWebhookConfigName},
			Webhooks:   []admissionregistrationv1.MutatingWebhook{{Name: "m.fleetvm.io"}},
		},
		&admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: DefaultWebhookConfigName},
			Webhooks:   []admissionregistrationv1.ValidatingWebhook{{Name: "a.fleetvm.io"}, {Name: "b.fleetvm.io"}},
		},
	}
}

// newTestRotator returns a Rotator on a fake client holding objs, and the
// kinds of the objects it updated or patched, in order.
func newTestRotator(t *testing.T, objs ...client.Object) (*Rotator, *clocktesting.FakeClock, *[]string) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	var updates []string
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithInterceptorFuncs(interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			updates = append(updates, kindOf(obj))
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			updates = append(updates, kindOf(obj))
			return c.Patch(ctx, obj, p, opts...)
		},
	}).Build()
	clk := clocktesting.NewFakeClock(t0)
	r, err := NewRotator(c, clk, logr.Discard(), testOpts)
	if err != nil {
		t.Fatal(err)
	}
	return r, clk, &updates
}

func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *corev1.Secret:
		return "Secret"
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		return "MutatingWebhookConfiguration"
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		return "ValidatingWebhookConfiguration"
	}
	return "other"
}

// TestSyncWritesOnlyWhatChanged: the first pass fills the Secret and the
// CA bundle of every webhook and serves the certificate; a second pass
// writes nothing; a renewal rewrites the Secret, not the unchanged bundle.
func TestSyncWritesOnlyWhatChanged(t *testing.T) {
	ctx := context.Background()
	r, clk, updates := newTestRotator(t, testObjects()...)
	if r.ReadyCheck(nil) == nil {
		t.Error("ready before the first pass")
	}
	if _, err := r.GetCertificate(nil); err == nil {
		t.Error("a certificate served before the first pass")
	}

	next, err := r.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Secret", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}, *updates); diff != "" {
		t.Errorf("first pass updates (-want,+got):\n%s", diff)
	}
	var secret corev1.Secret
	if err := r.client.Get(ctx, client.ObjectKey{Namespace: "fleetvm-system", Name: DefaultSecretName}, &secret); err != nil {
		t.Fatal(err)
	}
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := r.client.Get(ctx, client.ObjectKey{Name: DefaultWebhookConfigName}, &vwc); err != nil {
		t.Fatal(err)
	}
	for _, w := range vwc.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, secret.Data[KeyCABundle]) {
			t.Errorf("webhook %s: CA bundle is not the Secret's ca.crt", w.Name)
		}
	}
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	if err := r.client.Get(ctx, client.ObjectKey{Name: DefaultWebhookConfigName}, &mwc); err != nil {
		t.Fatal(err)
	}
	for _, w := range mwc.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, secret.Data[KeyCABundle]) {
			t.Errorf("mutating webhook %s: CA bundle is not the Secret's ca.crt", w.Name)
		}
	}
	if err := r.ReadyCheck(nil); err != nil {
		t.Errorf("not ready after the first pass: %v", err)
	}
	served, err := r.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(secret.Data[KeyCABundle])
	leaf, err := x509.ParseCertificate(served.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "fleetvm-hub-webhook.fleetvm-system.svc", Roots: roots, CurrentTime: clk.Now()}); err != nil {
		t.Errorf("served certificate does not verify for the Service: %v", err)
	}

	*updates = nil
	if _, err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if len(*updates) != 0 {
		t.Errorf("second pass with nothing due wrote %v", *updates)
	}

	clk.SetTime(next)
	if _, err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"Secret"}, *updates); diff != "" {
		t.Errorf("renewal updates (-want,+got):\n%s", diff)
	}
	renewed, err := r.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(renewed.Certificate[0], served.Certificate[0]) {
		t.Error("still serving the old certificate after renewal")
	}
}

func TestSyncErrors(t *testing.T) {
	objs := testObjects()
	cases := map[string]struct {
		objs []client.Object
		want string
	}{
		"no Secret: names the chart that creates it": {objs: objs[1:], want: "the fleetvm-hub chart creates it"},
		"no mutating webhook configuration":          {objs: []client.Object{objs[0], objs[2]}, want: "get MutatingWebhookConfiguration fleetvm-hub"},
		"no validating webhook configuration":        {objs: objs[:2], want: "get ValidatingWebhookConfiguration fleetvm-hub"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r, _, _ := newTestRotator(t, tc.objs...)
			_, err := r.Sync(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Sync error = %v, want one containing %q", err, tc.want)
			}
			if r.ReadyCheck(nil) == nil {
				t.Error("ready after a failed pass")
			}
		})
	}
}

func TestNewRotatorNeedsNamespace(t *testing.T) {
	if _, err := NewRotator(nil, clocktesting.NewFakeClock(time.Now()), logr.Discard(), Options{Mode: ModeSelfManaged}); err == nil {
		t.Error("NewRotator without a namespace: want an error")
	}
}
