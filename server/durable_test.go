package server

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/fibrilmq/fibril/internal/memstore"
)

// startDurable runs a server with the durable engine on in-memory stores.
func startDurable(t *testing.T, mutate func(*Options)) *Server {
	t.Helper()
	ms := memstore.New()
	return startServer(t, func(o *Options) {
		o.NoBroker = false
		o.Engine.OpenStore = ms.Open
		if mutate != nil {
			mutate(o)
		}
	})
}

// fibril dials s and says CONNECT {"fibril":1}.
func fibrilConn(t *testing.T, s *Server, extra string) *wireConn {
	t.Helper()
	w := dialInfo(t, s)
	w.send(`CONNECT {"fibril":1` + extra + "}\r\n")
	w.expect(`^\+OK$`)
	return w
}

var handleRe = regexp.MustCompile(`\$F\.\d+\.\d+\.\d+\.\d+\.\d+`)

// expectDelivery reads one MSG/HMSG line matching re and its body, and
// returns the ack handle.
func (w *wireConn) expectDelivery(re, body string) string {
	w.t.Helper()
	l := w.expect(re)
	w.expectBody(body)
	h := handleRe.FindString(l)
	if h == "" {
		w.t.Fatalf("no handle in %q", l)
	}
	return h
}

func TestDurablePublishPollAck(t *testing.T) {
	s := startDurable(t, nil)
	w := fibrilConn(t, s, "")
	w.send("TOPIC CREATE orders {\"partitions\":1}\r\n")
	w.expect(`^\+OK \{.*"name":"orders".*\}$`)
	w.send("PUB orders 5\r\nhello\r\nPUB orders 5\r\nworld\r\n")
	w.expect(`^\+OK 0:1$`)
	w.expect(`^\+OK 0:2$`)
	w.send("POLL orders g 10\r\n")
	h1 := w.expectDelivery(`^MSG orders 0 \$F\.\d+\.\d+\.0\.1\.1 5$`, "hello")
	h2 := w.expectDelivery(`^MSG orders 0 \$F\.\d+\.\d+\.0\.2\.1 5$`, "world")
	w.expect(`^\+OK 2$`)
	w.send("ACK " + h1 + " " + h2 + "\r\nACK " + h1 + "\r\nPOLL orders g 10\r\n")
	w.expect(`^\+OK$`)
	w.expect(`^\+OK$`) // idempotent
	w.expect(`^\+OK 0$`)
	w.send("TOPIC INFO orders\r\nGROUP LIST orders\r\nTOPIC INFO nope\r\n")
	w.expect(`^\+OK \{"name":"orders".*"groups":\["g"\]\}$`)
	w.expect(`^\+OK \{"topic":"orders","groups":\["g"\]\}$`)
	w.expect(`^-ERR 'unknown_topic `)
}

func TestDurableNackRedeliversAndRejectDeadLetters(t *testing.T) {
	s := startDurable(t, nil)
	w := fibrilConn(t, s, "")
	w.send("TOPIC CREATE jobs\r\n")
	w.expect(`^\+OK `)
	w.send("PUB jobs 3\r\njob\r\n")
	w.expect(`^\+OK 0:1$`)
	w.send("POLL jobs g 1\r\n")
	h := w.expectDelivery(`^MSG jobs 0 \S+\.1 3$`, "job")
	w.expect(`^\+OK 1$`)
	w.send("NACK " + h + "\r\nPOLL jobs g 1 2000\r\n")
	w.expect(`^\+OK$`)
	h2 := w.expectDelivery(`^MSG jobs 0 \S+\.2 3$`, "job") // attempt 2
	w.expect(`^\+OK 1$`)
	w.send("ACK " + h + "\r\n")
	w.expect(`^-ERR 'stale_handle `)
	w.send("REJECT " + h2 + "\r\nPOLL $DLQ.jobs.g d 1 2000\r\n")
	w.expect(`^\+OK$`)
	l := w.expect(`^HMSG \$DLQ\.jobs\.g 0 \S+ \d+ \d+$`)
	var hdr, total int
	fmt.Sscanf(l[strings.LastIndex(l[:strings.LastIndexByte(l, ' ')], " ")+1:], "%d %d", &hdr, &total)
	body := make([]byte, total+2)
	if _, err := w.r.Read(body[:0]); err != nil {
		t.Fatal(err)
	}
	got := ""
	for len(got) < total+2 {
		b, err := w.r.ReadByte()
		if err != nil {
			t.Fatal(err)
		}
		got += string(b)
	}
	if !strings.Contains(got[:hdr], "Fibril-Reason: rejected") || got[hdr:total] != "job" {
		t.Fatalf("dead letter %q", got)
	}
	w.expect(`^\+OK 1$`)
}

func TestDurableConfirmOrderAcrossTopics(t *testing.T) {
	s := startDurable(t, nil)
	w := fibrilConn(t, s, "")
	for _, name := range []string{"a", "b"} {
		w.send("TOPIC CREATE " + name + "\r\n")
		w.expect(`^\+OK `)
	}
	// Two single-partition topics: each confirm's seq is fixed by the
	// order of the PUBs, so any reordering of answers shows.
	var sb strings.Builder
	var want []string
	count := map[string]int{}
	for i := range 300 {
		topic := "a"
		if i%3 == 0 {
			topic = "b"
		}
		count[topic]++
		fmt.Fprintf(&sb, "PUB %s %d\r\n%d\r\n", topic, len(fmt.Sprint(i)), i)
		want = append(want, fmt.Sprintf("+OK 0:%d", count[topic]))
		if i%50 == 0 {
			sb.WriteString("PUB _INBOX.x 1\r\nx\r\nPING\r\n")
			want = append(want, "+OK -", "PONG")
		}
	}
	w.send(sb.String())
	for i, wl := range want {
		l, err := w.line()
		if err != nil {
			t.Fatal(err)
		}
		if l != wl {
			t.Fatalf("answer %d: got %q want %q", i, l, wl)
		}
	}
}

func TestDurablePushCreditAndRelease(t *testing.T) {
	s := startDurable(t, nil)
	w := fibrilConn(t, s, "")
	w.send("TOPIC CREATE push\r\n")
	w.expect(`^\+OK `)
	for i := range 5 {
		w.send(fmt.Sprintf("PUB push 1\r\n%d\r\n", i))
		w.expect(`^\+OK 0:\d+$`)
	}
	c := fibrilConn(t, s, "")
	c.send("SUB push g 9 2\r\n")
	hs, bodies := c.expectMixed([]string{"+OK"}, 2)
	if bodies[0] != "0" || bodies[1] != "1" {
		t.Fatalf("first deliveries %v", bodies)
	}
	// Credit 2 is used: nothing more until a settle.
	c.send("PING\r\n")
	c.expect(`^PONG$`)
	c.send("ACK " + hs[0] + "\r\n")
	if _, bodies = c.expectMixed([]string{"+OK"}, 1); bodies[0] != "2" {
		t.Fatalf("after ACK got %v", bodies)
	}
	// Closing the connection releases its two leases at once.
	c.nc.Close()
	d := fibrilConn(t, s, "")
	d.send("POLL push g 10 2000\r\n")
	got := map[string]bool{}
	for {
		l, err := d.line()
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(l, "+OK") {
			break
		}
		b, _ := d.line()
		got[b] = true
	}
	for _, want := range []string{"1", "2", "3", "4"} {
		if !got[want] {
			// Released leases may come back on a second poll if the first
			// answered before the release landed.
			d.send("POLL push g 10 2000\r\n")
			for {
				l, err := d.line()
				if err != nil {
					t.Fatal(err)
				}
				if strings.HasPrefix(l, "+OK") {
					break
				}
				b, _ := d.line()
				got[b] = true
			}
			break
		}
	}
	for _, want := range []string{"1", "2", "3", "4"} {
		if !got[want] {
			t.Fatalf("message %s not redelivered after close (got %v)", want, got)
		}
	}
}

func TestDurableLongPollHoldsLaterAnswers(t *testing.T) {
	s := startDurable(t, nil)
	w := fibrilConn(t, s, "")
	w.send("TOPIC CREATE lp\r\nPOLL lp g 1 5000\r\nPING\r\n")
	w.expect(`^\+OK `)
	p := fibrilConn(t, s, "")
	p.send("PUB lp 4\r\nlate\r\n")
	p.expect(`^\+OK 0:1$`)
	w.expectDelivery(`^MSG lp 0 \S+ 4$`, "late")
	w.expect(`^\+OK 1$`)
	w.expect(`^PONG$`)
}

func TestDurableAutoCreateAndReserved(t *testing.T) {
	s := startDurable(t, func(o *Options) { o.AutoCreate = []string{"auto.>"} })
	w := fibrilConn(t, s, "")
	w.send("PUB auto.one 1\r\nx\r\nPUB auto.one 1\r\ny\r\nPUB _INBOX.abc 1\r\nz\r\nPUB other.one 1\r\nz\r\nTOPIC LIST\r\n")
	w.expect(`^\+OK 0:1$`)
	w.expect(`^\+OK 0:2$`)
	w.expect(`^\+OK -$`)
	w.expect(`^\+OK -$`) // outside the auto-create filters: not stored
	w.expect(`^\+OK \{"topics":\["auto.one"\]\}$`)
}

// TestUncapturedPublishCreatesNoTopicByDefault: auto-create is an opt-in;
// a NATS-mode publish no topic captures follows NATS core (fan-out only),
// and a Fibril-mode one is confirmed "+OK -" (not stored).
func TestUncapturedPublishCreatesNoTopicByDefault(t *testing.T) {
	s := startDurable(t, nil)
	nc := natsConnect(t, s)
	for i := range 50 {
		if err := nc.Publish(fmt.Sprintf("flood.%d", i), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	w := fibrilConn(t, s, "")
	w.send("PUB nosuchtopic 1\r\nx\r\nTOPIC LIST\r\n")
	w.expect(`^\+OK -$`)
	w.expect(`^\+OK \{"topics":\[\]\}$`)
}

func TestDurableNATSClientConsumesGroupAtMostOnce(t *testing.T) {
	s := startDurable(t, nil)
	w := fibrilConn(t, s, "")
	w.send("TOPIC CREATE work\r\n")
	w.expect(`^\+OK `)
	nc := natsConnect(t, s)
	sub, err := nc.QueueSubscribeSync("work", "workers")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := nc.Publish("work", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	for len(seen) < 20 {
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("after %d: %v", len(seen), err)
		}
		if !strings.HasPrefix(m.Reply, "$F.") {
			t.Fatalf("delivery without ack handle: %q", m.Reply)
		}
		seen[string(m.Data)] = true
	}
	// Settled on write: the group has nothing pending.
	waitFor(t, 5*time.Second, "group drained", func() bool {
		w.send("GROUP INFO work workers\r\n")
		l := w.expect(`^\+OK `)
		return strings.Contains(l, `"pending":0,"inflight":0`)
	})
	_ = nats.ErrTimeout
}

func TestDurableAckByPublish(t *testing.T) {
	s := startDurable(t, nil)
	w := fibrilConn(t, s, "")
	w.send("TOPIC CREATE ap\r\nPUB ap 1\r\nq\r\nPOLL ap g 1\r\n")
	w.expect(`^\+OK \{`)
	w.expect(`^\+OK 0:1$`)
	h := w.expectDelivery(`^MSG ap 0 \S+ 1$`, "q")
	w.expect(`^\+OK 1$`)
	nc := natsConnect(t, s)
	if _, err := nc.Request(h, []byte("+ACK"), 5*time.Second); err != nil {
		t.Fatalf("AckSync-style request: %v", err)
	}
	w.send("GROUP INFO ap g\r\n")
	w.expect(`"pending":0,"inflight":0`)
}

func TestDurableTopicFullHoldsConfirms(t *testing.T) {
	s := startDurable(t, nil)
	w := fibrilConn(t, s, "")
	w.send(`TOPIC CREATE fullb {"max_unsettled_msgs":2}` + "\r\n" + `TOPIC CREATE fullr {"max_unsettled_msgs":2,"full_policy":"reject"}` + "\r\nGROUP CREATE fullb g\r\nGROUP CREATE fullr g\r\n")
	for range 4 {
		w.expect(`^\+OK \{`)
	}
	// reject: the third publish is refused at once.
	w.send("PUB fullr 1\r\na\r\n")
	w.expect(`^\+OK 0:1$`)
	w.send("PUB fullr 1\r\nb\r\n")
	w.expect(`^\+OK 0:2$`)
	w.send("PUB fullr 1\r\nc\r\n")
	w.expect(`^-ERR 'topic_full `)
	// block: the third confirm waits until a message is settled.
	w.send("PUB fullb 1\r\na\r\n")
	w.expect(`^\+OK 0:1$`)
	w.send("PUB fullb 1\r\nb\r\n")
	w.expect(`^\+OK 0:2$`)
	w.send("PUB fullb 1\r\nc\r\nPING\r\n")
	other := fibrilConn(t, s, "")
	other.send("POLL fullb g 1\r\n")
	h := other.expectDelivery(`^MSG fullb 0 \S+ 1$`, "a")
	other.expect(`^\+OK 1$`)
	// Nothing for w yet: its PING answer is behind the held confirm.
	_ = w.nc.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if l, err := w.r.ReadString('\n'); err == nil {
		t.Fatalf("answer %q arrived while the topic was full", l)
	}
	other.send("ACK " + h + "\r\n")
	other.expect(`^\+OK$`)
	w.expect(`^\+OK 0:3$`)
	w.expect(`^PONG$`)
}

func TestManagementErrors(t *testing.T) {
	s := startDurable(t, nil)
	w := fibrilConn(t, s, "")
	cases := []struct{ send, want string }{
		{"TOPIC CREATE m {\"partitions\":2}\r\n", `^\+OK \{"name":"m","id":\d+,.*"partitions":2`},
		{"TOPIC CREATE m\r\n", `^-ERR 'topic_exists `},
		{"TOPIC CREATE m {\"partitions\":2}\r\n", `^\+OK \{"name":"m",`},
		{"TOPIC CREATE $m\r\n", `^-ERR 'reserved_subject `},
		{"TOPIC CREATE m2 {\"subjects\":[\"m\"]}\r\n", `^-ERR 'topic_overlap `},
		{"TOPIC CREATE m3 {\"bogus\":1}\r\n", `^-ERR 'invalid_json `},
		{"GROUP CREATE m g {\"lease_ms\":500}\r\n", `^\+OK \{"topic":"m","name":"g".*"lease_ms":500`},
		{"GROUP CREATE m g\r\n", `^-ERR 'group_exists `},
		{"GROUP CREATE m g {\"lease_ms\":500}\r\n", `^\+OK \{"topic":"m","name":"g"`},
		{"GROUP CREATE m h {\"nats_ack\":\"sometimes\"}\r\n", `^-ERR 'invalid_config `},
		{"GROUP INFO m nope\r\n", `^-ERR 'unknown_group `},
		{"GROUP DELETE m g\r\n", `^\+OK \{"topic":"m","group":"g"\}$`},
		{"TOPIC DELETE m\r\n", `^\+OK \{"topic":"m"\}$`},
		{"TOPIC INFO m\r\n", `^-ERR 'unknown_topic `},
	}
	for _, tc := range cases {
		w.send(tc.send)
		w.expect(tc.want)
	}
	// Fibril verbs from a NATS-mode connection are refused (and fatal there).
	n := dialInfo(t, s)
	n.send("TOPIC LIST\r\n")
	n.expect(`^-ERR 'Unknown Protocol Operation'$`)
	n.expectClosed()
}

// expectMixed reads until it has seen the answers (in this order) and n
// push deliveries (MSG with a sid other than 0), which may come between
// answers (SPEC.md 4). It returns the deliveries' handles and bodies.
func (w *wireConn) expectMixed(answers []string, n int) (handles, bodies []string) {
	w.t.Helper()
	for len(answers) > 0 || len(bodies) < n {
		l, err := w.line()
		if err != nil {
			w.t.Fatalf("expectMixed: %v (waiting for %q and %d deliveries)", err, answers, n-len(bodies))
		}
		if strings.HasPrefix(l, "MSG ") {
			b, err := w.line()
			if err != nil {
				w.t.Fatal(err)
			}
			handles = append(handles, handleRe.FindString(l))
			bodies = append(bodies, b)
			continue
		}
		if len(answers) == 0 || l != answers[0] {
			w.t.Fatalf("expectMixed: got %q, want %q", l, answers)
		}
		answers = answers[1:]
	}
	return handles, bodies
}

func TestNoGroupAutoCreate(t *testing.T) {
	s := startDurable(t, func(o *Options) { o.AutoCreateGroups = false })
	w := fibrilConn(t, s, "")
	w.send("TOPIC CREATE ng\r\nPOLL ng g 1\r\nSUB ng g 4\r\nGROUP CREATE ng g\r\nPOLL ng g 1\r\n")
	w.expect(`^\+OK \{`)
	w.expect(`^-ERR 'unknown_group `)
	w.expect(`^-ERR 'unknown_group `)
	w.expect(`^\+OK \{`)
	w.expect(`^\+OK 0$`)
}

// TestPollAnswerBoundedByMaxPollBytes: a POLL answer stops at MaxPollBytes
// of message bytes (at least one message), so POLL 1024 of big messages
// cannot build a gigabyte answer.
func TestPollAnswerBoundedByMaxPollBytes(t *testing.T) {
	s := startDurable(t, func(o *Options) { o.MaxPollBytes = 2500 })
	w := fibrilConn(t, s, "")
	w.send("TOPIC CREATE big {\"partitions\":1}\r\n")
	w.expect(`^\+OK \{`)
	body := strings.Repeat("b", 1000)
	for i := 1; i <= 5; i++ {
		w.send("PUB big 1000\r\n" + body + "\r\n")
		w.expect(`^\+OK 0:` + strconv.Itoa(i) + `$`)
	}
	w.send("POLL big g 100\r\n")
	for i := 1; i <= 3; i++ { // 3 x (1000 + subject) crosses 2500
		w.expectDelivery(`^MSG big 0 \S+ 1000$`, body)
	}
	w.expect(`^\+OK 3$`)
	w.send("POLL big g 100\r\n")
	w.expectDelivery(`^MSG big 0 \S+ 1000$`, body)
	w.expectDelivery(`^MSG big 0 \S+ 1000$`, body)
	w.expect(`^\+OK 2$`)
}

// TestConfigOutOfRangeAnsweredInvalidConfig: the wire answer for a field
// out of range names the field and its range (lease_ms 0 used to become
// 30000 silently; a lease_ms beyond int64 answered invalid_json).
func TestConfigOutOfRangeAnsweredInvalidConfig(t *testing.T) {
	s := startServer(t, func(o *Options) { o.NoBroker = false })
	w := dialInfo(t, s)
	w.send("CONNECT {\"fibril\":1}\r\nTOPIC CREATE r\r\n")
	w.expect(`^\+OK$`)
	w.expect(`^\+OK \{"name":"r"`)
	w.send("GROUP CREATE r g {\"lease_ms\":0}\r\nGROUP CREATE r g {\"max_deliveries\":0}\r\nGROUP CREATE r g {\"lease_ms\":1e40}\r\nTOPIC CREATE r2 {\"partitions\":0}\r\n")
	w.expect(`^-ERR 'invalid_config .*lease_ms 0 out of range \[1, 4294967295\]'$`)
	w.expect(`^-ERR 'invalid_config .*max_deliveries 0 out of range -1 or \[1, 2147483647\]'$`)
	w.expect(`^-ERR 'invalid_config .*lease_ms 1e40 out of range`)
	w.expect(`^-ERR 'invalid_config .*partitions 0 out of range \[1, 4096\]'$`)
}

// TestMaxUnsettledHoldsForPipelinedPublishes: 1,000 PUBs in one write to a
// topic with max_unsettled_msgs 100 and reject were all accepted (the
// limit counted only what the partition had appended).
func TestMaxUnsettledHoldsForPipelinedPublishes(t *testing.T) {
	s := startDurable(t, nil)
	w := fibrilConn(t, s, "")
	w.send(`TOPIC CREATE lim {"max_unsettled_msgs":100,"full_policy":"reject","partitions":3}` + "\r\nGROUP CREATE lim g\r\n")
	w.expect(`^\+OK \{`)
	w.expect(`^\+OK \{`)
	w.send(strings.Repeat("PUB lim 1\r\nx\r\n", 1000))
	ok, full := 0, 0
	for range 1000 {
		switch l := w.expect(`^(\+OK \d+:\d+|-ERR 'topic_full .*)$`); {
		case strings.HasPrefix(l, "+OK"):
			ok++
		default:
			full++
		}
	}
	if ok != 100 || full != 900 {
		t.Fatalf("%d accepted, %d topic_full; want 100 and 900", ok, full)
	}
}

// TestBlockTimeoutAnswersTopicFull: under full_policy block a publish to a
// full topic waited (and held the connection's later answers) for ever;
// now it is answered topic_full after block_timeout_ms.
func TestBlockTimeoutAnswersTopicFull(t *testing.T) {
	s := startDurable(t, nil)
	w := fibrilConn(t, s, "")
	w.send(`TOPIC CREATE blk {"max_unsettled_msgs":1,"block_timeout_ms":200}` + "\r\nGROUP CREATE blk g\r\n")
	w.expect(`^\+OK \{.*"block_timeout_ms":200`)
	w.expect(`^\+OK \{`)
	w.send("PUB blk 1\r\na\r\n")
	w.expect(`^\+OK 0:1$`)
	start := time.Now()
	w.send("PUB blk 1\r\nb\r\nPING\r\n")
	w.expect(`^-ERR 'topic_full .*block_timeout_ms 200'$`)
	w.expect(`^PONG$`)
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Fatalf("answered after %s, before block_timeout_ms", d)
	}
}
