package server

// SPEC.md "PUB/HPUB" (durable capture, confirms, the publish window,
// auto-create). A PUB to an ack handle subject is settled in
// handle_settle.go ("Settling by PUB to a handle").
//
// A PUB whose subject a topic captures is handed to the topic's partition
// ring without blocking; its confirm (`+OK <partition>:<seq>`) fills its
// answer slot when the partition actor reports durability, so confirms
// leave in command order even though partitions finish out of order.
// Creating a topic touches the disk, so auto-create runs on the lane
// (lane.go); while it runs, this connection's later durable commands wait
// (copied) behind it to keep their order.

import (
	"bytes"
	"errors"
	"strconv"

	"github.com/fibrilmq/fibril/protocol"
	"github.com/fibrilmq/fibril/server/broker"
	"github.com/fibrilmq/fibril/server/stagetime"
)

// natsExpected starts JetStream's Nats-Expected-* publish headers.
var natsExpected = []byte("\r\nNats-Expected-")

// publishDurable delivers m to plain subscribers, then stores it when a
// topic captures (or may be created for) its subject, and answers it.
func (c *client) publishDurable(m *pubMsg) {
	recv := c.stage.pub(c.srv.stages())
	c.srv.stages().Since(stagetime.Parsed, recv)
	// A forwarded publish was delivered to plain subscribers where it was
	// sent (forwarding.go).
	delivered := !c.login.forwarded && c.fanOut(m) > 0
	slot, ok, busy := c.reserveConfirm()
	if !ok {
		return
	}
	if slot != nil {
		slot.recv = recv
	}
	// A NATS-mode request is answered like a JetStream publish when a
	// topic stores it, with 503 when nobody receives it (handle_noresp.go).
	req := reqReply{subject: m.subject}
	if m.reply != "" && !c.modes.strict.Load() {
		req.reply = m.reply
		req.noResp = !delivered && c.wantsNoResponders() && c.srv.cluster == nil // a cluster's subscriber may be elsewhere
	}
	msg := broker.Message{Subject: m.subject, Data: m.body[m.hdrLen:], Received: recv}
	if m.hdrLen > 0 && bytes.Contains(m.body[:m.hdrLen], natsExpected) {
		// JetStream's conditional-publish headers, checked by the engine
		// in either mode (handle_expected.go); one it does not check is
		// refused rather than stored unchecked.
		x := expectedHeaders(m.body[:m.hdrLen])
		if x.bad != "" {
			c.finishConfirm(slot, c.errLine(protocol.CodeInvalidHeader, "not checked by Fibril: "+x.bad))
			if req.reply != "" {
				c.queueReply(req.reply, appendExpectBad(nil, x.bad))
			}
			return
		}
		x.apply(&msg)
	}
	if m.hdrLen > 0 {
		msg.Header = m.body[:m.hdrLen]
		if k, ok := protocol.HeaderValue(msg.Header, "Fibril-Key"); ok {
			msg.Key = k
		}
	}
	if !busy {
		// Fast path on the input goroutine: PublishAsync copies msg.
		if t := c.srv.durable.b.Route(m.subject); t != nil {
			c.publishTo(t, msg, slot, req, false)
			return
		}
		// In a cluster a confirmed publish no topic captures here looks
		// again on the lane (storeRouted): the topic may have been made on
		// another node a moment ago.
		if !c.srv.autoCreatable(m.subject) && (slot == nil || c.srv.cluster == nil) {
			c.finishConfirm(slot, okNone)
			req.notStored(c)
			return
		}
	}
	own := clonePub(msg)
	fn := func(onLane bool) {
		if !onLane {
			c.toLane(func(bool) { c.storeRouted(own, slot, req) })
			return
		}
		c.storeRouted(own, slot, req)
	}
	if slot == nil {
		c.serialOrStall(fn) // no answer to refuse with: wait, never drop
		return
	}
	if !c.serial(fn) {
		c.finishConfirm(slot, c.errLine(protocol.CodeQueueFull, "too many commands waiting"))
	}
}

// storeRouted runs on the lane: it routes msg, auto-creating its topic when
// allowed, and stores it (or answers "+OK -" when no topic captures it).
func (c *client) storeRouted(msg broker.Message, slot *answer, req reqReply) {
	b := c.srv.durable.b
	t := b.Route(msg.Subject)
	if t == nil && slot != nil && c.srv.catalogCaughtUp() {
		t = b.Route(msg.Subject)
	}
	if t == nil && c.srv.autoCreatable(msg.Subject) {
		var err error
		t, err = b.CreateTopic(broker.TopicName(msg.Subject), autoTopicConfig())
		if err != nil {
			// Lost a race with another creator, or an overlap: route again.
			if t = b.Route(msg.Subject); t == nil {
				c.log.Info("auto-create topic failed", "subject", msg.Subject, "err", err)
			}
		} else {
			c.log.Info("auto-created topic", "topic", msg.Subject)
		}
	}
	if t == nil {
		c.finishConfirm(slot, okNone)
		req.notStored(c)
		return
	}
	c.publishTo(t, msg, slot, req, true)
}

// reserveConfirm takes an answer slot for a confirming connection, inside
// the publish window. It returns (nil, true) when no confirm is wanted and
// (nil, false) when the window is full (the command is then answered).
// laneBusy is read after, under the outbox lock: the lane goroutine only
// ever clears it, so a stale true sends the publish through serial, which
// looks again.
func (c *client) reserveConfirm() (slot *answer, ok, laneBusy bool) {
	if !c.confirming() {
		if c.modes.opts.Verbose {
			c.answerNow(okLine)
		}
		c.mu.Lock()
		laneBusy = c.lane.busy
		c.mu.Unlock()
		return nil, true, laneBusy
	}
	c.answers.mu.Lock()
	a, ok := c.answers.reserveConfirmLocked(c, c.publishWindow())
	c.answers.mu.Unlock()
	if !ok {
		c.reject(protocol.CodeMaxUnconfirmed, "window "+strconv.Itoa(c.publishWindow()))
		return nil, false, false
	}
	c.mu.Lock()
	laneBusy = c.lane.busy
	c.mu.Unlock()
	return a, true, laneBusy
}

// finishConfirm fills a confirm slot and reopens one place in the window.
func (c *client) finishConfirm(slot *answer, data []byte) {
	if slot == nil {
		return
	}
	c.fill(slot, data, true)
}

// publishTo hands msg to t without blocking; the confirm fills slot. When
// the partition ring is full, or the topic is full and its policy is
// block, the publish waits on the lane (onLane: it already runs there)
// until there is room or the connection closes, holding back this
// connection's later durable commands: the publish window then stops the
// publisher instead of dropping or refusing.
func (c *client) publishTo(t *broker.Topic, msg broker.Message, slot *answer, req reqReply, onLane bool) {
	if c.mayForward() {
		if idx, here := t.PublishTarget(msg); !here {
			c.forwardPublish(t, idx, msg, slot, req)
			return
		}
	}
	var err error
	if slot != nil {
		err = t.PublishAsyncTo(msg, slot) // the slot is the completion: no closure per publish
	} else {
		err = t.PublishAsync(msg, c.confirmer(t.Name(), req, nil))
	}
	if err == nil {
		return
	}
	wait := errors.Is(err, broker.ErrQueueFull) ||
		(errors.Is(err, broker.ErrTopicFull) && t.Config().FullPolicy != broker.FullReject)
	if !wait {
		if slot == nil {
			c.log.Debug("unconfirmed durable publish refused", "subject", msg.Subject, "err", err)
		}
		c.finishConfirm(slot, c.errAnswer(err))
		req.stored(c, t.Name(), broker.Position{}, err)
		return
	}
	if !onLane {
		// msg borrows the input buffer: copy it for the lane.
		own := clonePub(msg)
		c.toLane(func(bool) { c.publishBlocking(t, own, slot, req) })
		return
	}
	c.publishBlocking(t, msg, slot, req)
}

// publishBlocking waits for room (lane only) and stores msg.
func (c *client) publishBlocking(t *broker.Topic, msg broker.Message, slot *answer, req reqReply) {
	pos, err := t.Publish(c.ctx, msg)
	c.confirmer(t.Name(), req, slot)(pos, err)
}

// PublishDone is the completion of the durable publish whose confirm a
// fills (broker.PublishDone; a comes from reserveConfirm).
func (a *answer) PublishDone(pos broker.Position, err error) { a.confirmOf.confirmed(a, pos, err) }

// confirmer returns the completion of one durable publish to topic.
func (c *client) confirmer(topic broker.TopicName, req reqReply, slot *answer) func(broker.Position, error) {
	return func(pos broker.Position, err error) {
		if err != nil && slot == nil {
			c.log.Debug("unconfirmed durable publish failed", "subject", req.subject, "err", err)
		}
		c.confirmed(slot, pos, err)
		req.stored(c, topic, pos, err)
	}
}

// reqReply is what a NATS-mode request (a PUB with a reply subject) is
// answered with besides its confirm (handle_noresp.go). The zero reply
// means no answer is due.
type reqReply struct {
	subject, reply string
	noResp         bool // the connection wants 503 and no subscriber got it
}

// notStored answers a request no topic stored. Safe from any goroutine.
func (r reqReply) notStored(c *client) {
	if r.noResp {
		c.noResponders(r.subject, r.reply)
	}
}

// stored answers a request a topic stored (err nil) or refused, as
// JetStream answers a publish. Safe from any goroutine.
func (r reqReply) stored(c *client, topic broker.TopicName, pos broker.Position, err error) {
	if r.reply == "" {
		return
	}
	if b, ok := appendExpectFailure(nil, topic, err); ok {
		c.queueReply(r.reply, b)
		return
	}
	if err != nil {
		c.queueReply(r.reply, appendPubErr(nil, protocol.NewError(codeOf(err), "").Text()))
		return
	}
	c.queueReply(r.reply, appendPubAck(nil, topic, pos))
}

// confirmed answers slot (nil: no confirm wanted) with the outcome of its
// durable publish.
func (c *client) confirmed(slot *answer, pos broker.Position, err error) {
	if err != nil {
		c.finishConfirm(slot, c.errAnswer(err))
		return
	}
	var b [32]byte
	c.finishConfirm(slot, protocol.AppendConfirm(b[:0], protocol.Position{Partition: uint32(pos.Partition), Seq: uint64(pos.Seq), Duplicate: pos.Duplicate}))
}

func clonePub(m broker.Message) broker.Message {
	buf := make([]byte, 0, len(m.Header)+len(m.Data)+len(m.Key))
	buf = append(buf, m.Header...)
	buf = append(buf, m.Data...)
	buf = append(buf, m.Key...)
	out := broker.Message{Subject: m.Subject, CRC: m.CRC, ExpectLastMsgID: m.ExpectLastMsgID, Expect: m.Expect, Received: m.Received}
	if m.Header != nil {
		out.Header = buf[:len(m.Header):len(m.Header)]
	}
	out.Data = buf[len(m.Header) : len(m.Header)+len(m.Data) : len(m.Header)+len(m.Data)]
	if m.Key != nil {
		out.Key = buf[len(m.Header)+len(m.Data):]
	}
	return out
}

// queueReply publishes body to subject for plain subscribers. Safe from
// any goroutine: it does not use the input goroutine's scratch.
func (c *client) queueReply(subject string, body []byte) {
	subs := c.srv.subs.match(subject, nil)
	m := pubMsg{subject: subject, body: body}
	for _, s := range subs {
		if s.queue != "" || s.durable != nil {
			continue
		}
		s.c.queueDelivery(appendMsg(nil, &m, s.sid, s.c.modes.crcOut.Load(), true))
	}
}
