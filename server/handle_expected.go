package server

// SPEC.md 7.6 and 16.2: JetStream's Nats-Expected-* publish headers. They
// are read from every publish that carries them, in either mode, and
// checked by the engine (broker.Message.Expect, ExpectLastMsgID) atomically
// with the append: a NATS-mode request is answered with JetStream's error
// JSON, a Fibril-mode publish with -ERR expected_mismatch. A header of the
// family the engine does not check is refused rather than stored
// unchecked.

import (
	"errors"
	"strconv"

	"github.com/fibrilmq/fibril/server/broker"
	"github.com/fibrilmq/fibril/wire"
)

const (
	expectedPrefix     = "Nats-Expected-"
	expectedLastMsgID  = "Nats-Expected-Last-Msg-Id"
	expectedStream     = "Nats-Expected-Stream"
	expectedLastSeq    = "Nats-Expected-Last-Sequence"
	expectedSubjectSeq = "Nats-Expected-Last-Subject-Sequence"
)

// expectations is what the Nats-Expected-* fields of a header block ask.
type expectations struct {
	lastMsgID string
	expect    broker.Expect
	has       bool // expect holds a condition
	// bad names a field the engine does not check, or one whose value is
	// not a decimal sequence ("": none).
	bad string
}

// expectedHeaders reads the Nats-Expected-* fields of a header block
// (values copied).
func expectedHeaders(hdr []byte) (x expectations) {
	wire.RangeHeader(hdr, func(k, v []byte) bool {
		if len(k) < len(expectedPrefix) || !wire.EqualFold(k[:len(expectedPrefix)], expectedPrefix) {
			return true
		}
		switch {
		case wire.EqualFold(k, expectedLastMsgID):
			x.lastMsgID = string(v)
		case wire.EqualFold(k, expectedStream):
			x.expect.Stream, x.has = string(v), true
		case wire.EqualFold(k, expectedLastSeq):
			n, err := strconv.ParseUint(string(v), 10, 64)
			if err != nil {
				x.bad = expectedLastSeq
				return false
			}
			x.expect.LastSeq, x.expect.HasLastSeq, x.has = broker.Seq(n), true, true
		case wire.EqualFold(k, expectedSubjectSeq):
			n, err := strconv.ParseUint(string(v), 10, 64)
			if err != nil {
				x.bad = expectedSubjectSeq
				return false
			}
			x.expect.SubjectSeq, x.expect.HasSubjectSeq, x.has = broker.Seq(n), true, true
		default:
			x.bad = string(k)
			return false
		}
		return true
	})
	return x
}

// apply sets x's conditions on msg.
func (x *expectations) apply(msg *broker.Message) {
	msg.ExpectLastMsgID = x.lastMsgID
	if x.has {
		e := x.expect
		msg.Expect = &e
	}
}

// expectFailure returns JetStream's error code and description for a
// publish whose condition did not hold (ok false: err is another).
func expectFailure(err error) (errCode int, desc string, ok bool) {
	var le *broker.LastMsgIDError
	var se *broker.LastSeqError
	switch {
	case errors.As(err, &le):
		return 10070, "wrong last msg ID: " + le.Last, true
	case errors.As(err, &se):
		return 10071, "wrong last sequence: " + strconv.FormatUint(uint64(se.Last), 10), true
	case errors.Is(err, broker.ErrStreamMismatch):
		return 10060, "expected stream does not match", true
	}
	return 0, "", false
}

// appendExpectFailure encodes JetStream's answer to a publish whose
// Nats-Expected-* condition did not hold, when err says so (ok false
// otherwise).
func appendExpectFailure(b []byte, topic broker.TopicName, err error) ([]byte, bool) {
	code, desc, ok := expectFailure(err)
	if !ok {
		return b, false
	}
	b = append(b, `{"stream":`...)
	b = strconv.AppendQuote(b, string(topic))
	b = append(b, `,"error":{"code":400,"err_code":`...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, `,"description":`...)
	b = strconv.AppendQuote(b, desc)
	return append(b, `}}`...), true
}

// appendExpectBad encodes JetStream's answer to a publish with a
// Nats-Expected-* field Fibril does not check.
func appendExpectBad(b []byte, field string) []byte {
	b = append(b, `{"error":{"code":400,"err_code":10003,"description":`...)
	b = strconv.AppendQuote(b, "not supported by Fibril: header "+field)
	return append(b, `}}`...)
}
