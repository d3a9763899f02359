package server

// SPEC.md 16.2: JetStream's Nats-Expected-* publish headers. Of them only
// Nats-Expected-Last-Msg-Id is checked (by the engine:
// broker.Message.ExpectLastMsgID); a publish with any other is refused
// rather than stored unchecked.

import (
	"errors"
	"strconv"

	"github.com/fibrilmq/fibril/server/broker"
	"github.com/fibrilmq/fibril/wire"
)

const (
	expectedPrefix    = "Nats-Expected-"
	expectedLastMsgID = "Nats-Expected-Last-Msg-Id"
)

// expectedHeaders reads the Nats-Expected-* fields of a header block: the
// value of Nats-Expected-Last-Msg-Id (copied), and whether another
// Nats-Expected-* field is present (unsupported).
func expectedHeaders(hdr []byte) (lastMsgID string, unsupported bool) {
	wire.RangeHeader(hdr, func(k, v []byte) bool {
		if len(k) < len(expectedPrefix) || !wire.EqualFold(k[:len(expectedPrefix)], expectedPrefix) {
			return true
		}
		if wire.EqualFold(k, expectedLastMsgID) {
			lastMsgID = string(v)
			return true
		}
		unsupported = true
		return false
	})
	return lastMsgID, unsupported
}

// appendWrongLastMsgID encodes JetStream's answer to a publish whose
// Nats-Expected-Last-Msg-Id is not the stream's last message id, when err
// says so (ok false otherwise).
func appendWrongLastMsgID(b []byte, topic broker.TopicName, err error) ([]byte, bool) {
	var le *broker.LastMsgIDError
	if !errors.As(err, &le) {
		return b, false
	}
	b = append(b, `{"stream":`...)
	b = strconv.AppendQuote(b, string(topic))
	b = append(b, `,"error":{"code":400,"err_code":10070,"description":`...)
	b = strconv.AppendQuote(b, "wrong last msg ID: "+le.Last)
	return append(b, `}}`...), true
}
