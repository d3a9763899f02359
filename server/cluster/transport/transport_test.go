package transport

import (
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/server/cluster/certgen"
	pb "go.etcd.io/raft/v3/raftpb"
)

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

type got struct {
	group uint64
	m     *pb.Message
}

// inbox records what a transport's handler received.
type inbox struct {
	mu   sync.Mutex
	msgs []got
}

func (b *inbox) handle(g uint64, m *pb.Message) {
	b.mu.Lock()
	b.msgs = append(b.msgs, got{g, m})
	b.mu.Unlock()
}

func (b *inbox) list() []got {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]got(nil), b.msgs...)
}

type node struct {
	*Transport
	in *inbox
}

// testCerts writes a CA and certificates for names into a temp dir.
func testCerts(t *testing.T, names ...string) map[string]*Credentials {
	t.Helper()
	paths, err := certgen.WriteCluster(t.TempDir(), time.Hour, names...)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*Credentials{}
	for n, p := range paths {
		c, err := LoadCredentials(TLSFiles(p))
		if err != nil {
			t.Fatal(err)
		}
		out[n] = c
	}
	return out
}

func start(t *testing.T, id uint64, name string, creds *Credentials, tune func(*Options)) *node {
	t.Helper()
	in := &inbox{}
	o := Options{ID: id, Name: name, Listen: "127.0.0.1:0", Creds: creds, Handler: in.handle}
	if tune != nil {
		tune(&o)
	}
	tr, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return &node{tr, in}
}

func link(t *testing.T, from *node, to ...*node) {
	t.Helper()
	for _, n := range to {
		if err := from.AddPeer(Peer{ID: n.opts.ID, Name: n.opts.Name, Addr: n.Addr().String()}); err != nil {
			t.Fatal(err)
		}
	}
}

// checkNoLeak waits for the goroutine count to come back to base.
func checkNoLeak(t *testing.T, base int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("goroutines back to %d", base), func() bool { return runtime.NumGoroutine() <= base })
}

// TestSendReceive: messages of several groups from one node reach two
// peers whole, in order, each with its group, over mutual TLS; Close
// leaves no goroutine behind.
func TestSendReceive(t *testing.T) {
	base := runtime.NumGoroutine()
	creds := testCerts(t, "n1", "n2", "n3")
	n1, n2, n3 := start(t, 1, "n1", creds["n1"], nil), start(t, 2, "n2", creds["n2"], nil), start(t, 3, "n3", creds["n3"], nil)
	link(t, n1, n2, n3)
	link(t, n2, n1)
	link(t, n3, n1) // a listener takes messages only from its peers
	const per = 300
	for i := 0; i < per; i++ {
		for _, g := range []uint64{0, 1, 7} {
			n1.Group(g).Send([]*pb.Message{msg(1, 2, fmt.Sprintf("%d/%d", g, i)), msg(1, 3, fmt.Sprintf("%d/%d", g, i))})
		}
	}
	n2.Send(5, []*pb.Message{msg(2, 1, "back")})
	for _, n := range []*node{n2, n3} {
		waitFor(t, "every message", func() bool { return len(n.in.list()) == 3*per })
		next := map[uint64]int{}
		for _, r := range n.in.list() {
			want := fmt.Sprintf("%d/%d", r.group, next[r.group])
			if d := string(r.m.GetEntries()[0].GetData()); d != want || r.m.GetFrom() != 1 {
				t.Fatalf("%s got %q from %d, want %q from 1", n.opts.Name, d, r.m.GetFrom(), want)
			}
			next[r.group]++
		}
	}
	waitFor(t, "the reply", func() bool { return len(n1.in.list()) == 1 })
	if r := n1.in.list()[0]; r.group != 5 || string(r.m.GetEntries()[0].GetData()) != "back" {
		t.Fatalf("n1 got %v", r)
	}
	if s := n1.Stats(); s.Sent != 6*per || s.DroppedFull+s.Unreachable+s.Oversize != 0 {
		t.Fatalf("n1 stats %+v", s)
	}
	n1.Send(0, []*pb.Message{msg(1, 9, "nobody")})
	if s := n1.Stats(); s.NoPeer != 1 {
		t.Fatalf("a message to no peer: stats %+v", s)
	}
	for _, n := range []*node{n1, n2, n3} {
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
	checkNoLeak(t, base)
}

// TestRefusesWithoutClusterCert: a client with no certificate, one from
// another CA (even naming a peer), or one from the cluster CA naming no
// peer cannot deliver a raft message; the listener counts each refusal.
func TestRefusesWithoutClusterCert(t *testing.T) {
	creds := testCerts(t, "n1", "n2", "n9")
	foreign := testCerts(t, "n2")["n2"] // another CA's certificate for the name n2
	n1 := start(t, 1, "n1", creds["n1"], nil)
	if err := n1.AddPeer(Peer{ID: 2, Name: "n2", Addr: "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		creds *Credentials
		id    uint64
	}{
		// Trusts the cluster CA, so only n1 can refuse it.
		{"another CA's certificate", &Credentials{cert: foreign.cert, pool: creds["n1"].pool}, 2},
		{"the cluster CA's certificate for no peer", creds["n9"], 9},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := n1.Stats().Refused
			rogue := start(t, c.id, "rogue", c.creds, nil)
			link(t, rogue, n1)
			waitFor(t, "a refusal", func() bool {
				rogue.Send(0, []*pb.Message{msg(2, 1, "vote for me")})
				return n1.Stats().Refused > before
			})
		})
	}
	t.Run("no certificate", func(t *testing.T) {
		before := n1.Stats().Refused
		c, err := tls.Dial("tcp", n1.Addr().String(), &tls.Config{ServerName: "n1", RootCAs: creds["n1"].pool, MinVersion: tls.VersionTLS13})
		if err == nil {
			f, _ := appendFrame(nil, 0, msg(2, 1, "vote for me"), 1<<20)
			c.Write(f)
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = c.Read(make([]byte, 1))
			c.Close()
		}
		if err == nil {
			t.Fatal("the connection without a certificate stayed open")
		}
		waitFor(t, "a refusal", func() bool { return n1.Stats().Refused > before })
	})
	if got := n1.in.list(); len(got) != 0 {
		t.Fatalf("n1 took %d messages from refused clients", len(got))
	}
}

// TestForgedSenderCut: a peer with a good certificate sending a message
// that claims another sender has its connection cut and the message
// dropped.
func TestForgedSenderCut(t *testing.T) {
	creds := testCerts(t, "n1", "n2", "n3")
	n1, n3 := start(t, 1, "n1", creds["n1"], nil), start(t, 3, "n3", creds["n3"], nil)
	if err := n1.AddPeer(Peer{ID: 2, Name: "n2", Addr: "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	link(t, n1, n3)
	link(t, n3, n1)
	n3.Send(0, []*pb.Message{msg(3, 1, "honest"), msg(2, 1, "forged")})
	waitFor(t, "the forged message to be caught", func() bool { return n1.Stats().Forged == 1 })
	got := n1.in.list()
	if len(got) != 1 || got[0].m.GetFrom() != 3 {
		t.Fatalf("n1 got %v", got)
	}
}

// TestOversizeFrame: a received frame over MaxFrame cuts the connection
// before its body is read; a message too big to send is dropped and
// counted, and the link goes on.
func TestOversizeFrame(t *testing.T) {
	creds := testCerts(t, "n1", "n2")
	small := func(o *Options) { o.MaxFrame = 4 << 10 }
	n1, n2 := start(t, 1, "n1", creds["n1"], small), start(t, 2, "n2", creds["n2"], small)
	link(t, n1, n2)
	link(t, n2, n1)

	c, err := tls.Dial("tcp", n1.Addr().String(), creds["n2"].client("n1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write(binary.BigEndian.AppendUint32(nil, 4<<10+1))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("the connection with an oversized frame was not cut: %v", err)
	}
	waitFor(t, "the bad frame counted", func() bool { return n1.Stats().BadFrames == 1 })

	// The raw client above took n2's name, so n1 cut n2's own link: send
	// until the small message arrives over the link n2 dials again.
	n2.Send(0, []*pb.Message{msg(2, 1, strings.Repeat("x", 5<<10))})
	waitFor(t, "the small message", func() bool {
		n2.Send(0, []*pb.Message{msg(2, 1, "small")})
		return len(n1.in.list()) > 0
	})
	if s := n2.Stats(); s.Oversize != 1 {
		t.Fatalf("n2 stats %+v", s)
	}
	if d := string(n1.in.list()[0].m.GetEntries()[0].GetData()); d != "small" {
		t.Fatalf("n1 got %q", d)
	}
}

// TestQueueFullDrops: while a peer's link is stuck (its address accepts
// TCP but never answers the handshake), Send queues QueueLen messages and
// drops the rest, counted, without blocking; Close ends the stuck dial.
func TestQueueFullDrops(t *testing.T) {
	base := runtime.NumGoroutine()
	creds := testCerts(t, "n1", "n2")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn
	var hmu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			hmu.Lock()
			held = append(held, c)
			hmu.Unlock()
		}
	}()
	n1 := start(t, 1, "n1", creds["n1"], func(o *Options) { o.QueueLen = 4; o.DialTimeout = time.Minute })
	if err := n1.AddPeer(Peer{ID: 2, Name: "n2", Addr: ln.Addr().String()}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		n1.Send(0, []*pb.Message{msg(1, 2, "x")})
	}
	if s := n1.Stats(); s.DroppedFull != 96 {
		t.Fatalf("stats %+v, want 96 dropped", s)
	}
	if err := n1.Close(); err != nil {
		t.Fatal(err)
	}
	ln.Close()
	hmu.Lock()
	for _, c := range held {
		c.Close()
	}
	hmu.Unlock()
	checkNoLeak(t, base)
}

// TestReconnect: a peer that goes away and comes back on the same address
// gets messages again; what was sent while it was away is dropped and
// counted.
func TestReconnect(t *testing.T) {
	creds := testCerts(t, "n1", "n2")
	var reported atomic.Uint64
	fast := func(o *Options) { o.MaxBackoff = 50 * time.Millisecond }
	n1 := start(t, 1, "n1", creds["n1"], func(o *Options) {
		fast(o)
		o.OnUnreachable = func(id uint64) {
			if id == 2 {
				reported.Add(1)
			}
		}
	})
	n2 := start(t, 2, "n2", creds["n2"], fast)
	link(t, n1, n2)
	link(t, n2, n1)
	n1.Send(0, []*pb.Message{msg(1, 2, "before")})
	waitFor(t, "the first message", func() bool { return len(n2.in.list()) == 1 })
	addr := n2.Addr().String()
	n2.Close()
	waitFor(t, "a failed link or dial", func() bool {
		n1.Send(0, []*pb.Message{msg(1, 2, "while away")})
		s := n1.Stats()
		return s.DialFailures > 0 && s.Unreachable > 0 && reported.Load() > 0
	})
	again := start(t, 2, "n2", creds["n2"], func(o *Options) { o.Listen = addr })
	link(t, again, n1)
	waitFor(t, "a message after the restart", func() bool {
		n1.Send(0, []*pb.Message{msg(1, 2, "after")})
		return len(again.in.list()) > 0
	})
	if s := n1.Stats(); s.Dials < 2 {
		t.Fatalf("stats %+v: no second dial", s)
	}
}

// TestMaxInbound: connections over MaxInbound are closed at accept and
// counted; one slot freed takes a connection again.
func TestMaxInbound(t *testing.T) {
	creds := testCerts(t, "n1")
	n1 := start(t, 1, "n1", creds["n1"], func(o *Options) { o.MaxInbound = 1; o.DialTimeout = time.Minute })
	first, err := net.Dial("tcp", n1.Addr().String()) // holds the slot, handshaking
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a second connection refused", func() bool {
		c, err := net.Dial("tcp", n1.Addr().String())
		if err == nil {
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			c.Read(make([]byte, 1))
			c.Close()
		}
		return n1.Stats().Refused > 0
	})
	first.Close()
}

func snapMsg(from, to uint64, size int) *pb.Message {
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	idx, term := uint64(9), uint64(2)
	return &pb.Message{Type: pb.MessageType_MsgSnap.Enum(), From: &from, To: &to,
		Snapshot: &pb.Snapshot{Data: data, Metadata: &pb.SnapshotMetadata{Index: &idx, Term: &term}}}
}

// TestSnapshotInChunks: a snapshot message many times MaxFrame reaches
// the peer whole, in chunks assembled in SnapshotDir (left empty after),
// and the small messages queued behind it follow; one over MaxSnapshot,
// or another message over MaxFrame, is dropped and counted as Oversize.
func TestSnapshotInChunks(t *testing.T) {
	creds := testCerts(t, "n1", "n2")
	dir := t.TempDir()
	var mu sync.Mutex
	var reports []string
	small := func(o *Options) {
		o.MaxFrame, o.MaxSnapshot, o.SnapshotDir = 64<<10, 4<<20, dir
		o.OnSnapshot = func(group, to uint64, ok bool) {
			mu.Lock()
			reports = append(reports, fmt.Sprintf("%d>%d:%v", group, to, ok))
			mu.Unlock()
		}
	}
	n1, n2 := start(t, 1, "n1", creds["n1"], small), start(t, 2, "n2", creds["n2"], small)
	link(t, n1, n2)
	link(t, n2, n1)
	big := snapMsg(2, 1, 1<<20+123)
	n2.Send(7, []*pb.Message{snapMsg(2, 1, 5<<20), msg(2, 1, strings.Repeat("x", 70<<10))})
	n2.Send(7, []*pb.Message{big, msg(2, 1, "after")})
	waitFor(t, "the snapshot and the message after it", func() bool { return len(n1.in.list()) == 2 })
	got := n1.in.list()
	if got[0].group != 7 || got[0].m.GetType() != pb.MessageType_MsgSnap || string(got[0].m.GetSnapshot().GetData()) != string(big.GetSnapshot().GetData()) {
		t.Fatalf("n1 got group %d %s of %d bytes", got[0].group, got[0].m.GetType(), len(got[0].m.GetSnapshot().GetData()))
	}
	if d := string(got[1].m.GetEntries()[0].GetData()); d != "after" {
		t.Fatalf("then %q", d)
	}
	if s1, s2 := n1.Stats(), n2.Stats(); s2.SnapshotsSent != 1 || s1.SnapshotsReceived != 1 || s2.Oversize != 2 || s1.SnapshotsFailed+s2.SnapshotsFailed != 0 {
		t.Fatalf("stats n1 %+v n2 %+v", s1, s2)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("SnapshotDir holds %v after the transfer", left)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(reports, " "); got != "7>1:false 7>1:true" {
		t.Fatalf("snapshot reports %q, want the oversized one failed, then the other sent", got)
	}
}

// TestSnapshotBadChunkCut: a chunk that does not continue its transfer
// cuts the connection, counted, and leaves no file behind.
func TestSnapshotBadChunkCut(t *testing.T) {
	creds := testCerts(t, "n1", "n2")
	dir := t.TempDir()
	n1 := start(t, 1, "n1", creds["n1"], func(o *Options) { o.SnapshotDir = dir })
	link(t, n1, start(t, 2, "n2", creds["n2"], nil))
	c, err := tls.Dial("tcp", n1.Addr().String(), creds["n2"].client("n1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	frame := func(xfer, total, off uint64, data string) []byte {
		b := binary.BigEndian.AppendUint32(nil, uint32(8+chunkHeader+len(data)))
		b = binary.BigEndian.AppendUint64(b, 3|chunkBit)
		b = binary.BigEndian.AppendUint64(b, xfer)
		b = binary.BigEndian.AppendUint64(b, total)
		b = binary.BigEndian.AppendUint64(b, off)
		b = binary.BigEndian.AppendUint32(b, 0)
		return append(b, data...)
	}
	c.Write(frame(1, 10, 0, "abcd"))
	waitFor(t, "the first chunk's file", func() bool { left, _ := os.ReadDir(dir); return len(left) == 1 })
	c.Write(frame(1, 10, 6, "ghij")) // skips bytes 4 and 5
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("the connection with a bad chunk was not cut: %v", err)
	}
	waitFor(t, "the bad chunk counted", func() bool { s := n1.Stats(); return s.BadFrames == 1 && s.SnapshotsFailed == 1 })
	waitFor(t, "the partial file removed", func() bool { left, _ := os.ReadDir(dir); return len(left) == 0 })
}
