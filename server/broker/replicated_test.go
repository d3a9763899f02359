package broker_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/server/broker"
	"github.com/fibrilmq/fibril/server/cluster"
	"github.com/fibrilmq/fibril/server/replog"
	"github.com/fibrilmq/fibril/server/seglog"
	pb "go.etcd.io/raft/v3/raftpb"
)

// Replicated partitions: three brokers in one process, each on its own
// directory, each partition's logs a replog.Pair whose raft groups are
// linked by an in-process transport. The tests crash the serving node
// (its group stops, then its broker closes) and check that a new leader
// serves every confirmed message and undoes no answered ack, and that
// the old leader catches up when it opens again.

// repNet delivers each raft message straight to its target group,
// except those from a replica cut off.
type repNet struct {
	mu     sync.Mutex
	groups map[uint64]*cluster.Group
	cut    map[uint64]bool
}

func (*repNet) ReportsSnapshots() bool { return false }

func (n *repNet) Send(msgs []*pb.Message) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, m := range msgs {
		if n.cut[m.GetFrom()] {
			continue
		}
		if g := n.groups[m.GetTo()]; g != nil {
			g.Step(m)
		}
	}
}

func (n *repNet) cutOff(id uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cut == nil {
		n.cut = map[uint64]bool{}
	}
	n.cut[id] = true
}

func (n *repNet) set(id uint64, g *cluster.Group) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if g == nil {
		delete(n.groups, id)
	} else {
		n.groups[id] = g
		delete(n.cut, id) // a replica that starts again is linked again
	}
}

// repNode is one broker of the cluster; pairs holds each partition's
// logs by directory, pair the one of topic orders.
type repNode struct {
	id    uint64
	dir   string
	b     *broker.Broker
	mu    sync.Mutex
	pairs map[string]*replog.Pair
	pair  *replog.Pair
	topic *broker.Topic
	group *broker.Group
}

// partDir is the directory of t's partition idx on n.
func (n *repNode) partDir(t *broker.Topic, idx int) string {
	return filepath.Join(n.dir, "topics", strconv.FormatUint(uint64(t.ID()), 10), strconv.Itoa(idx))
}

// partPair is n's pair of the topic's partition idx.
func (n *repNode) partPair(idx int) *replog.Pair {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.pairs[n.partDir(n.topic, idx)]
}

type repCluster struct {
	t     testing.TB
	seg   int64 // the local logs' segment size
	base  string
	mu    sync.Mutex
	nets  map[string]*repNet // by partition directory within a node's
	nodes map[uint64]*repNode
	parts int   // the topic's partitions
	lease int64 // the group's lease_ms
}

// net returns the transport of the partition in dir (within a node's
// directory nodeDir): every partition is a group of its own.
func (c *repCluster) net(nodeDir, dir string) *repNet {
	rel, err := filepath.Rel(nodeDir, dir)
	if err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nets[rel] == nil {
		c.nets[rel] = &repNet{groups: map[uint64]*cluster.Group{}}
	}
	return c.nets[rel]
}

func newRepCluster(t *testing.T) *repCluster { return newRepClusterWith(t, 1, seglog.MinSegmentSize) }

// newRepClusterN is newRepCluster with a topic of parts partitions.
func newRepClusterN(t *testing.T, parts int) *repCluster {
	return newRepClusterWith(t, parts, seglog.MinSegmentSize)
}

// newRepClusterWith is newRepCluster with a topic of parts partitions
// and local log segments of seg bytes (the tests' are small, so that
// truncations drop segments).
func newRepClusterWith(t testing.TB, parts int, seg int64) *repCluster {
	return newRepClusterLease(t, parts, seg, 6000)
}

// newRepClusterLease is newRepClusterWith with the group's lease_ms: a
// new leader keeps the leases in flight (evLease), so the failover tests
// that want unacked deliveries back use a short one.
func newRepClusterLease(t testing.TB, parts int, seg int64, leaseMs int64) *repCluster {
	c := &repCluster{t: t, base: t.TempDir(), nets: map[string]*repNet{}, nodes: map[uint64]*repNode{}, parts: parts, seg: seg, lease: leaseMs}
	for id := uint64(1); id <= 3; id++ {
		c.start(id)
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			n.b.Close()
		}
	})
	return c
}

// start opens node id's broker on its directory (creating the topic and
// group the first time: every node creates them in the same order, so
// their ids and directories match).
func (c *repCluster) start(id uint64) *repNode {
	n := &repNode{id: id, dir: filepath.Join(c.base, strconv.Itoa(int(id))), pairs: map[string]*replog.Pair{}}
	opts := broker.Options{SegmentSize: 1 << 20, SnapshotEvery: 8, OpenPartition: func(dir string, _ seglog.Policy, _ []string) (broker.PartitionLogs, error) {
		net := c.net(n.dir, dir)
		p, err := replog.Open(dir, replog.Config{Group: cluster.Config{ID: id, Peers: []uint64{1, 2, 3}, ElectionTicks: 20},
			Transport: net, Tick: 5 * time.Millisecond, SegmentSize: c.seg, MarkEvery: 16})
		if err != nil {
			return broker.PartitionLogs{}, err
		}
		net.set(id, p.Group())
		n.mu.Lock()
		n.pairs[dir] = p
		n.mu.Unlock()
		return broker.PartitionLogs{Data: p.Data(), Events: p.Events(), Replica: p}, nil
	}}
	b, err := broker.Open(n.dir, opts)
	if err != nil {
		c.t.Fatal(err)
	}
	n.b = b
	t, ok := b.Topic("orders")
	if !ok {
		if t, err = b.CreateTopic("orders", broker.TopicConfig{Partitions: max(1, c.parts)}); err != nil {
			c.t.Fatal(err)
		}
	}
	if n.group, err = t.Group("workers", broker.GroupConfig{LeaseMs: c.lease, MaxDeliveries: 100}); err != nil {
		c.t.Fatal(err)
	}
	n.topic = t
	n.mu.Lock()
	n.pair = n.pairs[n.partDir(t, 0)]
	n.mu.Unlock()
	c.nodes[id] = n
	return n
}

// crash stops node id's raft group (its peers see it die), then closes
// its broker.
func (c *repCluster) crash(id uint64) {
	n := c.nodes[id]
	n.mu.Lock()
	for dir, p := range n.pairs {
		c.net(n.dir, dir).set(id, nil)
		if err := p.CloseGroup(); err != nil {
			c.t.Fatalf("stop node %d's group %s: %v", id, dir, err)
		}
	}
	n.mu.Unlock()
	if err := n.b.Close(); err != nil {
		c.t.Logf("close node %d after its group stopped: %v", id, err)
	}
	delete(c.nodes, id)
}

// leader waits until a node's partition serves a publish, and returns it.
func (c *repCluster) leader() *repNode {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, n := range c.nodes {
			if ok, _ := n.pair.Serving(); ok {
				return n
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	c.t.Fatal("no node serves the partition")
	return nil
}

// publish publishes on the serving node, retrying while leadership
// moves (a failed publish's outcome is unknown: the retry is a new
// message, never counted as confirmed unless it is).
func (c *repCluster) publish(data string) broker.Position {
	c.t.Helper()
	for attempt := 0; attempt < 200; attempt++ {
		n := c.leader()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		pos, err := n.topic.Publish(ctx, broker.Message{Subject: "orders", Data: []byte(data)})
		cancel()
		if err == nil {
			return pos
		}
		if !errors.Is(err, broker.ErrNotLeader) && !errors.Is(err, replog.ErrNotLeader) {
			c.t.Fatalf("publish %s: %v", data, err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	c.t.Fatalf("publish %s: no node took it", data)
	return broker.Position{}
}

// pollAll polls the serving node until want messages arrived or a poll
// comes back empty once they did; it returns every delivery by payload.
func pollAll(t *testing.T, c *repCluster, want int) map[string]broker.Delivery {
	t.Helper()
	got := map[string]broker.Delivery{}
	for rounds := 0; rounds < 2000; rounds++ {
		n := c.leader()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		ds, err := n.group.Poll(ctx, 64)
		cancel()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, broker.ErrNotLeader) {
			t.Fatalf("poll: %v", err)
		}
		for _, d := range ds {
			got[string(d.Data)] = d
		}
		if len(got) >= want && len(ds) == 0 && err != nil {
			return got
		}
	}
	t.Fatalf("polled %d of %d", len(got), want)
	return nil
}

// acks records the outcome of acks: answered ones must never be undone;
// those answered ErrNotLeader (leadership moved meanwhile) have an
// unknown outcome and are checked for nothing.
type acks struct {
	done, unknown map[string]bool
}

func (a *acks) ack(t *testing.T, data string, d broker.Delivery) {
	t.Helper()
	err := d.Ack(context.Background())
	switch {
	case err == nil:
		a.done[data] = true
	case errors.Is(err, broker.ErrNotLeader) || errors.Is(err, replog.ErrNotLeader):
		a.unknown[data] = true
	default:
		t.Fatalf("ack %s: %v", data, err)
	}
}

// TestReplicatedFailover: messages published with confirms through the
// leader, some acked; the leader crashes; a new leader serves, and a
// consumer there receives exactly the confirmed messages not acked (no
// confirmed one lost, no answered ack undone); the old leader opens
// again on its directory and catches up to every confirmed message.
func TestReplicatedFailover(t *testing.T) {
	c := newRepCluster(t)
	const n = 60
	confirmed := map[string]broker.Position{}
	for i := 0; i < n; i++ {
		data := fmt.Sprintf("m%03d", i)
		confirmed[data] = c.publish(data)
	}
	ds := pollAll(t, c, n)
	if len(ds) != n {
		t.Fatalf("first consumer got %d messages, want %d", len(ds), n)
	}
	a := acks{done: map[string]bool{}, unknown: map[string]bool{}}
	for data, d := range ds {
		if data[len(data)-1]%3 == 0 {
			a.ack(t, data, d)
		}
	}
	// Snapshots every 8 events and small segments: the event log's
	// front is truncated, so the group state is only in the replicated
	// state file (without it a new leader would redeliver acked ones).
	for i := 0; ; i++ {
		if first, _ := c.leader().pair.Events().Bounds(); first > 1 {
			break
		}
		if i == 2000 {
			t.Fatal("the event log's front was never truncated")
		}
		data := fmt.Sprintf("x%04d", i)
		confirmed[data] = c.publish(data)
		for data, d := range pollAll(t, c, 1) {
			a.ack(t, data, d)
		}
	}
	old := c.leader()
	c.crash(old.id)
	lead := c.leader()
	if lead.id == old.id {
		t.Fatal("the crashed node still serves")
	}
	again := pollAll(t, c, len(confirmed)-len(a.done)-len(a.unknown))
	for data := range again {
		if a.done[data] {
			t.Errorf("acked message %s delivered again by the new leader", data)
		}
		if _, ok := confirmed[data]; !ok {
			t.Errorf("unexpected message %s", data)
		}
	}
	for data := range confirmed {
		if _, ok := again[data]; !ok && !a.done[data] && !a.unknown[data] {
			t.Errorf("confirmed, unacked message %s lost", data)
		}
	}
	for data, d := range again {
		if d.Attempt < 2 {
			t.Errorf("%s redelivered with attempt %d: its first delivery was forgotten", data, d.Attempt)
		}
	}
	if len(a.done) == 0 {
		t.Fatal("no ack was answered: the test shows nothing")
	}
	// The old leader opens again and catches up from the log.
	back := c.start(old.id)
	var top broker.Position
	for _, pos := range confirmed {
		if pos.Seq > top.Seq {
			top = pos
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for back.pair.Data().Durable() < top.Seq {
		if time.Now().After(deadline) {
			t.Fatalf("the old leader holds data to %d, want %d", back.pair.Data().Durable(), top.Seq)
		}
		time.Sleep(2 * time.Millisecond)
	}
	for data, pos := range confirmed {
		r, err := back.pair.Data().Read(pos.Seq)
		if err != nil || string(r.Data) != data {
			t.Fatalf("old leader at %d: %q %v, want %s", pos.Seq, r.Data, err, data)
		}
	}
}

// TestReplicatedKillInFlight: the serving node crashes while publishes
// are in flight: some confirmed, then more sent after its messages stop
// reaching its peers (they cannot commit, so they must not be
// confirmed). Every confirmed message is on the new leader at its
// confirmed position with its payload, and the old leader catches up to
// the same; unconfirmed ones may be kept or lost.
func TestReplicatedKillInFlight(t *testing.T) {
	c := newRepCluster(t)
	for i := 0; i < 5; i++ { // a serving leader first
		c.publish(fmt.Sprintf("w%d", i))
	}
	old := c.leader()
	var mu sync.Mutex
	confirmed := map[string]broker.Position{}
	var wg sync.WaitGroup
	late := 0 // confirms of publishes sent after the cut
	send := func(data string, afterCut bool) {
		wg.Add(1)
		err := old.topic.PublishAsync(broker.Message{Subject: "orders", Data: []byte(data)}, func(pos broker.Position, err error) {
			defer wg.Done()
			if err == nil {
				mu.Lock()
				confirmed[data] = pos
				if afterCut {
					late++
				}
				mu.Unlock()
			}
		})
		if err != nil {
			wg.Done()
			if !errors.Is(err, broker.ErrQueueFull) {
				t.Fatalf("publish %s: %v", data, err)
			}
		}
	}
	for i := 0; i < 200; i++ {
		send(fmt.Sprintf("f%04d", i), false)
	}
	wg.Wait()                    // the first ones answered
	for i := 200; i < 300; i++ { // and more in flight when the cut comes
		send(fmt.Sprintf("f%04d", i), false)
	}
	c.mu.Lock()
	for _, net := range c.nets {
		net.cutOff(old.id)
	}
	c.mu.Unlock()
	for i := 300; i < 400; i++ {
		send(fmt.Sprintf("f%04d", i), true)
	}
	// Give a broken build the time to confirm what cannot commit
	// (nothing here depends on it for a correct one).
	for i := 0; i < 100; i++ {
		mu.Lock()
		l := late
		mu.Unlock()
		if l > 0 {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	c.crash(old.id)
	wg.Wait() // every callback ran: confirmed or failed
	t.Logf("%d of 400 publishes confirmed, %d after the cut", len(confirmed), late)
	if late > 0 {
		t.Fatalf("%d publishes confirmed after the leader was cut off from its quorum", late)
	}
	if len(confirmed) == 0 {
		t.Fatal("nothing confirmed before the crash: the test shows nothing")
	}
	lead := c.leader()
	check := func(who string, log seglog.Store) {
		t.Helper()
		for data, pos := range confirmed {
			r, err := log.Read(pos.Seq)
			if err != nil || string(r.Data) != data {
				t.Fatalf("%s at %d: %q %v, want confirmed %s", who, pos.Seq, r.Data, err, data)
			}
		}
	}
	check("new leader", lead.pair.Data())
	// A publish to the new leader lands after everything it holds.
	pos := c.publish("after")
	for _, p := range confirmed {
		if p.Seq >= pos.Seq {
			t.Fatalf("new publish at %d, not after confirmed %d", pos.Seq, p.Seq)
		}
	}
	back := c.start(old.id)
	deadline := time.Now().Add(30 * time.Second)
	for back.pair.Data().Durable() < pos.Seq {
		if time.Now().After(deadline) {
			t.Fatalf("the old leader holds data to %d, want %d", back.pair.Data().Durable(), pos.Seq)
		}
		time.Sleep(2 * time.Millisecond)
	}
	check("old leader", back.pair.Data())
}

// TestReplicatedRefusals: what a replicated partition does not support
// yet is refused at once with ErrInvalid: an opener of both kinds, and
// a compressed topic on replicated logs.
func TestReplicatedRefusals(t *testing.T) {
	memOpener := func(dir string, _ seglog.Policy, _ []string) (broker.PartitionLogs, error) {
		return broker.PartitionLogs{Data: seglog.NewMemStore(), Events: seglog.NewMemStore(), Replica: alwaysServing{}}, nil
	}
	t.Run("both openers", func(t *testing.T) {
		_, err := broker.Open(t.TempDir(), broker.Options{OpenPartition: memOpener,
			OpenStore: func(string, seglog.Policy) (seglog.Store, error) { return seglog.NewMemStore(), nil }})
		if !errors.Is(err, broker.ErrInvalid) {
			t.Fatalf("got %v, want ErrInvalid", err)
		}
	})
	t.Run("compressed topic", func(t *testing.T) {
		b, err := broker.Open(t.TempDir(), broker.Options{OpenPartition: memOpener})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		if _, err := b.CreateTopic("z", broker.TopicConfig{Partitions: 1, Compression: broker.CompressionS2}); !errors.Is(err, broker.ErrInvalid) {
			t.Fatalf("got %v, want ErrInvalid", err)
		}
		if _, err := b.CreateTopic("plain", broker.TopicConfig{Partitions: 1}); err != nil {
			t.Fatalf("a plain topic on the same opener: %v", err)
		}
	})
}

// alwaysServing is a Replica that always serves and writes no state
// file (the in-memory logs of TestReplicatedRefusals need none).
type alwaysServing struct{}

func (alwaysServing) Serving() (bool, uint64)         { return true, 1 }
func (alwaysServing) Notify(func())                   {}
func (alwaysServing) WriteState(string, []byte) error { return nil }

// place makes node to the server of partition idx: once the partition
// has a leader, leadership is transferred to to.
func (c *repCluster) place(idx int, to uint64) {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if ok, _ := c.nodes[to].partPair(idx).Serving(); ok {
			return
		}
		for id, n := range c.nodes {
			if ok, _ := n.partPair(idx).Serving(); ok && id != to {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_ = n.partPair(idx).Group().TransferLeadership(ctx, to) // retried until it holds
				cancel()
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	c.t.Fatalf("partition %d never served by node %d", idx, to)
}

// TestReplicatedPartitionsLedApart: a topic whose partitions are served
// by different nodes. A waiting poll on node 1 is answered by the
// partition it serves once a message arrives there, not failed because
// the other is served elsewhere; a poll's tour passes by a partition
// served elsewhere even when this node holds messages of it (node 1
// restarted, so it loaded them from its logs); a node serving none
// answers ErrNotLeader; a publish is confirmed only by the node serving
// its partition.
func TestReplicatedPartitionsLedApart(t *testing.T) {
	c := newRepClusterN(t, 2)
	c.place(0, 1)
	c.place(1, 2)
	type result struct {
		ds  []broker.Delivery
		err error
	}
	first := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		ds, err := c.nodes[1].group.Poll(ctx, 100)
		first <- result{ds, err}
	}()
	published := map[broker.Partition]int{}
	for i := 0; published[0] < 5 || published[1] < 5; i++ {
		if i > 1000 {
			t.Fatalf("published %v", published)
		}
		for _, id := range []uint64{2, 1} { // partition 1 first: the waiting poll must not take it
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			pos, err := c.nodes[id].topic.Publish(ctx, broker.Message{Subject: "orders", Data: []byte(fmt.Sprintf("n%d-%d", id, i))})
			cancel()
			switch {
			case err == nil:
				if want := broker.Partition(id - 1); pos.Partition != want {
					t.Fatalf("node %d confirmed a publish to partition %d, which it does not serve", id, pos.Partition)
				}
				published[pos.Partition]++
			case errors.Is(err, broker.ErrNotLeader):
			default:
				t.Fatalf("publish on node %d: %v", id, err)
			}
		}
	}
	onlyPart0 := func(ds []broker.Delivery) {
		t.Helper()
		for _, d := range ds {
			if d.Handle.Partition != 0 {
				t.Fatalf("node 1 delivered %s from partition %d, which node 2 serves", d.Data, d.Handle.Partition)
			}
		}
	}
	r := <-first
	if r.err != nil || len(r.ds) == 0 {
		t.Fatalf("waiting poll on node 1: %d deliveries, %v", len(r.ds), r.err)
	}
	onlyPart0(r.ds)
	c.crash(1)
	c.start(1)
	c.place(0, 1)
	c.place(1, 2)
	// The first poll's deliveries stay leased across the crash
	// (evLease): the rest come back.
	got := 0
	for got < published[0]-len(r.ds) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ds, err := c.nodes[1].group.Poll(ctx, 100)
		cancel()
		if err != nil {
			t.Fatalf("poll on node 1 after %d of %d: %v", got, published[0]-len(r.ds), err)
		}
		onlyPart0(ds)
		got += len(ds)
	}
	if ok, _ := c.nodes[3].partPair(0).Serving(); !ok {
		if ok, _ := c.nodes[3].partPair(1).Serving(); !ok {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := c.nodes[3].group.Poll(ctx, 10); !errors.Is(err, broker.ErrNotLeader) {
				t.Fatalf("poll on node 3, serving nothing: %v, want ErrNotLeader", err)
			}
		}
	}
}

// TestReplicatedRepeatedFailover: several cycles of publish (confirmed),
// poll and ack some, crash the serving node and start it again on its
// directory. At the end the serving node's consumer receives exactly
// the confirmed messages no answered ack settled: nothing confirmed is
// lost and no answered ack undone across every failover.
func TestReplicatedRepeatedFailover(t *testing.T) {
	c := newRepCluster(t)
	confirmed := map[string]broker.Position{}
	a := acks{done: map[string]bool{}, unknown: map[string]bool{}}
	const cycles = 6
	for cycle := 0; cycle < cycles; cycle++ {
		for i := 0; i < 15; i++ {
			data := fmt.Sprintf("c%d-%02d", cycle, i)
			confirmed[data] = c.publish(data)
		}
		for data, d := range pollAll(t, c, 1) {
			if !a.done[data] && data[len(data)-1]%2 == 0 {
				a.ack(t, data, d)
			}
		}
		old := c.leader()
		c.crash(old.id)
		c.leader() // the others elect one
		c.start(old.id)
	}
	want := 0
	for data := range confirmed {
		if !a.done[data] && !a.unknown[data] {
			want++
		}
	}
	got := pollAll(t, c, want)
	for data := range got {
		if a.done[data] {
			t.Errorf("acked message %s delivered again", data)
		}
		if _, ok := confirmed[data]; !ok {
			t.Errorf("unexpected message %s", data)
		}
	}
	for data := range confirmed {
		if _, ok := got[data]; !ok && !a.done[data] && !a.unknown[data] {
			t.Errorf("confirmed, unacked message %s lost", data)
		}
	}
	if len(a.done) == 0 {
		t.Fatal("no ack was answered: the test shows nothing")
	}
}

// TestReplicatedFullRestart: every node closes (the serving one first,
// so its last snapshot is replicated while a quorum is up) and all start
// again on their directories: the logs replay from their applied marks,
// a leader is elected and rebuilds the state, and its consumer gets
// exactly the confirmed messages not acked.
func TestReplicatedFullRestart(t *testing.T) {
	c := newRepCluster(t)
	confirmed := map[string]broker.Position{}
	for i := 0; i < 40; i++ {
		data := fmt.Sprintf("r%02d", i)
		confirmed[data] = c.publish(data)
	}
	a := acks{done: map[string]bool{}, unknown: map[string]bool{}}
	for data, d := range pollAll(t, c, len(confirmed)) {
		if data[len(data)-1]%4 == 0 {
			a.ack(t, data, d)
		}
	}
	lead := c.leader()
	order := []uint64{lead.id}
	for id := range c.nodes {
		if id != lead.id {
			order = append(order, id)
		}
	}
	for _, id := range order {
		if err := c.nodes[id].b.Close(); err != nil {
			t.Fatalf("close node %d: %v", id, err)
		}
		c.mu.Lock()
		for _, net := range c.nets {
			net.set(id, nil)
		}
		c.mu.Unlock()
		delete(c.nodes, id)
	}
	for _, id := range order {
		c.start(id)
	}
	got := pollAll(t, c, len(confirmed)-len(a.done)-len(a.unknown))
	for data := range got {
		if a.done[data] {
			t.Errorf("acked message %s delivered again after the restart", data)
		}
	}
	for data := range confirmed {
		if _, ok := got[data]; !ok && !a.done[data] && !a.unknown[data] {
			t.Errorf("confirmed, unacked message %s lost in the restart", data)
		}
	}
	if len(a.done) == 0 {
		t.Fatal("no ack was answered: the test shows nothing")
	}
}

// BenchmarkReplicatedPublish: 1 KiB publishes with confirms, up to 512
// in flight, on the serving node of three in one process (each confirm
// a commit on a quorum of raft logs, fsynced), against one broker on its
// file logs (each confirm an fsync).
func BenchmarkReplicatedPublish(b *testing.B) {
	run := func(b *testing.B, topic *broker.Topic) {
		body := make([]byte, 1024)
		sem := make(chan struct{}, 512)
		var wg sync.WaitGroup
		var failed sync.Map
		b.SetBytes(int64(len(body)))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			sem <- struct{}{}
			wg.Add(1)
			err := topic.PublishAsync(broker.Message{Subject: "orders", Data: body}, func(_ broker.Position, err error) {
				if err != nil {
					failed.Store(err.Error(), true)
				}
				<-sem
				wg.Done()
			})
			if err != nil {
				<-sem
				wg.Done()
				i-- // queue full: try again
			}
		}
		wg.Wait()
		b.StopTimer()
		failed.Range(func(k, _ any) bool { b.Fatalf("publish: %v", k); return false })
	}
	b.Run("replicated", func(b *testing.B) {
		c := newRepClusterWith(b, 1, 64<<20)
		c.publish("warm")
		run(b, c.leader().topic)
	})
	b.Run("single", func(b *testing.B) {
		br, err := broker.Open(b.TempDir(), broker.Options{SegmentSize: 64 << 20})
		if err != nil {
			b.Fatal(err)
		}
		defer br.Close()
		topic, err := br.CreateTopic("orders", broker.TopicConfig{Partitions: 1})
		if err != nil {
			b.Fatal(err)
		}
		run(b, topic)
	})
}

// TestReplicatedLeaseKeptAcrossFailover: deliveries in flight when the
// leader crashes stay leased on the new leader until their leases end
// (evLease): a poll there gets none of them, and the first consumer's
// acks, sent to the new leader, settle them.
func TestReplicatedLeaseKeptAcrossFailover(t *testing.T) {
	c := newRepClusterLease(t, 1, seglog.MinSegmentSize, 60000)
	const n = 10
	for i := range n {
		c.publish(fmt.Sprintf("m%02d", i))
	}
	ds := pollAll(t, c, n) // leased for 60 s
	if len(ds) != n {
		t.Fatalf("first consumer got %d, want %d", len(ds), n)
	}
	old := c.leader()
	c.crash(old.id)
	lead := c.leader()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	again, _ := lead.group.Poll(ctx, 64)
	cancel()
	if len(again) != 0 {
		t.Fatalf("the new leader delivered %d messages still leased to the first consumer", len(again))
	}
	for data, d := range ds {
		errc := make(chan error, 1)
		if err := lead.b.Settle(d.Handle, broker.Ack(), func(err error) { errc <- err }); err != nil {
			t.Fatalf("ack %s on the new leader: %v", data, err)
		}
		if err := <-errc; err != nil {
			t.Fatalf("ack %s on the new leader: %v", data, err)
		}
	}
	info, err := lead.group.InfoCurrent(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.Inflight != 0 || info.Ready != 0 {
		t.Fatalf("after the acks: inflight %d, ready %d", info.Inflight, info.Ready)
	}
}
