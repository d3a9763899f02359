package main

// The Fibril side: raw wire clients (wire.go) for publishers and consumers.
//
// Publisher: one connection in Fibril mode (confirms, CRC) writing PUB
// frames back to back; a FIFO channel of capacity --window (≤ INFO
// max_unconfirmed) holds the ids awaiting their confirm, so the window is
// the channel's capacity. The reader pops one id per answer (answers come in
// publish order). A retriable -ERR (queue_full, max_unconfirmed) puts the id
// back for sending again. Without --confirm the connection is in NATS mode
// and a final PING/PONG marks the end.
//
// Consumer (pull): POLL <topic> <group> <batch> 1000, and on each "+OK <n>"
// the handles just received are acked (one ACK line with many handles, or
// one ACK per message with --ack each) in the same write as the next POLL.
// --poll-depth POLLs (default two) are kept outstanding so the server never
// waits for the client.
// Consumer (push): SUB <topic> <group> <sid> <credit>; acks are sent in
// batches whenever credit/4 handles piled up or the socket has nothing more
// to read. Plain mode: NATS-mode connections, SUB without a group.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/fibrilmq/fibril/protocol"
)

type fibrilDriver struct {
	cfg   *Config
	addr  string
	admin *wconn        // management connection, kept for settled()
	place *ClusterStats // a cluster run's placement (cluster.go); nil on one node
	conns openConns[*wconn]
}

func (d *fibrilDriver) track(c *wconn) { d.conns.add(c) }

func (d *fibrilDriver) close() { d.conns.closeAll((*wconn).close) }

func (d *fibrilDriver) setup(ctx context.Context) error {
	if d.cfg.Mode == "plain" {
		return nil
	}
	c, err := dialWire(ctx, d.addr, connMode{fibril: true, crc: d.cfg.CRC})
	if err != nil {
		return err
	}
	d.track(c)
	d.admin = c
	// A fresh topic each run (with --url an old one may hold messages).
	if _, err := d.manage(c, protocol.AppendTopicDelete(nil, d.cfg.Topic)); err != nil {
		var pe *protocol.Error
		if !errors.As(err, &pe) && !errors.Is(err, errServer) {
			return err
		}
	}
	tc := fmt.Sprintf(`{"partitions":%d,"durability":%q}`, d.cfg.Partitions, d.cfg.Durability)
	if _, err := d.manage(c, protocol.AppendTopicCreate(nil, d.cfg.Topic, []byte(tc))); err != nil {
		return fmt.Errorf("TOPIC CREATE %s %s: %w", d.cfg.Topic, tc, err)
	}
	if _, err := d.manage(c, protocol.AppendGroupCreate(nil, d.cfg.Topic, d.cfg.Group, []byte(`{"start":"earliest"}`))); err != nil {
		return fmt.Errorf("GROUP CREATE %s %s: %w", d.cfg.Topic, d.cfg.Group, err)
	}
	if len(d.cfg.clusterAddrs) > 0 {
		return d.placeFibril(ctx)
	}
	return nil
}

func (d *fibrilDriver) placement() *ClusterStats { return d.place }

func (d *fibrilDriver) settled(context.Context) (bool, error) {
	text, err := d.admin.request(protocol.AppendGroupInfo(nil, d.cfg.Topic, d.cfg.Group))
	if err != nil {
		return false, err
	}
	var gi protocol.GroupInfo
	if err := json.Unmarshal([]byte(text), &gi); err != nil {
		return false, fmt.Errorf("GROUP INFO answer %q: %w", text, err)
	}
	return gi.Pending == 0 && gi.Inflight == 0, nil
}

// pubMode returns how publishers connect.
func (d *fibrilDriver) pubMode() connMode {
	switch {
	case d.cfg.Mode == "plain":
		return connMode{}
	case d.cfg.Confirm:
		return connMode{fibril: true, crc: d.cfg.CRC}
	}
	return connMode{crc: d.cfg.CRC}
}

func (d *fibrilDriver) publish(ctx context.Context, idx int, n int64, st *runState) (pubStats, error) {
	var ps pubStats
	m := d.pubMode()
	c, err := dialWire(ctx, d.addr, m)
	if err != nil {
		return ps, err
	}
	d.track(c)
	defer c.close()
	confirm := m.fibril
	window := d.cfg.Window
	if confirm && c.info.MaxUnconfirmed > 0 {
		window = min(window, c.info.MaxUnconfirmed)
	}
	pending := make(chan uint64, window)
	// sentAt[k % window] is when the k-th frame admitted to pending was
	// written; answers come in order, so the k-th answer reads it back.
	sentAt := make([]atomic.Int64, window)
	var admitted, popped uint64
	confirms := st.confirms[idx]
	retry := make(chan uint64, 4*window+16)
	var answered, refused, retried atomic.Uint64
	var firstErr atomic.Pointer[string]
	notify := make(chan struct{}, 1)
	pongs := make(chan struct{}, 1)
	poke := func() {
		select {
		case notify <- struct{}{}:
		default:
		}
	}
	h := protocol.HandlerFunc(func(cmd *protocol.Command) error {
		switch cmd.Op {
		case protocol.OpOK:
			if !confirm {
				return nil
			}
			// Read the slot before freeing it: the next admission reuses it.
			sent := sentAt[popped%uint64(window)].Load()
			select {
			case <-pending:
			default:
				return fmt.Errorf("+OK %q answers no publish", cmd.Text)
			}
			popped++
			if _, stored, err := protocol.ParseConfirm(cmd.Text); err != nil || !stored {
				refused.Add(1)
				s := fmt.Sprintf("publish confirm %q: not stored in a durable topic", cmd.Text)
				firstErr.CompareAndSwap(nil, &s)
			} else {
				st.published.Add(1)
				if st.measured(sent) {
					confirms.Add(time.Now().UnixNano() - sent)
				}
			}
			answered.Add(1)
		case protocol.OpErr:
			pe := protocol.ParseErrText(cmd.Text)
			if !confirm || pe.Fatal() {
				return fmt.Errorf("%w: -ERR '%s'", errServer, cmd.Text)
			}
			var id uint64
			select {
			case id = <-pending:
			default:
				return fmt.Errorf("-ERR '%s' answers no publish", cmd.Text)
			}
			popped++
			if pe.Retriable() {
				retried.Add(1)
				retry <- id
			} else {
				refused.Add(1)
				s := string(cmd.Text)
				firstErr.CompareAndSwap(nil, &s)
			}
			answered.Add(1)
		case protocol.OpPing:
			return c.pong()
		case protocol.OpPong:
			select {
			case pongs <- struct{}{}:
			default:
			}
		}
		return nil
	})
	readErr := make(chan error, 1)
	go func() {
		readErr <- c.serve(h, func() error { poke(); return nil }, func(error) {})
	}()

	subject := d.cfg.Topic
	payload := template(d.cfg.Size)
	crcTok := protocol.NoCRC
	if m.crc {
		crcTok = protocol.ComputeCRC
	}
	frame := make([]byte, 0, d.cfg.Size+128)
	var written uint64 // frames written (retries included)
	send := func(id uint64) error {
		if confirm {
			select {
			case pending <- id:
			default:
				if err := c.flush(); err != nil {
					return err
				}
				select {
				case pending <- id:
				case <-ctx.Done():
					return ctx.Err()
				case err := <-readErr:
					return fmt.Errorf("connection: %w", err)
				}
			}
		}
		now := time.Now().UnixNano()
		if confirm {
			sentAt[admitted%uint64(window)].Store(now)
			admitted++
		}
		stamp(payload, id, now)
		frame = protocol.AppendPub(frame[:0], subject, "", payload, crcTok)
		written++
		if !confirm {
			st.published.Add(1)
		}
		return c.write(frame)
	}
	var perPub float64
	if d.cfg.Rate > 0 {
		perPub = float64(d.cfg.Rate) / float64(d.cfg.Pubs)
	}
	ps.start = time.Now()
	var seq uint64
	for n < 0 || int64(seq) < n {
		if n < 0 && st.pubOver() {
			break
		}
		select {
		case id := <-retry:
			if err := send(id); err != nil {
				return ps, err
			}
			continue
		default:
		}
		if perPub > 0 {
			due := ps.start.Add(time.Duration(float64(seq) / perPub * 1e9))
			if wait := time.Until(due); wait > 0 {
				if err := c.flush(); err != nil {
					return ps, err
				}
				time.Sleep(wait)
			}
		}
		if err := send(msgID(idx, seq)); err != nil {
			return ps, err
		}
		seq++
	}
	if err := c.flush(); err != nil {
		return ps, err
	}
	// Drain: wait for every answer, resending retriable refusals.
	if confirm {
		for answered.Load() < written || len(retry) > 0 {
			select {
			case id := <-retry:
				if err := send(id); err != nil {
					return ps, err
				}
				if err := c.flush(); err != nil {
					return ps, err
				}
			case <-notify:
			case err := <-readErr:
				return ps, fmt.Errorf("connection: %w", err)
			case <-ctx.Done():
				return ps, fmt.Errorf("waiting for confirms (%d of %d): %w", answered.Load(), written, ctx.Err())
			}
		}
	} else {
		if err := c.writeFlush([]byte("PING\r\n")); err != nil {
			return ps, err
		}
		select {
		case <-pongs:
		case err := <-readErr:
			return ps, fmt.Errorf("connection: %w", err)
		case <-ctx.Done():
			return ps, fmt.Errorf("waiting for PONG: %w", ctx.Err())
		}
	}
	ps.end = time.Now()
	ps.sent = seq
	ps.errors, ps.retries = refused.Load(), retried.Load()
	if e := firstErr.Load(); e != nil {
		ps.firstErr = *e
	}
	return ps, nil
}

// ackLines accumulates ACK lines for handles, keeping each line under the
// control-line limit.
type ackLines struct {
	buf     []byte
	lineLen int // bytes of the open line (0: none open)
	lines   int // complete lines in buf
	per     int // handles per line (1: --ack each)
	inLine  int
}

const maxAckLine = 4000

func (a *ackLines) add(handle []byte) {
	if a.lineLen > 0 && (a.inLine >= a.per || a.lineLen+1+len(handle)+2 > maxAckLine) {
		a.end()
	}
	if a.lineLen == 0 {
		a.buf = append(a.buf, "ACK"...)
		a.lineLen = 3
	}
	a.buf = append(a.buf, ' ')
	a.buf = append(a.buf, handle...)
	a.lineLen += 1 + len(handle)
	a.inLine++
}

// addLine adds a whole ACK line (its CRLF included) sent before.
func (a *ackLines) addLine(line []byte) {
	a.end()
	a.buf = append(a.buf, line...)
	a.lines++
}

func (a *ackLines) end() {
	if a.lineLen > 0 {
		a.buf = append(a.buf, "\r\n"...)
		a.lines++
		a.lineLen, a.inLine = 0, 0
	}
}

// take closes the open line and returns the bytes and line count, resetting.
func (a *ackLines) take() ([]byte, int) {
	a.end()
	b, n := a.buf, a.lines
	a.buf, a.lines = a.buf[len(a.buf):], 0
	if cap(a.buf) < 1024 {
		a.buf = make([]byte, 0, 64<<10)
	}
	return b, n
}

// answerQueue is the FIFO of commands awaiting their answer (strict answers).
type answerQueue struct{ q []byte }

func (a *answerQueue) push(kind byte, n int) {
	for range n {
		a.q = append(a.q, kind)
	}
}

func (a *answerQueue) pop() byte {
	if len(a.q) == 0 {
		return 0
	}
	k := a.q[0]
	a.q = a.q[1:]
	if len(a.q) == 0 {
		a.q = a.q[:0:0]
	}
	return k
}

const (
	ansPoll byte = 'P'
	ansAck  byte = 'A'
	ansSub  byte = 'S'
)

func (d *fibrilDriver) consume(ctx context.Context, idx int, st *runState, ready func()) error {
	if d.cfg.Mode == "plain" {
		return d.consumePlain(ctx, idx, st, ready)
	}
	c, err := dialWire(ctx, d.addr, connMode{fibril: true, crc: d.cfg.CRC})
	if err != nil {
		return err
	}
	d.track(c)
	stop := context.AfterFunc(ctx, c.close)
	defer stop()
	defer c.close()

	push := d.cfg.Consume == "push"
	acks := ackLines{per: 1 << 30, buf: make([]byte, 0, 64<<10)}
	if d.cfg.Ack == "each" {
		acks.per = 1
	}
	var aq answerQueue
	pollFrame := protocol.AppendPoll(nil, d.cfg.Topic, d.cfg.Group, d.cfg.Batch, 1000)
	pending := 0 // handles added since the last flush of acks (push)
	ackEvery := max(1, d.cfg.Credit/4)
	var out []byte
	var ackErrs int
	var bad atomic.Int64

	// sentAcks holds the ACK lines awaiting their answer, in order, so a
	// retriable refusal (queue_full: a follower's forwarding window to the
	// leader is full) is sent again with the next flush. The lines stay
	// valid: take never reuses the bytes it returned.
	var sentAcks [][]byte
	resend := false // a refused ACK line waits in acks
	flushAcks := func(withPoll bool) error {
		resend = false
		b, n := acks.take()
		aq.push(ansAck, n)
		for rest := b; len(rest) > 0; {
			i := bytes.Index(rest, []byte("\r\n")) + 2
			sentAcks = append(sentAcks, rest[:i])
			rest = rest[i:]
		}
		out = append(out[:0], b...)
		if withPoll && !st.isDone() {
			out = append(out, pollFrame...)
			aq.push(ansPoll, 1)
		}
		pending = 0
		if len(out) == 0 {
			return nil
		}
		return c.writeFlush(out)
	}

	h := protocol.HandlerFunc(func(cmd *protocol.Command) error {
		switch cmd.Op {
		case protocol.OpMsg, protocol.OpHMsg:
			st.deliver(idx, cmd.Payload, attemptOf(cmd.Reply), nil)
			acks.add(cmd.Reply)
			pending++
			if push && pending >= ackEvery {
				return flushAcks(false)
			}
		case protocol.OpOK:
			switch aq.pop() {
			case ansPoll:
				return flushAcks(true)
			case ansAck:
				sentAcks = sentAcks[1:]
			case ansSub:
			default:
				return fmt.Errorf("unexpected +OK %q", cmd.Text)
			}
		case protocol.OpErr:
			k := aq.pop()
			retriable := protocol.ParseErrText(cmd.Text).Retriable()
			switch {
			case k == ansAck:
				line := sentAcks[0]
				sentAcks = sentAcks[1:]
				if retriable {
					st.ackRetries.Add(1)
					acks.addLine(line)
					resend = true
					return nil
				}
				ackErrs++
				st.ackRefused(string(cmd.Text))
				return nil
			case k == ansPoll && retriable:
				st.pollRetries.Add(1)
				return flushAcks(true)
			}
			return fmt.Errorf("%w: -ERR '%s'", errServer, cmd.Text)
		case protocol.OpPing:
			return c.pong()
		}
		return nil
	})
	idle := func() error {
		// Pull mode flushes acks with each POLL; one refused for a moment
		// after the last POLL is resent here.
		if (push && pending > 0) || resend {
			return flushAcks(false)
		}
		return nil
	}

	var start []byte
	if push {
		start = protocol.AppendSub(nil, d.cfg.Topic, d.cfg.Group, "1", d.cfg.Credit)
		aq.push(ansSub, 1)
	} else {
		for range d.cfg.PollDepth {
			start = append(start, pollFrame...)
			aq.push(ansPoll, 1)
		}
	}
	if err := c.writeFlush(start); err != nil {
		return err
	}
	ready()
	err = c.serve(h, idle, func(error) { bad.Add(1) })
	if n := bad.Load(); n > 0 {
		st.trackers[0].fail("consumer %d: %d deliveries refused by the parser (bad checksum?)", idx, n)
	}
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// consumePlain subscribes without a group on a NATS-mode connection.
func (d *fibrilDriver) consumePlain(ctx context.Context, idx int, st *runState, ready func()) error {
	c, err := dialWire(ctx, d.addr, connMode{})
	if err != nil {
		return err
	}
	d.track(c)
	stop := context.AfterFunc(ctx, c.close)
	defer stop()
	defer c.close()
	subscribed := false
	h := protocol.HandlerFunc(func(cmd *protocol.Command) error {
		switch cmd.Op {
		case protocol.OpMsg, protocol.OpHMsg:
			st.deliver(idx, cmd.Payload, 1, nil)
		case protocol.OpPong:
			if !subscribed {
				subscribed = true
				ready()
			}
		case protocol.OpPing:
			return c.pong()
		case protocol.OpErr:
			return fmt.Errorf("%w: -ERR '%s'", errServer, cmd.Text)
		}
		return nil
	})
	sub := protocol.AppendSub(nil, d.cfg.Topic, "", "1", 0)
	if err := c.writeFlush(append(sub, "PING\r\n"...)); err != nil {
		return err
	}
	err = c.serve(h, nil, func(error) {})
	if ctx.Err() != nil {
		return nil
	}
	return err
}
