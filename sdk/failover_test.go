package fibril_test

// Several servers and failover (SPEC.md 11.1) against real `fibril serve`
// processes on loopback.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/conformance/fibrilproc"
	fibril "github.com/fibrilmq/fibril/sdk"
)

// deadAddr returns a loopback address nothing listens on (a port that was
// just free).
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// logRecorder is a slog.Handler keeping each record's message and "addr".
type logRecorder struct {
	mu   sync.Mutex
	recs []logRec
}

type logRec struct{ msg, addr string }

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logRecorder) WithGroup(string) slog.Handler            { return h }
func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	rec := logRec{msg: r.Message}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "addr" {
			rec.addr = a.Value.String()
		}
		return true
	})
	h.mu.Lock()
	h.recs = append(h.recs, rec)
	h.mu.Unlock()
	return nil
}

// addrs returns the "addr" of every record with message msg, in order.
func (h *logRecorder) addrs(msg string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var a []string
	for _, r := range h.recs {
		if r.msg == msg {
			a = append(a, r.addr)
		}
	}
	return a
}

// TestConnectSkipsDeadServer: Connect with a list whose first address is
// dead connects to the second; with every address dead it fails with
// ErrNoServers and names each address tried.
func TestConnectSkipsDeadServer(t *testing.T) {
	ctx := testCtx(t)
	srv := startServer(t)
	dead := deadAddr(t)
	logs := &logRecorder{}
	c := connect(t, "fibril://"+dead+",fibril://"+srv.Addr, fibril.WithLogger(slog.New(logs)))
	if got := c.Servers(); !slices.Equal(got, []string{dead, srv.Addr}) {
		t.Fatalf("Servers() = %v, want [%s %s]", got, dead, srv.Addr)
	}
	if got := logs.addrs("fibril: connect failed"); !slices.Equal(got, []string{dead}) {
		t.Fatalf("connect failures logged for %v, want the dead address %s first", got, dead)
	}
	if _, err := c.Publish(ctx, "_INBOX.x", []byte("x")); err != nil {
		t.Fatal(err)
	}

	// WithServers adds to the list
	c2 := connect(t, "fibril://"+dead, fibril.WithServers("nats://"+srv.Addr))
	if err := c2.Flush(ctx); err != nil {
		t.Fatal(err)
	}

	dead2 := deadAddr(t)
	_, err := fibril.Connect(ctx, dead+","+dead2)
	if !errors.Is(err, fibril.ErrNoServers) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Connect to dead servers: %v, want ErrNoServers wrapping ECONNREFUSED", err)
	}
	if !strings.Contains(err.Error(), dead) || !strings.Contains(err.Error(), dead2) {
		t.Fatalf("error %q does not name both addresses", err)
	}
	if _, err := fibril.Connect(ctx, dead+",,"+dead2); !errors.Is(err, fibril.ErrInvalidArgument) {
		t.Fatalf("empty list entry: %v, want ErrInvalidArgument", err)
	}
}

// TestFailoverToSecondServerLosesNothing: two independent servers hold the
// same topic; a stream of publishes with confirms goes to the first, which
// is killed mid-stream. The Conn moves to the second, every publish ends
// confirmed, and after the first is restarted every confirmed payload is in
// the union of the two topics (none lost; some may be stored twice).
func TestFailoverToSecondServerLosesNothing(t *testing.T) {
	ctx := testCtx(t)
	a, b := startServer(t), startServer(t)
	topic := topicName(t)
	for _, s := range []*fibrilproc.Server{a, b} {
		d := connect(t, "fibril://"+s.Addr)
		mustTopic(t, d, topic, fibril.TopicConfig{})
		if _, err := d.CreateGroup(ctx, topic, "g", fibril.GroupConfig{}); err != nil {
			t.Fatal(err)
		}
		d.Close()
	}
	logs := &logRecorder{}
	c := connect(t, a.Addr+","+b.Addr, fastReconnect, fibril.WithLogger(slog.New(logs)))

	var mu sync.Mutex
	var futs []*fibril.PubFuture
	count := func() (sent, done int) {
		mu.Lock()
		defer mu.Unlock()
		for _, f := range futs {
			select {
			case <-f.Done():
				done++
			default:
			}
		}
		return len(futs), done
	}
	stop := make(chan struct{})
	pubDone := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				pubDone <- nil
				return
			default:
			}
			f, err := c.PublishAsync(ctx, topic, []byte(fmt.Sprint(i)))
			if err != nil {
				pubDone <- err
				return
			}
			mu.Lock()
			futs = append(futs, f)
			mu.Unlock()
			if i%50 == 49 {
				time.Sleep(time.Millisecond) // let confirms interleave with publishes
			}
		}
	}()
	waitFor(t, 10*time.Second, "200 confirms from the first server", func() bool { _, d := count(); return d >= 200 })
	if err := a.Stop(true); err != nil {
		t.Fatal(err)
	}
	// the move is logged just after Reconnects counts it: wait for the log
	waitFor(t, 15*time.Second, "the move to the second server", func() bool { return len(logs.addrs("fibril: reconnected")) >= 1 })
	if got := logs.addrs("fibril: reconnected"); len(got) != 1 || got[0] != b.Addr {
		t.Fatalf("reconnected to %v, want the second server %s", got, b.Addr)
	}
	sent, _ := count()
	waitFor(t, 15*time.Second, "200 more publishes", func() bool { s, _ := count(); return s >= sent+200 })
	close(stop)
	if err := <-pubDone; err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for i, f := range futs {
		if _, err := f.Wait(ctx); err != nil {
			t.Fatalf("publish %d: %v (unconfirmed publishes must be resent to the second server)", i, err)
		}
		want[fmt.Sprint(i)] = true
	}

	a.Listen = a.Addr
	if err := fibrilproc.StartServer(ctx, a); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	perServer := map[string]int{}
	for _, s := range []*fibrilproc.Server{a, b} {
		d := connect(t, "fibril://"+s.Addr)
		for {
			msgs, err := d.Fetch(ctx, topic, "g", 1000, 200*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) == 0 {
				break
			}
			for _, m := range msgs {
				got[string(m.Data)] = true
				perServer[s.Addr]++
			}
			if err := d.AckAll(ctx, msgs...); err != nil {
				t.Fatal(err)
			}
		}
	}
	if perServer[a.Addr] == 0 || perServer[b.Addr] == 0 {
		t.Fatalf("stored per server %v: the stream did not span both servers", perServer)
	}
	for k := range want {
		if !got[k] {
			t.Fatalf("confirmed publish %s is on neither server (%d of %d found; per server %v)", k, len(got), len(want), perServer)
		}
	}
	t.Logf("%d publishes confirmed; stored per server %v", len(want), perServer)
}

// TestDiscoveryReachesAdvertisedServer: server A advertises B
// (--client-advertise), so a Conn given only A learns B from A's INFO and
// reaches it when A dies; with WithoutDiscovery the list stays [A] and the
// Conn keeps dialling A alone.
func TestDiscoveryReachesAdvertisedServer(t *testing.T) {
	for _, discover := range []bool{true, false} {
		t.Run(map[bool]string{true: "discovery", false: "WithoutDiscovery"}[discover], func(t *testing.T) {
			ctx := testCtx(t)
			b := startServer(t)
			a := startServer(t, "--client-advertise", b.Addr)
			logs := &logRecorder{}
			opts := []fibril.Option{fastReconnect, fibril.WithLogger(slog.New(logs))}
			if !discover {
				opts = append(opts, fibril.WithoutDiscovery())
			}
			c := connect(t, "fibril://"+a.Addr, opts...)
			if got := c.Info().ConnectURLs; !slices.Equal(got, []string{b.Addr}) {
				t.Fatalf("A's connect_urls %v, want [%s]", got, b.Addr)
			}
			wantList := []string{a.Addr, b.Addr}
			if !discover {
				wantList = wantList[:1]
			}
			if got := c.Servers(); !slices.Equal(got, wantList) {
				t.Fatalf("Servers() = %v, want %v", got, wantList)
			}
			if err := a.Stop(true); err != nil {
				t.Fatal(err)
			}
			if discover {
				waitFor(t, 15*time.Second, "a reconnect to B", func() bool { return c.Reconnects() >= 1 })
				direct := connect(t, "fibril://"+b.Addr)
				if got, want := c.Info().ServerID, direct.Info().ServerID; got != want {
					t.Fatalf("connected to server %q, want B %q", got, want)
				}
				if err := c.Flush(ctx); err != nil {
					t.Fatal(err)
				}
				return
			}
			waitFor(t, 15*time.Second, "three reconnect attempts", func() bool {
				return len(logs.addrs("fibril: reconnect failed")) >= 3
			})
			for _, addr := range logs.addrs("fibril: reconnect failed") {
				if addr != a.Addr {
					t.Fatalf("reconnect tried %s, want only A %s", addr, a.Addr)
				}
			}
			if c.Reconnects() != 0 || c.IsConnected() {
				t.Fatalf("reconnected (%d) without discovery: only A was given", c.Reconnects())
			}
		})
	}
}

// TestServerCredentialsPerURL: the user info of each URL is the credentials
// of that server alone, and a discovered server takes those of the server
// that advertised it (here a token both servers require).
func TestServerCredentialsPerURL(t *testing.T) {
	ctx := testCtx(t)
	b := startServer(t, "--token", "s3cret")
	a := startServer(t, "--token", "s3cret", "--client-advertise", b.Addr)

	// a's URL carries a wrong token: refused there, accepted by b with its own
	c := connect(t, "fibril://wrong@"+a.Addr+",fibril://s3cret@"+b.Addr, fibril.WithoutDiscovery())
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := fibril.Connect(ctx, "fibril://wrong@"+a.Addr+",fibril://"+b.Addr)
	if !errors.Is(err, fibril.ErrNoServers) || !errors.Is(err, fibril.ErrAuthViolation) {
		t.Fatalf("Connect with no valid credentials: %v, want ErrNoServers wrapping ErrAuthViolation", err)
	}

	// b learnt from a's INFO is dialled with the token of a's URL
	d := connect(t, "fibril://s3cret@"+a.Addr, fastReconnect)
	if got := d.Servers(); !slices.Equal(got, []string{a.Addr, b.Addr}) {
		t.Fatalf("Servers() = %v, want [%s %s]", got, a.Addr, b.Addr)
	}
	if err := a.Stop(true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 15*time.Second, "a reconnect to b with a's token", func() bool { return d.Reconnects() >= 1 })
	if err := d.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}
