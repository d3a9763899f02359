package server

// SPEC.md 16 "What stock NATS clients see": answers NATS core gives a
// request at once. A request (a PUB with a reply subject) that reaches no
// subscriber and no topic gets the 503 no-responders status when its
// connection asked for it (CONNECT "no_responders" and "headers"), as
// nats-server sends it; `$JS.API.*` and other `$` subjects from NATS-mode
// connections are plain subjects here (no JetStream is served), so a
// JetStream call hears 503 at once instead of waiting out its timeout. A
// request captured by a topic is answered with a JetStream publish ack once
// stored, so a JetStream publish to a topic's subject neither times out
// nor is sent twice.

import (
	"strconv"

	"github.com/fibrilmq/fibril/server/broker"
)

// noRespondersHeader is the status block nats-server sends; the subject
// line follows it.
const noRespondersHeader = "NATS/1.0 503\r\nNats-Subject: "

// wantsNoResponders reports whether this connection is told about
// requests nobody received. Input goroutine only.
func (c *client) wantsNoResponders() bool {
	return c.modes.opts.NoResponders && c.modes.opts.Headers && !c.modes.strict.Load()
}

// publishPlain delivers m to plain subscribers only (nothing is stored)
// and answers it.
func (c *client) publishPlain(m *pubMsg) {
	// In a cluster a subscriber may be on another node (spread), so no
	// 503 is sent for a request nobody here received.
	if c.fanOut(m) == 0 && m.reply != "" && c.wantsNoResponders() && c.srv.cluster == nil {
		c.noResponders(m.subject, m.reply)
	}
	if c.confirming() {
		c.answerNow(okNone)
		return
	}
	c.ok()
}

// noResponders sends the 503 status for a request to subject whose reply
// subject is reply, to this connection's own subscription matching reply
// (nats-server does the same; a client waiting for the answer has one).
// Safe from any goroutine (it uses no scratch of the input goroutine).
func (c *client) noResponders(subject, reply string) {
	var own *subscription
	for _, s := range c.srv.subs.match(reply, nil) {
		if s.c == c && s.queue == "" && s.durable == nil {
			own = s
			break
		}
	}
	if own == nil {
		return
	}
	hdr := noRespondersHeader + subject + "\r\n\r\n"
	m := pubMsg{subject: reply, hdrLen: len(hdr), body: []byte(hdr)}
	if c.queueDelivery(appendMsg(nil, &m, own.sid, c.modes.crcOut.Load(), true)) {
		c.countOutMsgs(1)
	}
}

// appendPubAck encodes the JetStream publish ack for a message stored at
// pos of topic (the sequence is the partition's).
func appendPubAck(b []byte, topic broker.TopicName, pos broker.Position) []byte {
	b = append(b, `{"stream":`...)
	b = strconv.AppendQuote(b, string(topic))
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, uint64(pos.Seq), 10)
	if pos.Duplicate {
		b = append(b, `,"duplicate":true`...) // a Nats-Msg-Id seen within the window
	}
	return append(b, '}')
}

// appendPubErr encodes a JetStream API error answer to a publish that was
// not stored.
func appendPubErr(b []byte, text string) []byte {
	b = append(b, `{"error":{"code":503,"description":`...)
	b = strconv.AppendQuote(b, text)
	return append(b, `}}`...)
}
