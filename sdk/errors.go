package fibril

import (
	"errors"
	"fmt"

	"github.com/fibrilmq/fibril/protocol"
)

// Client-side sentinels. Errors returned by this package wrap them, so test
// with errors.Is.
var (
	// ErrClosed: the Conn was closed by Close (or gave up reconnecting).
	ErrClosed = errors.New("fibril: connection closed")
	// ErrConnectionLost: the connection dropped while the request was on the
	// wire and the request cannot be replayed safely (publishes are replayed;
	// polls, acks and management requests are not). Retriable.
	ErrConnectionLost = errors.New("fibril: connection lost")
	// ErrReconnectBufferFull: a publish made while disconnected did not fit
	// the replay buffer (ReconnectPolicy.BufferBytes).
	ErrReconnectBufferFull = errors.New("fibril: reconnect buffer full")
	// ErrCorruptDelivery: a delivery's bytes do not match its CRC-32. The data
	// is never handed out; the delivery is nacked so the server redelivers it.
	ErrCorruptDelivery = errors.New("fibril: delivery failed its CRC check")
	// ErrProtocol: the server sent something this client cannot parse or did
	// not expect (the connection is dropped and re-established).
	ErrProtocol = errors.New("fibril: protocol violation by server")
	// ErrNoHandle: the message has no ack handle (it came from a plain
	// subscription), so it cannot be settled.
	ErrNoHandle = errors.New("fibril: message has no ack handle")
	// ErrInvalidArgument: a caller argument is malformed (empty subject, a
	// space in a token, a negative count).
	ErrInvalidArgument = errors.New("fibril: invalid argument")
	// ErrAckPending: AckFuture.Err was called before the future was done.
	ErrAckPending = errors.New("fibril: acknowledgement not answered yet")
	// ErrPublishPending: PubFuture.Result was called before the future was
	// done.
	ErrPublishPending = errors.New("fibril: publish not confirmed yet")
)

// Error is an -ERR answer from the server, or a check the client makes on
// the server's behalf (a payload over max_payload, a malformed handle). It is
// the protocol package's error type: Code is the stable snake_case code from
// SPEC.md's error table, and errors.Is(err, ErrX) matches any *Error with the
// same Code (ErrCRCMismatch, ErrStaleHandle, ...), so callers never look at
// the words. Fatal and Retriable come from the table.
type Error = protocol.Error

// CorruptError describes a delivery the client refused: its checksum did not
// match (Cause is ErrCRCMismatch) or its header block was malformed. It wraps
// ErrCorruptDelivery and Cause. The data is never handed out.
type CorruptError struct {
	Subject string
	Handle  string
	Cause   error
}

// Error implements error.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("fibril: delivery %s on %q refused: %v", e.Handle, e.Subject, e.Cause)
}

// Unwrap returns ErrCorruptDelivery and the cause.
func (e *CorruptError) Unwrap() []error { return []error{ErrCorruptDelivery, e.Cause} }
