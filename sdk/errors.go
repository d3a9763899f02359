package fibril

import (
	"errors"
	"fmt"
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
	// ErrPayloadTooLarge: the payload exceeds the server's max_payload; the
	// client refuses it before sending.
	ErrPayloadTooLarge = errors.New("fibril: payload exceeds server max_payload")
	// ErrInvalidArgument: a caller argument is malformed (empty subject, a
	// space in a token, a negative count).
	ErrInvalidArgument = errors.New("fibril: invalid argument")
)

// Error is an -ERR answer from the server. Code is the stable snake_case code
// from SPEC.md's error table; Text is the human text. errors.Is(err, ErrX)
// matches by Code against the per-code sentinels (ErrCRCMismatch,
// ErrStaleHandle, ...), so callers never look at the words.
type Error struct {
	Code      string
	Text      string
	Fatal     bool // the server closes the connection after sending it
	Retriable bool // the same request may succeed later
}

// Error implements error.
func (e *Error) Error() string {
	if e.Text == "" {
		return "fibril: " + e.Code
	}
	return fmt.Sprintf("fibril: %s: %s", e.Code, e.Text)
}

// Is reports whether target is an *Error with the same Code, so that the
// per-code sentinels match any answer carrying that code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Corrupt describes a delivery that failed its CRC check. It wraps
// ErrCorruptDelivery.
type CorruptError struct {
	Subject string
	Handle  string
	Want    uint32 // the CRC the server sent
	Got     uint32 // the CRC of the bytes received
}

// Error implements error.
func (e *CorruptError) Error() string {
	return fmt.Sprintf("fibril: delivery %s on %q failed its CRC check (sent %08x, computed %08x)",
		e.Handle, e.Subject, e.Want, e.Got)
}

// Unwrap returns ErrCorruptDelivery.
func (e *CorruptError) Unwrap() error { return ErrCorruptDelivery }

// errorDesc is what the client needs to know about an error code.
type errorDesc struct{ Fatal, Retriable bool }

// errorTable is read-only after package init.
var errorTable = map[string]errorDesc{}
