package fibril

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Msg is one delivery of a durable message (or a plain subscription
// message, which has no handle). Its fields belong to the caller.
type Msg struct {
	Subject string
	Data    []byte
	Header  Header // nil when the message has no headers
	CRC     uint32 // the verified CRC-32 of header block + data (0 with CRC off)

	handle string
	hinfo  handleInfo
	hok    bool
	conn   *Conn
	done   atomic.Bool // settled by Ack, Nack or Reject
}

// handleInfo is a parsed ack handle: $F.<topic-id>.<group-id>.<partition>.<seq>.<attempt>.
type handleInfo struct {
	topic, group uint64
	partition    uint32
	seq          uint64
	attempt      uint32
}

func parseHandle(s string) (handleInfo, bool) {
	var h handleInfo
	rest, ok := strings.CutPrefix(s, "$F.")
	if !ok {
		return h, false
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 5 {
		return h, false
	}
	var n [5]uint64
	for i, p := range parts {
		v, err := strconv.ParseUint(p, 10, 64)
		if err != nil {
			return h, false
		}
		n[i] = v
	}
	if n[2] > 1<<32-1 || n[4] > 1<<32-1 {
		return h, false
	}
	return handleInfo{topic: n[0], group: n[1], partition: uint32(n[2]), seq: n[3], attempt: uint32(n[4])}, true
}

// Handle returns the ack handle ("" for plain subscription messages).
func (m *Msg) Handle() string { return m.handle }

// DeliveryCount returns how many times this message has been delivered to
// its group, this delivery included (1 on the first delivery; 0 without a
// handle).
func (m *Msg) DeliveryCount() int { return int(m.hinfo.attempt) }

// Partition returns the partition the message is stored in.
func (m *Msg) Partition() int { return int(m.hinfo.partition) }

// Seq returns the message's sequence within its partition.
func (m *Msg) Seq() uint64 { return m.hinfo.seq }

// Ack settles the delivery for good. It blocks until the server answers. An
// ack of a delivery that was superseded (its lease expired and it was
// delivered again) fails with ErrStaleHandle.
func (m *Msg) Ack(ctx context.Context) error {
	return m.settle(ctx, "ACK "+m.handle)
}

// Nack hands the message back for redelivery after delay (0: at once).
func (m *Msg) Nack(ctx context.Context, delay time.Duration) error {
	if delay < 0 {
		return fmt.Errorf("%w: negative nack delay", ErrInvalidArgument)
	}
	cmd := "NACK " + m.handle
	if delay > 0 {
		cmd += " " + strconv.FormatInt(delay.Milliseconds(), 10)
	}
	return m.settle(ctx, cmd)
}

// Reject settles the delivery as unprocessable: the server dead-letters it.
func (m *Msg) Reject(ctx context.Context) error {
	return m.settle(ctx, "REJECT "+m.handle)
}

// InProgress extends the delivery's lease by the group's lease time, telling
// the server the consumer is still working on it.
func (m *Msg) InProgress(ctx context.Context) error {
	return m.settle(ctx, "EXTEND "+m.handle)
}

// ExtendLease extends the delivery's lease to d from now.
func (m *Msg) ExtendLease(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%w: lease extension must be > 0", ErrInvalidArgument)
	}
	return m.settle(ctx, "EXTEND "+m.handle+" "+strconv.FormatInt(d.Milliseconds(), 10))
}

func (m *Msg) settle(ctx context.Context, cmd string) error {
	if !m.hok || m.conn == nil {
		return ErrNoHandle
	}
	verb, _, _ := strings.Cut(cmd, " ")
	_, err := m.conn.roundTrip(ctx, reqOK, []byte(cmd+"\r\n"))
	if err != nil {
		return fmt.Errorf("fibril: %s: %w", verb, err)
	}
	if verb != "EXTEND" {
		m.done.Store(true)
	}
	return nil
}

// settled reports whether Ack, Nack or Reject succeeded on m.
func (m *Msg) settled() bool { return m.done.Load() }

// AckAll acknowledges many deliveries with one command per connection
// round trip (ACK h1 h2 ...). All messages must come from this Conn.
func (c *Conn) AckAll(ctx context.Context, msgs ...*Msg) error {
	if len(msgs) == 0 {
		return nil
	}
	b := []byte("ACK")
	for _, m := range msgs {
		if !m.hok {
			return ErrNoHandle
		}
		b = append(b, ' ')
		b = append(b, m.handle...)
	}
	_, err := c.roundTrip(ctx, reqOK, append(b, "\r\n"...))
	if err != nil {
		return fmt.Errorf("fibril: ACK: %w", err)
	}
	return nil
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
// lease extension (0: none given). The server decides whether the handle is
// valid; a malformed one is refused with ErrInvalidHandle.
func (c *Conn) SettleHandle(ctx context.Context, handle string, op SettleOp, d time.Duration) error {
	m := &Msg{handle: handle, conn: c}
	m.hinfo, m.hok = parseHandle(handle)
	if err := checkSubject(handle); err != nil {
		return err
	}
	m.hok = true // let the server judge the handle
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
