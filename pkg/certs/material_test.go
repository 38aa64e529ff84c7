package certs

import (
	"bytes"
	"crypto/rand"
	"crypto/x509"
	"maps"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var (
	t0         = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	testParams = params{
		dnsNames:     []string{"hook.ns.svc", "hook.ns.svc.cluster.local", "hook.ns", "hook"},
		caName:       "test-ca",
		caValidity:   300 * time.Hour,
		certValidity: 30 * time.Hour,
	}
)

// issued is plan on empty data at t0: a fresh CA and serving certificate.
func issued(t *testing.T) map[string][]byte {
	t.Helper()
	out, err := plan(t0, nil, testParams, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return out.data
}

// verifies reports whether the serving certificate in data is trusted by
// the bundle in data for the first DNS name at now, as the API server
// checks it.
func verifies(t *testing.T, data map[string][]byte, bundle []byte, now time.Time) bool {
	t.Helper()
	leaf := parseCerts(data[KeyCert])
	if len(leaf) != 1 {
		t.Fatalf("tls.crt holds %d certificates, want 1", len(leaf))
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(bundle) {
		t.Fatal("bundle holds no certificate")
	}
	_, err := leaf[0].Verify(x509.VerifyOptions{DNSName: testParams.dnsNames[0], Roots: roots, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	return err == nil
}

type result struct {
	Changed, NewCA, NewCert bool
	BundleSize              int
	// Same lists the keys whose bytes did not change.
	Same []string
}

func TestPlan(t *testing.T) {
	cases := map[string]struct {
		now time.Time
		// data is built from a fresh issue at t0.
		data func(t *testing.T, fresh map[string][]byte) map[string][]byte
		want result
	}{
		"empty Secret: CA and serving certificate issued": {
			now:  t0,
			data: func(*testing.T, map[string][]byte) map[string][]byte { return nil },
			want: result{Changed: true, NewCA: true, NewCert: true, BundleSize: 1},
		},
		"nothing due: every byte kept": {
			now:  t0.Add(19 * time.Hour),
			data: func(_ *testing.T, d map[string][]byte) map[string][]byte { return d },
			want: result{BundleSize: 1, Same: []string{KeyCABundle, KeyCAKey, KeyCert, KeyKey}},
		},
		"serving certificate has a third of its life left: renewed, CA kept": {
			// 30h validity, backdated 5m: renewal at t0+19h55m.
			now:  t0.Add(20 * time.Hour),
			data: func(_ *testing.T, d map[string][]byte) map[string][]byte { return d },
			want: result{Changed: true, NewCert: true, BundleSize: 1, Same: []string{KeyCABundle, KeyCAKey}},
		},
		"CA has a third of its life left: new CA first in the bundle, old one kept": {
			now: t0.Add(201 * time.Hour),
			data: func(t *testing.T, d map[string][]byte) map[string][]byte {
				// A serving certificate issued recently by the old CA.
				out, err := plan(t0.Add(199*time.Hour), d, testParams, rand.Reader)
				if err != nil {
					t.Fatal(err)
				}
				return out.data
			},
			want: result{Changed: true, NewCA: true, NewCert: true, BundleSize: 2},
		},
		"serving certificate for other DNS names (Service renamed): renewed": {
			now: t0.Add(time.Hour),
			data: func(t *testing.T, _ map[string][]byte) map[string][]byte {
				p := testParams
				p.dnsNames = []string{"old.ns.svc"}
				out, err := plan(t0, nil, p, rand.Reader)
				if err != nil {
					t.Fatal(err)
				}
				return out.data
			},
			want: result{Changed: true, NewCert: true, BundleSize: 1, Same: []string{KeyCABundle, KeyCAKey}},
		},
		"serving key does not match the certificate: renewed": {
			now: t0.Add(time.Hour),
			data: func(t *testing.T, d map[string][]byte) map[string][]byte {
				d = maps.Clone(d)
				d[KeyKey] = issued(t)[KeyKey]
				return d
			},
			want: result{Changed: true, NewCert: true, BundleSize: 1, Same: []string{KeyCABundle, KeyCAKey}},
		},
		"serving certificate signed by another CA: renewed": {
			now: t0.Add(time.Hour),
			data: func(t *testing.T, d map[string][]byte) map[string][]byte {
				other := issued(t)
				d = maps.Clone(d)
				d[KeyCert], d[KeyKey] = other[KeyCert], other[KeyKey]
				return d
			},
			want: result{Changed: true, NewCert: true, BundleSize: 1, Same: []string{KeyCABundle, KeyCAKey}},
		},
		"garbage: everything issued again": {
			now: t0,
			data: func(*testing.T, map[string][]byte) map[string][]byte {
				return map[string][]byte{KeyCABundle: []byte("x"), KeyCAKey: []byte("y"), KeyCert: []byte("z"), KeyKey: []byte("w"), "other": []byte("kept")}
			},
			want: result{Changed: true, NewCA: true, NewCert: true, BundleSize: 1, Same: []string{"other"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := tc.data(t, issued(t))
			out, err := plan(tc.now, in, testParams, rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			got := result{Changed: out.changed, NewCA: out.newCA, NewCert: out.newCert, BundleSize: len(parseCerts(out.data[KeyCABundle]))}
			for _, k := range []string{KeyCABundle, KeyCAKey, KeyCert, KeyKey, "other"} {
				if in[k] != nil && bytes.Equal(in[k], out.data[k]) {
					got.Same = append(got.Same, k)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan (-want,+got):\n%s", diff)
			}
			if !bytes.Equal(out.bundle, out.data[KeyCABundle]) {
				t.Error("outcome bundle differs from the Secret's ca.crt")
			}
			if !verifies(t, out.data, out.bundle, tc.now) {
				t.Error("serving certificate is not trusted by the CA bundle")
			}
			// Whatever plan wrote, a second pass at the same time finds
			// nothing due.
			again, err := plan(tc.now, out.data, testParams, rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			if again.changed {
				t.Error("second pass changed the Secret again")
			}
			if !again.next.After(tc.now) {
				t.Errorf("next check %v is not after now %v", again.next, tc.now)
			}
		})
	}
}

// TestPlanCARollover follows a CA through its life: during the rollover the
// bundle trusts both the new serving certificate and one still served by a
// replica that has not reloaded; the old CA leaves the bundle once expired.
func TestPlanCARollover(t *testing.T) {
	first, err := plan(t0, nil, testParams, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	// Renewed serving certificates until the CA is due (at 200h - 5m).
	data, now := first.data, t0
	for now.Before(t0.Add(195 * time.Hour)) {
		out, err := plan(now, data, testParams, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if out.newCA {
			t.Fatalf("new CA at %v, before it was due", now.Sub(t0))
		}
		data, now = out.data, out.next
	}
	oldServing := maps.Clone(data)

	now = t0.Add(201 * time.Hour)
	rolled, err := plan(now, data, testParams, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if !rolled.newCA {
		t.Fatal("CA not renewed with a third of its life left")
	}
	if !verifies(t, rolled.data, rolled.bundle, now) || !verifies(t, oldServing, rolled.bundle, now) {
		t.Error("during the rollover the bundle must trust both the new and the old serving certificate")
	}
	oldCAExpiry := parseCerts(first.bundle)[0].NotAfter
	// Follow the passes: the old CA stays in the bundle until it expires,
	// then leaves, and a pass is due right at its expiry.
	data, now = rolled.data, rolled.next
	for len(parseCerts(data[KeyCABundle])) == 2 {
		if now.After(oldCAExpiry) {
			t.Fatalf("pass at %v, after the old CA expired at %v, with the old CA still in the bundle", now, oldCAExpiry)
		}
		out, err := plan(now, data, testParams, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if out.newCA {
			t.Fatalf("another new CA at %v", now.Sub(t0))
		}
		if len(parseCerts(out.bundle)) == 1 && now.Before(oldCAExpiry) {
			t.Fatalf("old CA left the bundle at %v, before it expired at %v", now, oldCAExpiry)
		}
		data, now = out.data, out.next
	}
	if verifies(t, oldServing, data[KeyCABundle], oldCAExpiry.Add(-time.Minute)) {
		t.Error("the old CA's serving certificate is still trusted after the old CA left the bundle")
	}
}

func TestPlanRefusesEmptyParams(t *testing.T) {
	if _, err := plan(t0, nil, params{}, rand.Reader); err == nil {
		t.Error("plan without DNS names or validities: want an error")
	}
}
