package server

// Forwarding (SPEC.md 11.2): in a cluster, a publish for a partition
// this node does not serve, and a settle of a delivery whose partition
// another node serves, go to the node that serves it over a forwarding
// connection (package forward) as the user who sent them, after this
// node checked their permissions; the answer fills the command's slot,
// so answers stay in command order. A forwarding connection's own
// commands are never forwarded again: they are answered not_leader
// (retriable) when leadership moved meanwhile.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"sync"
	"time"

	"github.com/fibrilmq/fibril/protocol"
	"github.com/fibrilmq/fibril/server/broker"
	"github.com/fibrilmq/fibril/server/cluster"
	"github.com/fibrilmq/fibril/server/clusternode"
	"github.com/fibrilmq/fibril/server/forward"
	"github.com/fibrilmq/fibril/server/metacat"
)

// forwardTargets maps a raft ID to the node's forwarding target.
type forwardTargets map[uint64]forward.Target

func targetsOf(nodes map[string]metacat.NodeInfo) forwardTargets {
	out := forwardTargets{}
	for name, info := range nodes {
		if info.Forward != "" {
			out[cluster.NodeID(name)] = forward.Target{Node: name, Addr: info.Client, Token: info.Forward}
		}
	}
	return out
}

// forwardTo returns where partition idx of t is served, or a retriable
// not_leader error when no other node is known to lead it.
func (s *Server) forwardTo(t *broker.Topic, idx broker.Partition) (forward.Target, error) {
	cs := s.cluster
	if heldElsewhere(t, idx) {
		return s.guessHolder(t, idx) // forward_holders.go
	}
	g := cs.node.Raft().Group(clusternode.GroupOf(t.ID(), int(idx)))
	lead := uint64(0)
	if g != nil {
		lead = g.Leader()
	}
	notLeader := func(why string) error {
		return protocol.NewError(protocol.CodeNotLeader, fmt.Sprintf("topic %s partition %d: %s", t.Name(), idx, why))
	}
	switch {
	case lead == 0:
		return forward.Target{}, notLeader("no leader elected yet")
	case lead == cs.node.Raft().ID():
		return forward.Target{}, notLeader("this node leads it and is catching up")
	}
	if tm := cs.targets.Load(); tm != nil {
		if tg, ok := (*tm)[lead]; ok {
			return tg, nil
		}
	}
	return forward.Target{}, notLeader("its leader has not announced its address yet")
}

// forwardErr is the answer error of a forwarding failure.
func forwardErr(err error) error {
	var pe *protocol.Error
	switch {
	case errors.As(err, &pe):
		return err
	case errors.Is(err, forward.ErrBusy):
		return protocol.NewError(protocol.CodeQueueFull, err.Error())
	default:
		return protocol.NewError(protocol.CodeNotLeader, err.Error())
	}
}

// answerErr turns a forwarded -ERR line into the error it names.
func answerErr(line []byte) error {
	text := line
	if len(text) > 5 {
		text = text[5:] // "-ERR "
	}
	if pe := protocol.ParseErrText(text); pe != nil {
		return pe
	}
	return protocol.NewError(protocol.CodeInternal, string(line))
}

// forwardWindow is how many of a client's publish windows one forwarding
// connection may hold unanswered (the clients of one user share it).
const forwardWindow = 16

// publishWindow is c's publish window: max_unconfirmed, times
// forwardWindow for a forwarding node's connection (bounded all the
// same).
func (c *client) publishWindow() int {
	if c.login.forwarded {
		return c.srv.opts.MaxUnconfirmed * forwardWindow
	}
	return c.srv.opts.MaxUnconfirmed
}

// mayForward reports whether c's commands for partitions served elsewhere
// are forwarded: in a cluster, from a client (not a forwarding node).
func (c *client) mayForward() bool { return c.srv.cluster != nil && !c.login.forwarded }

// forwardPublish sends msg to the node serving partition idx of t; the
// answer fills slot and answers req as a local store would.
func (c *client) forwardPublish(t *broker.Topic, idx broker.Partition, msg broker.Message, slot *answer, req reqReply) {
	fail := func(err error) {
		if slot == nil {
			c.log.Debug("unconfirmed durable publish not forwarded", "subject", msg.Subject, "err", err)
		}
		c.finishConfirm(slot, c.errAnswer(err))
		req.stored(c, t.Name(), broker.Position{}, err)
	}
	if msg.CRC != 0 && crc32.Update(crc32.ChecksumIEEE(msg.Header), crc32.IEEETable, msg.Data) != msg.CRC {
		fail(fmt.Errorf("publish to %s: %w", t.Name(), broker.ErrCRCMismatch))
		return
	}
	var cmd []byte
	if len(msg.Header) > 0 {
		cmd = protocol.AppendHPub(nil, msg.Subject, "", msg.Header, msg.Data, protocol.NoCRC)
	} else {
		cmd = protocol.AppendPub(nil, msg.Subject, "", msg.Data, protocol.NoCRC)
	}
	c.sendToPartition(t, idx, "", cmd, func(line []byte, _ []forward.Msg, err error) {
		if err != nil {
			fail(forwardErr(err))
			return
		}
		if line[0] == '-' {
			fail(answerErr(line))
			return
		}
		p, stored, perr := protocol.ParseConfirm(bytes.TrimPrefix(line, []byte("+OK")))
		if perr != nil || !stored {
			fail(protocol.NewError(protocol.CodeInternal, fmt.Sprintf("forwarded publish answered %q", line)))
			return
		}
		pos := broker.Position{Partition: broker.Partition(p.Partition), Seq: broker.Seq(p.Seq), Duplicate: p.Duplicate}
		c.confirmed(slot, pos, nil)
		req.stored(c, t.Name(), pos, nil)
	})
}

// forwardSettle sends a settle of h to the node serving its partition.
func (c *client) forwardSettle(t *broker.Topic, h broker.Handle, op broker.SettleOp, done func(error)) {
	wh := toWireHandle(h)
	var cmd []byte
	switch op.Kind {
	case broker.SettleAck:
		cmd = protocol.AppendAck(nil, wh)
	case broker.SettleNack:
		cmd = protocol.AppendNack(nil, wh, op.Delay.Milliseconds())
	case broker.SettleReject:
		cmd = protocol.AppendReject(nil, wh)
	case broker.SettleExtend:
		cmd = protocol.AppendExtend(nil, wh, op.Delay.Milliseconds())
	default:
		done(fmt.Errorf("%w: settle kind %d", broker.ErrInvalid, op.Kind))
		return
	}
	c.sendToPartition(t, h.Partition, "", cmd, func(line []byte, _ []forward.Msg, err error) {
		switch {
		case err != nil:
			done(forwardErr(err))
		case line[0] == '-':
			done(answerErr(line))
		default:
			done(nil)
		}
	})
}

// forwardTag is the tag of c's own forwarding connections (its POLLs',
// closed with it: forwardClosed).
func (c *client) forwardTag() string { return "c" + strconv.FormatUint(c.id, 10) }

// forwardClosed ends c's own forwarding connections: the leases their
// POLLs took on other nodes end at once, as c's own do here.
func (s *Server) forwardClosed(c *client) {
	if s.forwards != nil {
		s.forwards.CloseTag(c.forwardTag())
	}
}

// forwardPoll sends a POLL that no partition served here could take to
// the node leading one of t's partitions (in turn), on c's own
// forwarding connection, and answers slot with what it delivers,
// encoded for c. Deliveries that cannot be written (c cut, closing) stay
// leased on that node until c's forwarding connection closes with c.
func (c *client) forwardPoll(t *broker.Topic, group string, most int, wait time.Duration, slot *answer, crc, headers bool) {
	idx := broker.Partition(c.pollTurn.Add(1) % uint32(max(1, t.Config().Partitions)))
	c.forwardPollTo(t, idx, group, most, wait, slot, crc, headers)
}

// pollElsewhere picks, for a POLL of t from a client in a cluster where
// this node serves some of t's partitions but not all, whether this turn
// goes to the leader of partition idx instead of the partitions served
// here: the turns go round the partitions, so a consumer on any node
// drains every partition (a POLL here takes only those served here).
func (c *client) pollElsewhere(t *broker.Topic) (idx broker.Partition, remote bool) {
	n := t.Config().Partitions
	if !c.mayForward() || n < 2 {
		return 0, false
	}
	served := 0
	for i := range n {
		if t.Served(broker.Partition(i)) {
			served++
		}
	}
	if served == 0 || served == n {
		return 0, false // none: the POLL is answered not_leader and forwarded; all: nothing elsewhere
	}
	idx = broker.Partition(c.pollTurn.Add(1) % uint32(n))
	return idx, !t.Served(idx)
}

// forwardPollTo is forwardPoll to the leader of partition idx.
func (c *client) forwardPollTo(t *broker.Topic, idx broker.Partition, group string, most int, wait time.Duration, slot *answer, crc, headers bool) {
	cmd := protocol.AppendPoll(nil, string(t.Name()), group, most, wait.Milliseconds())
	c.sendToPartition(t, idx, c.forwardTag(), cmd, func(line []byte, msgs []forward.Msg, err error) {
		switch {
		case err != nil:
			c.complete(slot, c.errAnswer(forwardErr(err)))
			return
		case line[0] == '-':
			c.complete(slot, c.errAnswer(answerErr(line)))
			return
		}
		ds := make([]broker.Delivery, 0, len(msgs))
		for _, m := range msgs {
			wh, perr := protocol.ParseHandle([]byte(m.Reply))
			h, ok := toBrokerHandle(wh)
			if perr != nil || !ok {
				c.complete(slot, c.errLine(protocol.CodeInternal, fmt.Sprintf("forwarded delivery with handle %q", m.Reply)))
				return
			}
			ds = append(ds, broker.Delivery{Handle: h, Subject: m.Subject, Header: m.Header, Data: m.Data, Attempt: h.Attempt,
				CRC: crc32.Update(crc32.ChecksumIEEE(m.Header), crc32.IEEETable, m.Data)})
		}
		if c.wouldPassPending(pollAnswerSize(ds)) {
			c.slowConsumer(c.overReason())
			return
		}
		c.countOutMsgs(len(ds))
		var q chunks
		for i := range ds {
			q.appendDelivery(&c.srv.outBufs, deliverySize(&ds[i]), &ds[i], "0", crc, headers)
		}
		q.commit(protocol.AppendPollDone(q.room(&c.srv.outBufs, pollDoneSize), len(ds)))
		c.completeOwned(slot, &q)
	})
}

// catalogTimeout bounds a lookup's wait for the cluster's catalog.
const catalogTimeout = 2 * time.Second

// catalogCaughtUp waits (bounded) until this node applied every catalog
// change committed before the call, so a topic or group made on another
// node a moment ago is found here (read your writes across nodes); it
// reports whether it did. Lane only: it blocks. False on a single node.
func (s *Server) catalogCaughtUp() bool {
	if s.cluster == nil {
		return false
	}
	g := s.cluster.node.Raft().Group(cluster.MetaGroup)
	if g == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), catalogTimeout)
	defer cancel()
	_, err := g.ReadIndex(ctx)
	return err == nil
}

// catalogMissing reports whether a management verb names a topic (or
// group) this node does not hold: in a cluster it is looked up again
// after catalogCaughtUp.
func catalogMissing(b *broker.Broker, op protocol.Op, name, group string) bool {
	switch op {
	case protocol.OpTopicCreate, protocol.OpTopicList:
		return false
	}
	t, ok := b.Topic(broker.TopicName(name))
	if !ok {
		return true
	}
	switch op {
	case protocol.OpGroupInfo, protocol.OpGroupDelete:
		_, ok := t.FindGroup(broker.GroupName(group))
		return !ok
	}
	return false
}

// pushEvery is how often a forwarded durable SUB looks for the leaders
// of the partitions this node does not serve.
const pushEvery = 250 * time.Millisecond

// remotePush carries a durable SUB to the leaders of the partitions its
// node does not serve: one subscription on each such leader, each on a
// forwarding connection of its own (tagged for this client, SUB and
// node), whose deliveries are queued for the client as local ones are.
// Every pushEvery it follows leadership: it subscribes on a node that
// came to lead such a partition and drops a node that no longer does.
// It ends with the SUB (stop), closing its connections, so the leases
// they hold end at once on those nodes.
type remotePush struct {
	c                        *client
	t                        *broker.Topic
	group, sid               string
	max                      int
	crc, headers, ackOnWrite bool
	subOK                    *answer
	stopc                    chan struct{}
	once                     sync.Once

	mu    sync.Mutex
	nodes map[string]bool // subscribed (or subscribing) on these nodes
}

func (c *client) startRemotePush(t *broker.Topic, group, sid string, max int, crc, headers, ackOnWrite bool, subOK *answer) *remotePush {
	rp := &remotePush{c: c, t: t, group: group, sid: sid, max: max, crc: crc, headers: headers, ackOnWrite: ackOnWrite,
		subOK: subOK, stopc: make(chan struct{}), nodes: map[string]bool{}}
	go rp.run()
	return rp
}

func (rp *remotePush) stop() { rp.once.Do(func() { close(rp.stopc) }) }

func (rp *remotePush) tag(node string) string {
	return rp.c.forwardTag() + "/s" + rp.sid + "/" + node
}

func (rp *remotePush) run() {
	tick := time.NewTicker(pushEvery)
	defer tick.Stop()
	for {
		rp.follow()
		select {
		case <-rp.stopc:
			rp.c.srv.forwards.CloseTag(rp.c.forwardTag() + "/s" + rp.sid)
			return
		case <-rp.c.ctx.Done():
			return // forwardClosed closes the connections
		case <-tick.C:
		}
	}
}

// follow subscribes on each node now leading a partition not served here
// (on every holder of a partition held elsewhere) and drops the others.
func (rp *remotePush) follow() {
	want := map[string]forward.Target{}
	for i := range rp.t.Config().Partitions {
		idx := broker.Partition(i)
		if rp.t.Served(idx) {
			continue
		}
		if heldElsewhere(rp.t, idx) {
			// No group here to tell its leader: a subscription on each
			// holder, of which the leader delivers (a follower's waits
			// and delivers once it leads).
			holders := rp.t.Holders(idx)
			for k := range holders {
				if tg, err := rp.c.srv.holderTarget(rp.t, idx, holders, k); err == nil {
					want[tg.Node] = tg
				}
			}
			continue
		}
		if tg, err := rp.c.srv.forwardTo(rp.t, idx); err == nil {
			want[tg.Node] = tg
		}
	}
	rp.mu.Lock()
	var drop []string
	for node := range rp.nodes {
		if _, ok := want[node]; !ok {
			drop = append(drop, node)
			delete(rp.nodes, node)
		}
	}
	var add []forward.Target
	for node, tg := range want {
		if !rp.nodes[node] {
			rp.nodes[node] = true
			add = append(add, tg)
		}
	}
	rp.mu.Unlock()
	for _, node := range drop {
		rp.c.srv.forwards.CloseTag(rp.tag(node))
	}
	for _, tg := range add {
		node := tg.Node
		cmd := protocol.AppendSub(nil, string(rp.t.Name()), rp.group, rp.sid, rp.max)
		rp.c.srv.forwards.Subscribe(tg, rp.c.login.user, rp.tag(node), cmd, rp.push, func(line []byte, _ []forward.Msg, err error) {
			if err == nil && line[0] == '+' {
				return
			}
			// Refused or lost: the next follow subscribes again.
			rp.c.log.Debug("forwarded durable SUB ended", "node", node, "answer", string(line), "err", err)
			rp.mu.Lock()
			delete(rp.nodes, node)
			rp.mu.Unlock()
			rp.c.srv.forwards.CloseTag(rp.tag(node))
		})
	}
}

// push queues one delivery a leader pushed for the client.
func (rp *remotePush) push(m forward.Msg) {
	wh, err := protocol.ParseHandle([]byte(m.Reply))
	h, ok := toBrokerHandle(wh)
	if err != nil || !ok {
		rp.c.log.Warn("forwarded delivery with a bad handle", "handle", m.Reply)
		return
	}
	d := broker.Delivery{Handle: h, Subject: m.Subject, Header: m.Header, Data: m.Data, Attempt: h.Attempt,
		CRC: crc32.Update(crc32.ChecksumIEEE(m.Header), crc32.IEEETable, m.Data)}
	if rp.c.queueDurable(&d, rp.sid, rp.crc, rp.headers, rp.ackOnWrite, rp.subOK) {
		rp.c.countOutMsgs(1)
	}
}

// forwardGroupInfo sends GROUP INFO to the leader of the topic's first
// partition when this node serves none of its partitions (a group's
// state lives where its partitions are served), after the same
// permission check; it reports whether it did. A topic whose partitions
// are led by several nodes is described from here (each partition by
// the node that serves it: the others show what this node last knew).
func (c *client) forwardGroupInfo(topic, group string, slot *answer) bool {
	if !c.mayForward() {
		return false
	}
	t, ok := c.srv.durable.b.Topic(broker.TopicName(topic))
	if !ok || !c.login.perms.SeeTopic(accessTopic(t)) {
		return false // answered here: unknown_topic or permission_denied
	}
	for i := range t.Config().Partitions {
		if t.Served(broker.Partition(i)) {
			return false
		}
	}
	tg, err := c.srv.forwardTo(t, 0)
	if err != nil {
		return false
	}
	c.srv.forwards.Send(tg, c.login.user, "", protocol.AppendGroupInfo(nil, topic, group), func(line []byte, _ []forward.Msg, err error) {
		if err != nil {
			c.complete(slot, c.errAnswer(forwardErr(err)))
			return
		}
		c.complete(slot, append(line, '\r', '\n'))
	})
	return true
}
