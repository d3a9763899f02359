// Package certgen makes the certificates a cluster's links use: a CA of
// the cluster's own, and for each node a certificate that CA signs, valid
// as both TLS server and client, naming the node (its DNS name, which the
// transport checks) and the hosts it listens on. It is for tests and for
// trying a cluster on one machine; a deployment may bring certificates
// from its own PKI instead.
//
// It owns key generation and PEM encoding, and must never write a private
// key readable by others or reuse a key between nodes.
//
// # Caveats
//
//   - Keys are ECDSA P-256; certificates are valid from an hour ago (clock
//     skew) for the validity the caller gives. Nothing here renews or
//     revokes.
package certgen

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// CA is a certificate authority that signs node certificates.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate, PEM-encoded: what every node trusts.
	PEM []byte
}

// NewCA makes a self-signed CA named name, valid for validFor.
func NewCA(name string, validFor time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("certgen: CA key: %w", err)
	}
	tmpl, err := template(name, validFor)
	if err != nil {
		return nil, err
	}
	tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("certgen: sign CA %q: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("certgen: parse CA %q: %w", name, err)
	}
	return &CA{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// Issue makes a key and a certificate for the node named name (its common
// name and first DNS name), also valid for hosts (IP addresses or DNS
// names), for both server and client authentication. It returns both
// PEM-encoded.
func (ca *CA) Issue(name string, validFor time.Duration, hosts ...string) (certPEM, keyPEM []byte, err error) {
	if name == "" {
		return nil, nil, errors.New("certgen: a node certificate needs a name")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("certgen: key for %q: %w", name, err)
	}
	tmpl, err := template(name, validFor)
	if err != nil {
		return nil, nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	tmpl.DNSNames = []string{name}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != name {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("certgen: sign %q: %w", name, err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("certgen: encode key for %q: %w", name, err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

func template(name string, validFor time.Duration) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("certgen: serial: %w", err)
	}
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name, Organization: []string{"fibril cluster"}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(validFor),
	}, nil
}

// Paths names one node's PEM files: the CA certificate it trusts, its
// certificate and its private key.
type Paths struct {
	CA, Cert, Key string
}

// WriteCluster makes a CA and a certificate for each name (valid for
// 127.0.0.1, localhost and the name) and writes them into dir: ca.pem,
// <name>.pem and <name>-key.pem (mode 0600). It returns each node's
// paths by name.
func WriteCluster(dir string, validFor time.Duration, names ...string) (map[string]Paths, error) {
	ca, err := NewCA("fibril cluster CA", validFor)
	if err != nil {
		return nil, err
	}
	caPath := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(caPath, ca.PEM, 0o644); err != nil {
		return nil, fmt.Errorf("certgen: write %s: %w", caPath, err)
	}
	out := make(map[string]Paths, len(names))
	for _, n := range names {
		if filepath.Base(n) != n || n == "ca" {
			return nil, fmt.Errorf("certgen: node name %q cannot name a file", n)
		}
		c, k, err := ca.Issue(n, validFor, "127.0.0.1", "::1", "localhost")
		if err != nil {
			return nil, err
		}
		p := Paths{CA: caPath, Cert: filepath.Join(dir, n+".pem"), Key: filepath.Join(dir, n+"-key.pem")}
		if err := os.WriteFile(p.Cert, c, 0o644); err != nil {
			return nil, fmt.Errorf("certgen: write %s: %w", p.Cert, err)
		}
		if err := os.WriteFile(p.Key, k, 0o600); err != nil {
			return nil, fmt.Errorf("certgen: write %s: %w", p.Key, err)
		}
		out[n] = p
	}
	return out, nil
}
