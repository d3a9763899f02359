package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/wire"
)

func TestParseTTL(t *testing.T) {
	for _, tc := range []struct {
		in    string
		d     time.Duration
		never bool
		bad   bool
	}{
		{in: "5", d: 5 * time.Second},
		{in: "90s", d: 90 * time.Second},
		{in: "1h30m", d: 90 * time.Minute},
		{in: "250ms", d: 250 * time.Millisecond},
		{in: "never", never: true},
		{in: "NEVER", never: true},
		{in: "0", bad: true},
		{in: "-5", bad: true},
		{in: "0s", bad: true},
		{in: "-1m", bad: true},
		{in: "", bad: true},
		{in: "soon", bad: true},
		{in: "3153600001", bad: true}, // past 100 years of seconds
		{in: "900000h", bad: true},
	} {
		d, never, err := parseTTL([]byte(tc.in))
		if tc.bad {
			if err == nil {
				t.Errorf("%q: no error", tc.in)
			}
			continue
		}
		if err != nil || d != tc.d || never != tc.never {
			t.Errorf("%q: %v %v %v, want %v %v", tc.in, d, never, err, tc.d, tc.never)
		}
	}
}

func publishTTL(t *testing.T, tp *Topic, data, ttl string) {
	t.Helper()
	m := Message{Subject: string(tp.Name()), Data: []byte(data)}
	if ttl != "" {
		m.Header = wire.AppendHeader(nil, wire.HeaderTTL, ttl)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := tp.Publish(ctx, m); err != nil {
		t.Fatalf("publish %s (Nats-TTL %q): %v", data, ttl, err)
	}
}

func sorted(ds []Delivery) []string {
	s := datas(ds)
	sort.Strings(s)
	return s
}

// TestMessageTTL: a message is handed out only before its deadline (the
// topic's message_ttl_ms, or its own Nats-TTL, "never" overriding the
// default); past it a group with on_expiry drop settles it undelivered and
// one with dead_letter sends it to its dead-letter topic with
// Fibril-Reason: expired; a redelivery past the deadline expires too; and
// what expired stays settled across a restart.
func TestMessageTTL(t *testing.T) {
	clk := newFakeClock()
	e := newEnv(t, clk)
	tp := e.topic("q", TopicConfig{MessageTTLMs: 1000, AllowMsgTTL: true})
	drop := e.group(tp, "drop", GroupConfig{})
	dl := e.group(tp, "dl", GroupConfig{OnExpiry: wire.ExpiryDeadLetter})
	if dl.Config().OnExpiry != wire.ExpiryDeadLetter || drop.Config().OnExpiry != "" {
		t.Fatalf("on_expiry stored as %q and %q", dl.Config().OnExpiry, drop.Config().OnExpiry)
	}
	publishTTL(t, tp, "default", "")    // 1 s
	publishTTL(t, tp, "five", "5")      // 5 s
	publishTTL(t, tp, "never", "never") // no TTL
	publishTTL(t, tp, "short", "500ms")
	clk.Advance(1500 * time.Millisecond)
	want := []string{"five", "never"}
	for _, g := range []*Group{drop, dl} {
		if got := sorted(e.pollNow(g, 10, 0)); !slices.Equal(got, want) {
			t.Fatalf("group %s after 1.5 s: %v, want %v", g.Name(), got, want)
		}
	}
	dlq, ok := e.b.Topic(TopicName(DeadLetterTopic("q", "dl")))
	if !ok {
		t.Fatal("no dead-letter topic")
	}
	reader := e.group(dlq, "r", GroupConfig{})
	var dead []Delivery
	waitFor(t, "the expired dead letters", func() bool {
		dead = append(dead, e.pollNow(reader, 10, 0)...)
		return len(dead) >= 2
	})
	if got := sorted(dead); !slices.Equal(got, []string{"default", "short"}) {
		t.Fatalf("dead letters %v", got)
	}
	for _, d := range dead {
		if r, _ := wire.HeaderValue(d.Header, "Fibril-Reason"); string(r) != "expired" {
			t.Fatalf("dead letter %s: Fibril-Reason %q", d.Data, r)
		}
	}
	if in := drop.Info(); in.DeadLettered != 0 {
		t.Fatalf("the drop group dead-lettered %d", in.DeadLettered)
	}

	// A redelivery past the deadline expires: five is nacked and comes
	// back only after its 5 s.
	e.restart() // leases end: five and never are ready again
	tp, _ = e.b.Topic("q")
	drop, _ = tp.FindGroup("drop")
	if got := sorted(e.pollNow(drop, 10, 0)); !slices.Equal(got, want) {
		t.Fatalf("after the restart: %v, want %v (what expired stays settled)", got, want)
	}
	clk.Advance(4 * time.Second)
	e.restart()
	tp, _ = e.b.Topic("q")
	drop, _ = tp.FindGroup("drop")
	if got := datas(e.pollNow(drop, 10, 0)); !slices.Equal(got, []string{"never"}) {
		t.Fatalf("after 5.5 s: %v, want only never", got)
	}
}

// TestMessageTTLInvalid: a Nats-TTL header that is not a TTL, or on a
// topic without allow_msg_ttl, fails the publish (nothing is stored);
// message_ttl_ms and on_expiry out of range are ErrInvalid.
func TestMessageTTLInvalid(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("q", TopicConfig{AllowMsgTTL: true})
	pub := func(tp *Topic, v string) error {
		_, err := tp.Publish(context.Background(), Message{Subject: string(tp.Name()), Header: wire.AppendHeader(nil, wire.HeaderTTL, v), Data: []byte("x")})
		return err
	}
	for _, v := range []string{"0", "-1", "soon", "1e3"} {
		if err := pub(tp, v); !errors.Is(err, ErrInvalidHeader) {
			t.Errorf("Nats-TTL %q: %v, want ErrInvalidHeader", v, err)
		}
	}
	if n := tp.Info().Messages; n != 0 {
		t.Fatalf("%d messages stored", n)
	}
	plain := e.topic("plain", TopicConfig{})
	if err := pub(plain, "5"); !errors.Is(err, ErrInvalidHeader) {
		t.Errorf("Nats-TTL on a topic without allow_msg_ttl: %v, want ErrInvalidHeader", err)
	}
	for _, ms := range []int64{-1, wire.MaxTTLMs + 1} {
		if _, err := e.b.CreateTopic(TopicName(fmt.Sprint("t", ms)), TopicConfig{MessageTTLMs: ms}); !errors.Is(err, ErrInvalid) {
			t.Errorf("message_ttl_ms %d: %v, want ErrInvalid", ms, err)
		}
	}
	if _, err := tp.Group("g", GroupConfig{OnExpiry: "keep"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("on_expiry keep: %v, want ErrInvalid", err)
	}
}

// TestMessageTTLBacklog: thousands of expired messages ahead of a live
// one are settled over several rounds (at most filterScan a call), and a
// poll still gets the live one without any other wake-up (durability
// none: no fsync completion wakes the actor).
func TestMessageTTLBacklog(t *testing.T) {
	clk := newFakeClock()
	e := newEnv(t, clk)
	tp := e.topic("q", TopicConfig{Durability: DurabilityNone, MessageTTLMs: 1000})
	g := e.group(tp, "g", GroupConfig{})
	for i := range 3*filterScan + 10 {
		publishTTL(t, tp, fmt.Sprint(i), "")
	}
	clk.Advance(2 * time.Second)
	publishTTL(t, tp, "live", "")
	if got := datas(e.poll(g, 10)); !slices.Equal(got, []string{"live"}) {
		t.Fatalf("got %v", got)
	}
}

// TestExpiredDeadLetterReplay: an offset dead-lettered undelivered because
// its TTL ran out is, after a replay of the events (a crash before its
// copy was durable), still due to its dead-letter topic and never handed
// out: the replayed dead-letter event moves the group past it.
func TestExpiredDeadLetterReplay(t *testing.T) {
	var ev evSink
	g := newGroupState(1, int64(time.Second), 5, 1)
	g.ev = &ev
	s, ok := g.take(3)
	if !ok || s != 1 {
		t.Fatalf("take: %d %v", s, ok)
	}
	g.expired(s, true)
	if s, ok := g.take(3); !ok || s != 2 {
		t.Fatalf("take after the expiry: %d %v, want 2", s, ok)
	}
	r := g.fresh(1)
	if err := decodeEvents(ev.b, func(e event) { r.apply(e.kind, e.seq, e.arg) }); err != nil {
		t.Fatal(err)
	}
	r.restored(0)
	if len(r.dlq) != 1 || r.dlq[0].seq != 1 || r.dlq[0].reason != reasonExpired {
		t.Fatalf("dead letters due after replay: %+v", r.dlq)
	}
	if s, ok := r.take(3); !ok || s != 2 {
		t.Fatalf("take after replay: %d %v, want 2 (1 is being dead-lettered)", s, ok)
	}
}
