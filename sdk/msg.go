package fibril

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/fibrilmq/fibril/protocol"
)

// Msg is one delivery of a durable message. Its exported fields belong to
// the caller. Settle it exactly once with Ack, Nack or Reject (InProgress may
// come before); an unsettled message is redelivered when its lease expires.
//
// Data is the caller's to read and modify for good, but its backing array
// is a block of up to 32 KiB shared with neighbouring deliveries (its
// capacity is its length, so an append copies), and a Msg is allocated
// together with 15 neighbours: keeping a few messages, or small pieces of
// their Data, for a long time keeps their neighbours' memory alive too, so
// copy what you keep. Payloads over 8 KiB have an allocation of their own.
type Msg struct {
	Subject string
	Data    []byte
	Header  Header // nil when the message has no headers
	CRC     uint32 // the verified CRC-32 of header block + data (0 with CRC off)

	handle []byte // the ack handle as the server sent it
	h      protocol.Handle
	hok    bool
	conn   *Conn
	done   atomic.Bool // settled by Ack, Nack or Reject
}

// Handle returns the ack handle, $F.<topic-id>.<group-id>.<partition>.<seq>.<attempt>.
// Each call returns a new string.
func (m *Msg) Handle() string { return string(m.handle) }

// DeliveryCount returns how many times this message has been delivered to
// its group, this delivery included (1 on the first delivery).
func (m *Msg) DeliveryCount() int { return int(m.h.Attempt) }

// Partition returns the partition the message is stored in.
func (m *Msg) Partition() int { return int(m.h.Partition) }

// Seq returns the message's sequence number within its partition.
func (m *Msg) Seq() uint64 { return m.h.Seq }

// Ack settles the delivery for good. It blocks until the server answers. An
// ack of a delivery that was superseded (its lease expired and it was
// delivered again) fails with ErrStaleHandle; acking twice is fine.
func (m *Msg) Ack(ctx context.Context) error {
	return m.settle(ctx, "ACK", protocol.AppendAck(nil, m.h), true)
}

// Nack hands the message back for redelivery after delay (0: at once),
// rounded to milliseconds.
func (m *Msg) Nack(ctx context.Context, delay time.Duration) error {
	if delay < 0 {
		return fmt.Errorf("%w: negative nack delay", ErrInvalidArgument)
	}
	return m.settle(ctx, "NACK", protocol.AppendNack(nil, m.h, delay.Milliseconds()), true)
}

// Reject settles the delivery as unprocessable: the server dead-letters it
// (Fibril-Reason: rejected) and never delivers it to this group again.
func (m *Msg) Reject(ctx context.Context) error {
	return m.settle(ctx, "REJECT", protocol.AppendReject(nil, m.h), true)
}

// InProgress tells the server the consumer is still working on the message:
// the lease restarts with the group's lease time.
func (m *Msg) InProgress(ctx context.Context) error {
	return m.settle(ctx, "EXTEND", protocol.AppendExtend(nil, m.h, 0), false)
}

// ExtendLease makes the lease end d from now (rounded to milliseconds).
func (m *Msg) ExtendLease(ctx context.Context, d time.Duration) error {
	if d < time.Millisecond {
		return fmt.Errorf("%w: lease extension must be >= 1ms", ErrInvalidArgument)
	}
	return m.settle(ctx, "EXTEND", protocol.AppendExtend(nil, m.h, d.Milliseconds()), false)
}

func (m *Msg) settle(ctx context.Context, verb string, cmd []byte, final bool) error {
	if !m.hok || m.conn == nil {
		return ErrNoHandle
	}
	if _, err := m.conn.roundTrip(ctx, reqOK, cmd); err != nil {
		return fmt.Errorf("fibril: %s %s: %w", verb, m.handle, err)
	}
	if final {
		m.done.Store(true)
	}
	return nil
}

// settled reports whether Ack, Nack or Reject succeeded on m.
func (m *Msg) settled() bool { return m.done.Load() }

// AckAll acknowledges many deliveries with as few ACK commands as fit the
// server's max_control_line (from INFO, 4096 bytes when absent), all written
// at once, and blocks until every one is answered or ctx is done. The
// handles are settled independently; the error names the first ACK command
// that failed (the deliveries of the others are settled). It is AckAllAsync
// followed by Wait.
func (c *Conn) AckAll(ctx context.Context, msgs ...*Msg) error {
	if err := ctx.Err(); err != nil {
		return err // nothing sent
	}
	return c.AckAllAsync(msgs...).Wait(ctx)
}

// ackLine encodes an ACK of the longest prefix of msgs (at least one) whose
// line, line end excluded, fits in limit bytes; it returns that prefix's
// length and the line. Every m has a parsed handle (m.hok), so m.handle is
// its canonical text (ParseHandle accepts nothing else) and is copied as
// the server sent it, into one allocation of the line's size.
func ackLine(msgs []*Msg, limit int) (int, []byte) {
	n, size := 0, len("ACK")
	for _, m := range msgs {
		if n > 0 && size+1+len(m.handle) > limit {
			break
		}
		size += 1 + len(m.handle)
		n++
	}
	line := append(make([]byte, 0, size+2), "ACK"...)
	for _, m := range msgs[:n] {
		line = append(append(line, ' '), m.handle...)
	}
	return n, append(line, "\r\n"...)
}

// SettleOp names a settle command for SettleHandle.
type SettleOp string

// The settle operations.
const (
	OpAck    SettleOp = "ack"
	OpNack   SettleOp = "nack"
	OpReject SettleOp = "reject"
	OpExtend SettleOp = "extend"
)

// SettleHandle settles a delivery known only by its handle text (for
// example, one passed on by another process). d is the nack delay or the
// lease extension (0: none given). A malformed handle fails here with
// ErrInvalidHandle; whether it names a live delivery is the server's call
// (ErrUnknownHandle, ErrStaleHandle).
func (c *Conn) SettleHandle(ctx context.Context, handle string, op SettleOp, d time.Duration) error {
	h, err := protocol.ParseHandle([]byte(handle))
	if err != nil {
		return fmt.Errorf("fibril: %s %s: %w", op, handle, err)
	}
	m := &Msg{handle: []byte(handle), h: h, hok: true, conn: c}
	switch op {
	case OpAck:
		return m.Ack(ctx)
	case OpNack:
		return m.Nack(ctx, d)
	case OpReject:
		return m.Reject(ctx)
	case OpExtend:
		if d > 0 {
			return m.ExtendLease(ctx, d)
		}
		return m.InProgress(ctx)
	}
	return fmt.Errorf("%w: settle op %q", ErrInvalidArgument, op)
}
