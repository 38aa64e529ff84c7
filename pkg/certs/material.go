package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"slices"
	"time"
)

// Keys of the certificate Secret.
const (
	// KeyCABundle holds the CAs the API server must trust: the current CA
	// first, then earlier CAs that have not expired yet, so that replicas
	// still serving a certificate of the previous CA stay trusted while they
	// pick up the new one.
	KeyCABundle = "ca.crt"
	// KeyCAKey is the private key of the current CA.
	KeyCAKey = "ca.key"
	// KeyCert and KeyKey are the serving certificate and its key.
	KeyCert = "tls.crt"
	KeyKey  = "tls.key"
)

// clockSkew is how far into the past certificates are backdated, for API
// servers whose clock is a little behind the hub's.
const clockSkew = 5 * time.Minute

// params say what the Secret must hold.
type params struct {
	// dnsNames of the serving certificate; the first is its common name and
	// the name the API server connects to.
	dnsNames     []string
	caName       string
	caValidity   time.Duration
	certValidity time.Duration
}

// outcome is what plan decided.
type outcome struct {
	// data is the Secret data to store: the input data, with the four keys
	// above replaced when anything was due.
	data map[string][]byte
	// changed says data differs from the input.
	changed bool
	// newCA and newCert say what was issued.
	newCA, newCert bool
	// next is when plan has something to do next: renew the serving
	// certificate or the CA, or drop an expired CA from the bundle.
	next time.Time
	// bundle is data[KeyCABundle]; notAfter is the serving certificate's
	// expiry.
	bundle   []byte
	notAfter time.Time
}

// plan renews whatever is missing, invalid or due in the Secret data, and
// keeps everything else byte for byte. A CA is renewed when a third of its
// lifetime is left, the serving certificate likewise; a new CA always gets a
// new serving certificate.
func plan(now time.Time, data map[string][]byte, p params, random io.Reader) (outcome, error) {
	if len(p.dnsNames) == 0 || p.caValidity <= 0 || p.certValidity <= 0 {
		return outcome{}, errors.New("certificate parameters: DNS names and validities are required")
	}
	out := outcome{data: map[string][]byte{}}
	for k, v := range data {
		out.data[k] = v
	}

	bundle := parseCerts(data[KeyCABundle])
	caKey, _ := parseKey(data[KeyCAKey])
	var ca *x509.Certificate
	if len(bundle) > 0 && bundle[0].IsCA && caKey != nil && samePublicKey(bundle[0].PublicKey, caKey.Public()) &&
		!now.Before(bundle[0].NotBefore) && now.Before(renewAt(bundle[0])) {
		ca = bundle[0]
	}
	if ca == nil {
		var err error
		if ca, caKey, err = newCA(now, p, random); err != nil {
			return outcome{}, err
		}
		out.newCA = true
		bundle = append([]*x509.Certificate{ca}, bundle...)
	}
	// The bundle: the current CA, then every other CA that is still valid,
	// once each.
	kept := []*x509.Certificate{ca}
	for _, c := range bundle[1:] {
		if c.IsCA && now.Before(c.NotAfter) && !slices.ContainsFunc(kept, func(k *x509.Certificate) bool { return k.Equal(c) }) {
			kept = append(kept, c)
		}
	}

	leaf := validLeaf(now, data[KeyCert], data[KeyKey], ca, p.dnsNames)
	if leaf == nil || out.newCA {
		certPEM, keyPEM, err := newLeaf(now, ca, caKey, p, random)
		if err != nil {
			return outcome{}, err
		}
		out.data[KeyCert], out.data[KeyKey] = certPEM, keyPEM
		out.newCert = true
		leaf = parseCerts(certPEM)[0]
	}
	if out.newCA {
		caKeyPEM, err := encodeKey(caKey)
		if err != nil {
			return outcome{}, err
		}
		out.data[KeyCAKey] = caKeyPEM
	}
	out.data[KeyCABundle] = encodeCerts(kept)
	for _, k := range []string{KeyCABundle, KeyCAKey, KeyCert, KeyKey} {
		if !bytes.Equal(out.data[k], data[k]) {
			out.changed = true
		}
	}

	out.bundle = out.data[KeyCABundle]
	out.notAfter = leaf.NotAfter
	out.next = renewAt(leaf)
	if t := renewAt(ca); t.Before(out.next) {
		out.next = t
	}
	for _, c := range kept[1:] {
		if c.NotAfter.Before(out.next) {
			out.next = c.NotAfter
		}
	}
	return out, nil
}

// renewAt is when a third of the certificate's lifetime is left.
func renewAt(c *x509.Certificate) time.Time {
	return c.NotAfter.Add(-c.NotAfter.Sub(c.NotBefore) / 3)
}

// validLeaf returns the serving certificate when it pairs with its key, is
// signed by ca for exactly dnsNames, and is not due for renewal.
func validLeaf(now time.Time, certPEM, keyPEM []byte, ca *x509.Certificate, dnsNames []string) *x509.Certificate {
	certs := parseCerts(certPEM)
	key, _ := parseKey(keyPEM)
	if len(certs) == 0 || key == nil || !samePublicKey(certs[0].PublicKey, key.Public()) {
		return nil
	}
	leaf := certs[0]
	if !slices.Equal(leaf.DNSNames, dnsNames) || !now.Before(renewAt(leaf)) {
		return nil
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{
		DNSName:     dnsNames[0],
		Roots:       roots,
		CurrentTime: now,
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return nil
	}
	return leaf
}

func newCA(now time.Time, p params, random io.Reader) (*x509.Certificate, crypto.Signer, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), random)
	if err != nil {
		return nil, nil, fmt.Errorf("generate CA key: %w", err)
	}
	serial, err := serialNumber(random)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: p.caName},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(p.caValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(random, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("create CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("parse CA certificate: %w", err)
	}
	return ca, key, nil
}

func newLeaf(now time.Time, ca *x509.Certificate, caKey crypto.Signer, p params, random io.Reader) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), random)
	if err != nil {
		return nil, nil, fmt.Errorf("generate serving key: %w", err)
	}
	serial, err := serialNumber(random)
	if err != nil {
		return nil, nil, err
	}
	notAfter := now.Add(p.certValidity)
	if ca.NotAfter.Before(notAfter) {
		notAfter = ca.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: p.dnsNames[0]},
		DNSNames:     p.dnsNames,
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(random, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("create serving certificate: %w", err)
	}
	keyPEM, err = encodeKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

func serialNumber(random io.Reader) (*big.Int, error) {
	n, err := rand.Int(random, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("certificate serial number: %w", err)
	}
	return n, nil
}

// parseCerts returns the certificates of a PEM bundle, skipping what does
// not parse.
func parseCerts(b []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return out
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil {
			out = append(out, c)
		}
	}
}

func encodeCerts(certs []*x509.Certificate) []byte {
	var b []byte
	for _, c := range certs {
		b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	return b
}

func parseKey(b []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PRIVATE KEY" {
		return nil, errors.New("no PKCS#8 private key")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, errors.New("private key cannot sign")
	}
	return s, nil
}

func encodeKey(k crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("encode private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func samePublicKey(a, b crypto.PublicKey) bool {
	ka, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && ka.Equal(b)
}
