package certgen

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"
	"time"
)

// TestWriteCluster: each node's files load as a TLS key pair whose
// certificate the cluster CA verifies for the node's name and for client
// authentication, another CA's does not, and keys are private to the owner.
func TestWriteCluster(t *testing.T) {
	dir := t.TempDir()
	paths, err := WriteCluster(dir, time.Hour, "n1", "n2")
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewCA("other", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range paths {
		kp, err := tls.LoadX509KeyPair(p.Cert, p.Key)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		leaf, err := x509.ParseCertificate(kp.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		caPEM, err := os.ReadFile(p.CA)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			pem  []byte
			want bool
		}{{caPEM, true}, {other.PEM, false}} {
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(c.pem)
			_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
			if (err == nil) != c.want {
				t.Fatalf("%s: verify against the %v CA: %v", name, c.want, err)
			}
		}
		if leaf.VerifyHostname("127.0.0.1") != nil {
			t.Fatalf("%s: not valid for 127.0.0.1", name)
		}
		fi, err := os.Stat(p.Key)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			t.Fatalf("%s: key file mode %v", name, fi.Mode())
		}
	}
	if _, err := WriteCluster(dir, time.Hour, "../x"); err == nil {
		t.Fatal("a name with a path separator was accepted")
	}
}
