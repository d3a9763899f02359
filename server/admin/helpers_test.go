package admin

import (
	"context"
	"encoding/json"

	"io"
	"net/http"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/fibrilmq/fibril/server/access"
	"github.com/fibrilmq/fibril/server/broker"
)

// openBroker opens a real engine in a temp dir, closed when the test ends.
func openBroker(t *testing.T) *broker.Broker {
	t.Helper()
	o := broker.DefaultOptions()
	o.SegmentSize = 1 << 20
	o.EventSegmentSize = 1 << 20
	o.Logf = t.Logf
	b, err := broker.Open(t.TempDir(), o)
	if err != nil {
		t.Fatalf("broker.Open: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("broker.Close: %v", err)
		}
	})
	return b
}

// startAdmin serves an admin listener on 127.0.0.1:0 until the test ends.
func startAdmin(t *testing.T, o Options) *Server {
	t.Helper()
	o.Addr = "127.0.0.1:0"
	s, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return in 10s")
		}
	})
	return s
}

func staticBroker(b *broker.Broker) func() *broker.Broker {
	return func() *broker.Broker { return b }
}

// get fetches url with optional extra headers and returns status and body.
func get(t *testing.T, url string, hdr ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	c := &http.Client{Timeout: 10 * time.Second}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("GET %s: read: %v", url, err)
	}
	return res.StatusCode, body
}

// getJSON fetches url, requires 200 and decodes the body into v.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	code, body := get(t, url)
	if code != http.StatusOK {
		t.Fatalf("GET %s: status %d: %s", url, code, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: decode: %v: %s", url, err, body)
	}
}

// waitFor polls cond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// publish stores n messages in topic through the engine.
func publish(t *testing.T, tp *broker.Topic, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range n {
		if _, err := tp.Publish(ctx, broker.Message{Subject: string(tp.Name()), Data: []byte{byte(i)}}); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
}

// bcryptChecker is a PasswordChecker for the tests: bcrypt inline (the
// server's own goes through its check queue), by user name; user "busy"
// answers ErrBusy.
type bcryptChecker map[string]struct {
	hash []byte
	id   *access.Identity
}

func (b bcryptChecker) CheckPassword(_ context.Context, user, pass, _ string) (*access.Identity, error) {
	if user == "busy" {
		return nil, ErrBusy
	}
	u, ok := b[user]
	if !ok || bcrypt.CompareHashAndPassword(u.hash, []byte(pass)) != nil {
		return nil, ErrBadCredentials
	}
	return u.id, nil
}
