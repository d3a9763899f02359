package jsapi

// SPEC.md 16.2 "Deliveries and acks": the reply subject of a delivery is
// JetStream's ack subject (its version 1 form, nine tokens)
//
//	$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<timestamp ns>.<pending>
//
// so clients' msg.Metadata() works. The delivered count and the stream
// sequence are the engine's attempt and offset: with the stream and
// consumer names they name the engine's handle.

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/fibrilmq/fibril/server/broker"
)

const ackPrefix = "$JS.ACK."

// IsAck reports whether subject is in JetStream's ack space.
func IsAck(subject string) bool { return strings.HasPrefix(subject, ackPrefix) }

// Ack is what an ack subject names.
type Ack struct {
	Stream, Consumer string
	Delivered        uint32 // the engine's attempt
	StreamSeq        uint64 // the engine's offset in partition 0
	ConsumerSeq      uint64
	Timestamp        int64
	Pending          uint64
}

// AppendAckSubject appends the ack subject of ack to b.
func AppendAckSubject(b []byte, ack Ack) []byte {
	b = append(b, ackPrefix...)
	b = append(b, ack.Stream...)
	b = append(b, '.')
	b = append(b, ack.Consumer...)
	b = append(b, '.')
	b = strconv.AppendUint(b, uint64(ack.Delivered), 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, ack.StreamSeq, 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, ack.ConsumerSeq, 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, ack.Timestamp, 10)
	b = append(b, '.')
	return strconv.AppendUint(b, ack.Pending, 10)
}

// ParseAck parses an ack subject of the version 1 form; ok is false for
// anything else (the version 2 form with domain and account is never
// sent by this server).
func ParseAck(subject string) (ack Ack, ok bool) {
	rest, found := strings.CutPrefix(subject, ackPrefix)
	if !found {
		return ack, false
	}
	var tok [7]string
	for i := range 6 {
		j := strings.IndexByte(rest, '.')
		if j < 0 {
			return ack, false
		}
		tok[i], rest = rest[:j], rest[j+1:]
	}
	tok[6] = rest
	if strings.IndexByte(rest, '.') >= 0 || !streamName(tok[0]) || !streamName(tok[1]) {
		return ack, false
	}
	d, err1 := strconv.ParseUint(tok[2], 10, 32)
	s, err2 := strconv.ParseUint(tok[3], 10, 64)
	c, err3 := strconv.ParseUint(tok[4], 10, 64)
	ts, err4 := strconv.ParseInt(tok[5], 10, 64)
	p, err5 := strconv.ParseUint(tok[6], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || err5 != nil || d == 0 || s == 0 {
		return ack, false
	}
	return Ack{Stream: tok[0], Consumer: tok[1], Delivered: uint32(d), StreamSeq: s, ConsumerSeq: c, Timestamp: ts, Pending: p}, true
}

// Handle resolves an ack subject to the engine's handle. The caller
// checks the settle's permission (the handle names the topic).
func (a *API) Handle(subject string) (broker.Handle, error) {
	ack, ok := ParseAck(subject)
	if !ok {
		return broker.Handle{}, fmt.Errorf("%w: %q is not a JetStream ack subject", broker.ErrUnknownHandle, subject)
	}
	t, ok := a.eng.Topic(broker.TopicName(ack.Stream))
	if !ok {
		return broker.Handle{}, fmt.Errorf("%w: stream %s", broker.ErrUnknownHandle, ack.Stream)
	}
	g, ok := t.FindGroup(broker.GroupName(ack.Consumer))
	if !ok {
		return broker.Handle{}, fmt.Errorf("%w: consumer %s/%s", broker.ErrUnknownHandle, ack.Stream, ack.Consumer)
	}
	return broker.Handle{Topic: t.ID(), Group: g.ID(), Partition: 0, Seq: broker.Seq(ack.StreamSeq), Attempt: ack.Delivered}, nil
}
