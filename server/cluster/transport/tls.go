package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// TLSFiles names a node's PEM files: the cluster CA's certificate, the
// node's certificate (naming the node) and its private key.
type TLSFiles struct {
	CA, Cert, Key string
}

// Credentials are a node's TLS identity and the CA it trusts.
type Credentials struct {
	cert tls.Certificate
	pool *x509.CertPool
}

// LoadCredentials reads f's files. It fails naming the file that is
// missing or holds no usable certificate or key.
func LoadCredentials(f TLSFiles) (*Credentials, error) {
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("transport: load key pair %s, %s: %w", f.Cert, f.Key, err)
	}
	ca, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, fmt.Errorf("transport: read CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("transport: %s holds no PEM certificate", f.CA)
	}
	return &Credentials{cert: cert, pool: pool}, nil
}

// server is the listener's config: a client certificate the cluster CA
// signed is required.
func (c *Credentials) server() *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{c.cert},
		ClientCAs:    c.pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
		NextProtos:   []string{raftProto, fetchProto}, // a client offering none gets a raft link
	}
}

// client is a dialler's config for the peer named name: the server's
// certificate must be the cluster CA's and name it.
func (c *Credentials) client(name string) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{c.cert},
		RootCAs:      c.pool,
		ServerName:   name,
		MinVersion:   tls.VersionTLS13,
		NextProtos:   []string{raftProto},
	}
}

var errNoPeerCert = errors.New("transport: client sent no certificate")
