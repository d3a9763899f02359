package stocknats

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

const wait = 5 * time.Second // far longer than any answer may take

func TestStockPubSubWildcards(t *testing.T) {
	both(t, func(t *testing.T, tg target) {
		nc := connect(t, tg)
		star, _ := nc.SubscribeSync("w.*")
		gt, _ := nc.SubscribeSync("w.>")
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"w.a", "w.a.b", "x.a"} {
			if err := nc.Publish(s, []byte(s)); err != nil {
				t.Fatal(err)
			}
		}
		if m, err := star.NextMsg(wait); err != nil || m.Subject != "w.a" {
			t.Fatalf("w.*: %v %v", m, err)
		}
		for _, want := range []string{"w.a", "w.a.b"} {
			if m, err := gt.NextMsg(wait); err != nil || m.Subject != want {
				t.Fatalf("w.>: %v %v, want %s", m, err, want)
			}
		}
		if m, err := star.NextMsg(50 * time.Millisecond); err == nil {
			t.Fatalf("w.* got extra %q", m.Subject)
		}
	})
}

func TestStockQueueGroup(t *testing.T) {
	both(t, func(t *testing.T, tg target) {
		var total atomic.Int64
		var members [3]atomic.Int64
		for i := range members {
			nc := connect(t, tg)
			if _, err := nc.QueueSubscribe("q.jobs", "workers", func(*nats.Msg) { members[i].Add(1); total.Add(1) }); err != nil {
				t.Fatal(err)
			}
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		pub := connect(t, tg)
		const n = 300
		for i := range n {
			if err := pub.Publish("q.jobs", []byte(fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
		waitFor(t, "every queued message once", func() bool { return total.Load() == n })
		for i := range members {
			if members[i].Load() == 0 {
				t.Fatalf("member %d got nothing of %d", i, n)
			}
		}
	})
}

func TestStockRequestReplyAndNoResponders(t *testing.T) {
	both(t, func(t *testing.T, tg target) {
		nc := connect(t, tg)
		if _, err := nc.Subscribe("svc.echo", func(m *nats.Msg) { _ = m.Respond(append([]byte("re:"), m.Data...)) }); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		if r, err := nc.Request("svc.echo", []byte("x"), wait); err != nil || string(r.Data) != "re:x" {
			t.Fatalf("request: %v %v", r, err)
		}
		if _, err := nc.Request("svc.nobody", nil, wait); !errors.Is(err, nats.ErrNoResponders) {
			t.Fatalf("request to nobody: %v, want ErrNoResponders", err)
		}
	})
}

func TestStockHeaders(t *testing.T) {
	both(t, func(t *testing.T, tg target) {
		nc := connect(t, tg)
		sub, _ := nc.SubscribeSync("h.x")
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		m := nats.NewMsg("h.x")
		m.Header.Set("X-Trace", "abc")
		m.Data = []byte("body")
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
		got, err := sub.NextMsg(wait)
		if err != nil || got.Header.Get("X-Trace") != "abc" || string(got.Data) != "body" {
			t.Fatalf("header round trip: %v %v", got, err)
		}
		// An empty header block (nats.js sends `HPUB s 0 n` for an empty
		// header set) is a message without headers.
		raw := dialRaw(t, tg, `{"headers":true,"verbose":false}`)
		raw.send("HPUB h.x 0 4\r\nabcd\r\nPING\r\n")
		raw.expect("PONG")
		if got, err := sub.NextMsg(wait); err != nil || string(got.Data) != "abcd" {
			t.Fatalf("empty header block: %v %v", got, err)
		}
	})
}

func TestStockDrainAndMaxPayload(t *testing.T) {
	both(t, func(t *testing.T, tg target) {
		nc := connect(t, tg)
		var got atomic.Int64
		sub, err := nc.Subscribe("d.x", func(*nats.Msg) { got.Add(1) })
		if err != nil {
			t.Fatal(err)
		}
		pub := connect(t, tg)
		for range 100 {
			_ = pub.Publish("d.x", []byte("x"))
		}
		if err := pub.Flush(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "deliveries before drain", func() bool { return got.Load() == 100 })
		if err := sub.Drain(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "subscription drained", func() bool { return !sub.IsValid() })
		big := make([]byte, nc.MaxPayload()+1)
		if err := nc.Publish("d.big", big); !errors.Is(err, nats.ErrMaxPayload) {
			t.Fatalf("over max_payload: %v", err)
		}
		if err := nc.Drain(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestStockMultiSubjectFloodStoresNothing: `nats bench pub
// --multisubject` over 1,000 subjects used to create 1,000 durable topics
// (2 GB on disk); no topic captures them, so nothing is stored.
func TestStockMultiSubjectFloodStoresNothing(t *testing.T) {
	p, tg := startFibril(t)
	nc := connect(t, tg)
	for i := range 20_000 {
		if err := nc.Publish(fmt.Sprintf("bench.%d", i%1000), []byte("0123456789abcdef")); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := tg.raw(t, "TOPIC LIST"); got[0] != `+OK {"topics":[]}` {
		t.Fatalf("topics after the flood: %v", got)
	}
	if n := dirSize(t, p.DataDir); n > 16<<20 {
		t.Fatalf("data dir holds %d bytes after a flood nothing captured", n)
	}
}

// TestStockFastPublisherNotCut: a plain loop publishing 1 KiB messages to
// a captured subject is never disconnected, and every message is stored.
// FIBRIL_LONG=1 sends 500k (the case); the short form 30k.
func TestStockFastPublisherNotCut(t *testing.T) {
	n := 30_000
	if os.Getenv("FIBRIL_LONG") == "1" {
		n = 500_000
	}
	_, tg := startFibril(t, "--max-input-buffer", "2097152")
	if got := tg.raw(t, `TOPIC CREATE fast {"durability":"none"}`); !strings.HasPrefix(got[0], "+OK {") {
		t.Fatalf("create: %v", got)
	}
	var cut atomic.Value
	nc := connect(t, tg, nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { cut.Store(fmt.Sprint(err)) }))
	payload := make([]byte, 1024)
	for i := range n {
		if err := nc.Publish("fast", payload); err != nil {
			t.Fatalf("publish %d: %v (%v)", i, err, cut.Load())
		}
	}
	if err := nc.FlushTimeout(5 * time.Minute); err != nil || cut.Load() != nil {
		t.Fatalf("flush: %v (%v)", err, cut.Load())
	}
	want := fmt.Sprintf(`"msgs":%d,`, n)
	waitFor(t, "every message stored", func() bool { return strings.Contains(tg.raw(t, "TOPIC INFO fast")[0], want) })
}
