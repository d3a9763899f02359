package server

// SPEC.md 16.2 "The JetStream API": the binding of package server/jsapi.
// From NATS-mode connections, `$JS.API.*` requests go to jsapi on the
// connection's lane (they may touch the disk) and `$JS.ACK.*` publishes
// settle like a PUB to a handle (SPEC.md "Settling by PUB to a handle").
// Permissions are jsapi's (the TOPIC/GROUP rights) and the settle path's.

import (
	"bytes"
	"context"
	"path/filepath"
	"strconv"

	"github.com/fibrilmq/fibril/protocol"
	"github.com/fibrilmq/fibril/server/access"
	"github.com/fibrilmq/fibril/server/broker"
	"github.com/fibrilmq/fibril/server/jsapi"
)

// openJetStream starts the JetStream API over the open engine.
func (s *Server) openJetStream() error {
	if s.durable == nil {
		return nil
	}
	a, err := jsapi.New(s.durable.b, jsapi.Options{
		Dir: filepath.Join(s.opts.DataDir, "jetstream"),
		Log: s.log.With("part", "jetstream"),
	})
	if err != nil {
		return err
	}
	s.js = a
	return nil
}

// jsRequester is a connection as jsapi sees it.
type jsRequester struct{ c *client }

func (r jsRequester) Identity() *access.Identity { return r.c.login.perms }
func (r jsRequester) Owner() broker.OwnerID      { return r.c.owner() }
func (r jsRequester) Context() context.Context   { return r.c.ctx }
func (r jsRequester) Send(to, subject, reply string, hdr, data []byte) bool {
	return r.c.sendTo(to, subject, reply, hdr, data)
}
func (r jsRequester) SendBatch(to string, msgs []jsapi.Msg) bool { return r.c.sendBatchTo(to, msgs) }

// handleJS routes a NATS-mode publish in JetStream's space; false when
// subject is not one (or JetStream is not served).
func (c *client) handleJS(m *pubMsg) bool {
	js := c.srv.js
	switch {
	case js == nil:
		return false
	case jsapi.IsAPI(m.subject):
		subject, reply := m.subject, m.reply
		hdr := bytes.Clone(m.body[:m.hdrLen])
		body := bytes.Clone(m.body[m.hdrLen:])
		c.ok()
		if !c.blocking(func() { js.Request(jsRequester{c}, subject, reply, hdr, body) }) {
			js.Refuse(jsRequester{c}, reply, "too many commands waiting on this connection")
		}
		return true
	case jsapi.IsAck(m.subject):
		c.settleJSAck(js, m)
		return true
	}
	return false
}

// settleJSAck settles by a publish to an ack subject: +ACK, -NAK [{"delay":
// ns}], +WPI, +TERM, +NXT [request]. A reply subject (double ack) is
// answered once the settle is durable: empty on success.
func (c *client) settleJSAck(js *jsapi.API, m *pubMsg) {
	c.ok()
	reply := m.reply
	answer := func(err error) {
		if reply == "" {
			return
		}
		var body []byte
		if err != nil {
			body = []byte(protocol.NewError(codeOf(err), "").Text())
		}
		c.queueReply(reply, body)
	}
	h, err := js.Handle(m.subject)
	if err != nil {
		answer(err)
		return
	}
	body := m.body[m.hdrLen:]
	var next []byte
	nxt := bytes.HasPrefix(body, []byte("+NXT"))
	if nxt {
		next = bytes.TrimSpace(bytes.Clone(body[len("+NXT"):]))
		body = nil // acks
	}
	kind, delay, err := protocol.ParseAckBody(body)
	if err != nil {
		answer(err)
		return
	}
	op := ackBodyOp(kind, delay)
	// The closures take m's strings, never m: a pointer kept by one makes
	// every publish's pubMsg escape to the heap.
	subject := m.subject
	done := func(err error) {
		if err != nil {
			c.log.Debug("jetstream ack failed", "subject", strconv.Quote(subject), "err", err)
		}
		if !nxt {
			answer(err)
		}
	}
	c.settle(h, op.As(c.principal()), done)
	if nxt && reply != "" {
		ack, _ := jsapi.ParseAck(subject)
		js.Next(jsRequester{c}, ack.Stream, ack.Consumer, reply, next)
	}
}

// sendTo delivers one message to the plain subscriptions matching to (the
// reply inbox of a JetStream request), with its own subject and reply.
// Safe from any goroutine; what it keeps is copied.
func (c *client) sendTo(to, subject, reply string, hdr, data []byte) bool {
	subs := c.srv.subs.match(to, nil)
	if len(subs) == 0 {
		return false
	}
	body := make([]byte, 0, len(hdr)+len(data))
	body = append(append(body, hdr...), data...)
	m := pubMsg{subject: subject, reply: reply, hdrLen: len(hdr), body: body}
	sent := false
	var frame []byte
	for _, s := range subs {
		if s.queue != "" || s.durable != nil {
			continue
		}
		to := s.c
		frame = appendMsg(frame[:0], &m, s.sid, to.modes.crcOut.Load(), to.modes.headersOut.Load() || len(hdr) == 0)
		if to.queueDelivery(frame) {
			to.countOutMsgs(1)
			sent = true
		}
	}
	return sent
}

// sendBatchTo is sendTo of every message of msgs, in order (the
// deliveries of one poll of a pull request): the subscriptions are matched
// once and the frames encoded into pooled buffers of chunkSize, each
// queued with one copy and one lock.
func (c *client) sendBatchTo(to string, msgs []jsapi.Msg) bool {
	subs := c.srv.subs.match(to, nil)
	sent := false
	pool := &c.srv.outBufs
	for _, s := range subs {
		if s.queue != "" || s.durable != nil {
			continue
		}
		dst := s.c
		crc, headers := dst.modes.crcOut.Load(), dst.modes.headersOut.Load()
		buf := pool.get(chunkSize)
		ok := true
		for i := range msgs {
			m := &msgs[i]
			if n := jsMsgSize(s.sid, m); len(buf) > 0 && len(buf)+n > cap(buf) {
				ok = ok && dst.queueDelivery(buf)
				buf = buf[:0]
			}
			buf = appendJSMsg(buf, s.sid, m, crc, headers || len(m.Header) == 0)
		}
		ok = ok && dst.queueDelivery(buf)
		pool.put(buf)
		if ok {
			dst.countOutMsgs(len(msgs))
			sent = true
		}
	}
	return sent
}

// jsMsgSize bounds the frame appendJSMsg encodes for m.
func jsMsgSize(sid string, m *jsapi.Msg) int {
	return len("HMSG   \r\n\r\n") + len(m.Subject) + len(sid) + len(m.Reply) + 3*20 + 8 + len(m.Header) + len(m.Data)
}

// appendJSMsg encodes m as a MSG (or HMSG when it has a header and
// withHeaders) to subscription sid, with protocol's encoder as appendMsg
// does a pubMsg.
func appendJSMsg(b []byte, sid string, m *jsapi.Msg, crc, withHeaders bool) []byte {
	tok := protocol.NoCRC
	if crc {
		tok = protocol.ComputeCRC
	}
	if len(m.Header) > 0 && withHeaders {
		return protocol.AppendHMsg(b, m.Subject, sid, m.Reply, m.Header, m.Data, tok)
	}
	return protocol.AppendMsg(b, m.Subject, sid, m.Reply, m.Data, tok)
}
