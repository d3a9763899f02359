package fibril_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/conformance/fibrilproc"
	fibril "github.com/fibrilmq/fibril/sdk"
	"golang.org/x/crypto/bcrypt"
)

// selfSigned writes a certificate for 127.0.0.1 and its key into dir and
// returns a pool that trusts it.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "fibril-test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestTLSAndToken(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := fibrilproc.Start(ctx, serverBin, filepath.Join(dir, "data"),
		"--tls-listen", "127.0.0.1:0", "--tls-cert", certFile, "--tls-key", keyFile, "--token", "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Stop(false) })
	if srv.TLSAddr == "" {
		t.Fatal("no tls_addr in the ready line")
	}

	c := connect(t, "tls://"+srv.TLSAddr, fibril.WithTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}), fibril.WithToken("s3cret"))
	topic := mustTopic(t, c, topicName(t), fibril.TopicConfig{})
	if _, err := c.Publish(ctx, topic, []byte("over tls")); err != nil {
		t.Fatal(err)
	}
	if m := fetchOne(t, c, topic, "g", time.Second); string(m.Data) != "over tls" {
		t.Fatalf("got %q", m.Data)
	}

	// wrong token: refused with the auth code, fatal
	_, err = fibril.Connect(ctx, "fibril://"+srv.Addr, fibril.WithToken("wrong"))
	if !errors.Is(err, fibril.ErrAuthViolation) {
		t.Fatalf("wrong token: %v, want ErrAuthViolation", err)
	}
	// a certificate the client does not trust
	_, err = fibril.Connect(ctx, "tls://"+srv.TLSAddr, fibril.WithToken("s3cret"))
	if err == nil {
		t.Fatal("untrusted certificate accepted")
	}
	// the token in the URL works as well
	u := connect(t, "fibril://s3cret@"+srv.Addr)
	if _, err := u.Publish(ctx, "_INBOX.x", nil); err != nil {
		t.Fatal(err)
	}
}

func TestUserPasswordAndPermissions(t *testing.T) {
	dir := t.TempDir()
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{"users": []map[string]any{{
		"name": "app", "password_bcrypt": string(hash),
		"permissions": map[string]any{"publish": map[string]any{"allow": []string{"orders.>", "_INBOX.>"}}},
	}}}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "fibril.json")
	if err := os.WriteFile(conf, b, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, "--config", conf)
	ctx := testCtx(t)

	if _, err := fibril.Connect(ctx, "fibril://"+srv.Addr, fibril.WithUserPassword("app", "wrong")); !errors.Is(err, fibril.ErrAuthViolation) {
		t.Fatalf("wrong password: %v, want ErrAuthViolation", err)
	}
	c := connect(t, "fibril://"+srv.Addr, fibril.WithUserPassword("app", "pw"))
	if _, err := c.Publish(ctx, "orders.eu", []byte("ok")); err != nil {
		t.Fatal(err)
	}
	_, err = c.Publish(ctx, "payroll.eu", []byte("no"))
	if !errors.Is(err, fibril.ErrPermissionDenied) {
		t.Fatalf("publish outside the allowed subjects: %v, want ErrPermissionDenied", err)
	}
	// not fatal: the connection goes on
	if _, err := c.Publish(ctx, "orders.us", []byte("ok")); err != nil {
		t.Fatal(err)
	}
	// user and password in the URL
	u := connect(t, "fibril://app:pw@"+srv.Addr)
	if _, err := u.Publish(ctx, "_INBOX.x", nil); err != nil {
		t.Fatal(err)
	}
}

// TestReconnectGivesUpOnRefusedLogin restarts the server on the same address
// with a rotated token: the Conn's first reconnect is refused, and the Conn
// must close with the typed error instead of dialling forever (a publish
// waiting for the reconnect would otherwise run into its context deadline).
func TestReconnectGivesUpOnRefusedLogin(t *testing.T) {
	srv := startServer(t, "--token", "s3cret")
	ctx := testCtx(t)
	c := connect(t, "fibril://"+srv.Addr, fibril.WithToken("s3cret"),
		fibril.WithReconnect(fibril.ReconnectPolicy{InitialDelay: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond, Multiplier: 2, BufferBytes: 1 << 20}))
	if _, err := c.Publish(ctx, "_INBOX.before", nil); err != nil {
		t.Fatal(err)
	}
	srv.Args = []string{"--token", "rotated"}
	if err := srv.Restart(ctx, true); err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := c.Publish(pctx, "_INBOX.after", nil)
	if !errors.Is(err, fibril.ErrAuthViolation) || !errors.Is(err, fibril.ErrClosed) {
		t.Fatalf("publish after a refused reconnect: %v, want ErrClosed wrapping ErrAuthViolation", err)
	}
}

// TestAckAfterReconnectSettlesOwnLease: a lease binds to the user, not to
// the connection (SPEC.md 6.1), so a message fetched before the link went
// silent is acked over the reconnected link, while the server still keeps
// the old connection (and its lease) open; another user may not settle it.
func TestAckAfterReconnectSettlesOwnLease(t *testing.T) {
	dir := t.TempDir()
	hash, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]any{"allow": []string{"jobs", "_INBOX.>"}}
	users := []map[string]any{
		{"name": "app", "password_bcrypt": string(hash), "permissions": map[string]any{"publish": all, "consume": all}},
		{"name": "other", "password_bcrypt": string(hash), "permissions": map[string]any{"publish": all, "consume": all}},
	}
	b, err := json.Marshal(map[string]any{"users": users})
	if err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(dir, "fibril.json")
	if err := os.WriteFile(conf, b, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, "--config", conf)
	ctx := testCtx(t)
	addr, freeze := freezingProxy(t, srv.Addr)
	c := connect(t, "fibril://"+addr, fibril.WithUserPassword("app", "pw"), fibril.WithHeartbeat(50*time.Millisecond, 2), fastReconnect)
	mustTopic(t, c, "jobs", fibril.TopicConfig{})
	if _, err := c.Publish(ctx, "jobs", []byte("work")); err != nil {
		t.Fatal(err)
	}
	m := fetchOne(t, c, "jobs", "g", time.Second)
	freeze()
	// A publish completes once the client has noticed and reconnected.
	if _, err := c.Publish(ctx, "jobs", []byte("after")); err != nil {
		t.Fatal(err)
	}
	// The other user's connection sees the handle as someone else's.
	o := connect(t, "fibril://"+srv.Addr, fibril.WithUserPassword("other", "pw"))
	if msgs, err := o.Fetch(ctx, "jobs", "g", 2, 200*time.Millisecond); err != nil || len(msgs) != 1 || string(msgs[0].Data) != "after" {
		t.Fatalf("other user's fetch: %v %v", msgs, err)
	}
	if _, err := o.Publish(ctx, m.Handle(), []byte("+ACK")); !errors.Is(err, fibril.ErrPermissionDenied) {
		t.Fatalf("another user settling the handle by publishing to it: %v, want ErrPermissionDenied", err)
	}
	if err := m.Ack(ctx); err != nil {
		t.Fatalf("ack over the reconnected link: %v", err)
	}
}
