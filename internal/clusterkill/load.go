package clusterkill

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fibrilmq/fibril/internal/history"
	"github.com/fibrilmq/fibril/protocol"
)

// PayloadSize is the size of every published message.
const PayloadSize = 1024

// payload is value v's body: v, a space, and filler derived from v up to
// PayloadSize bytes, so a delivery can be checked whole against its name.
func payload(v string) []byte {
	b := make([]byte, 0, PayloadSize)
	b = append(b, v...)
	b = append(b, ' ')
	for i := 0; len(b) < PayloadSize; i++ {
		b = append(b, 'a'+byte((int(v[i%len(v)])+i)%26))
	}
	return b
}

// valueOf names a delivered body: its value, or a "damaged:" name the
// checker finds never published.
func valueOf(body []byte) string {
	v, _, ok := bytes.Cut(body, []byte{' '})
	if !ok || len(v) == 0 || !bytes.Equal(body, payload(string(v))) {
		return fmt.Sprintf("damaged:%q", body[:min(len(body), 40)])
	}
	return string(v)
}

func now() int64 { return time.Now().UnixNano() }

// load is the publisher and the consumer, recording every operation in
// the history and telling the monitor what they see.
type load struct {
	h       *history.Writer
	mon     *monitor
	addrs   []string // the nodes' client addresses
	topic   string
	group   string
	leaseMs int64
	window  int     // unconfirmed publishes at most
	rate    float64 // publishes per second at most (0: as fast as confirms come)
	// keyed gives each publish a Fibril-Key (its value), spreading them
	// over the partitions: an unkeyed one goes to a partition the
	// receiving node serves, when it serves one.
	keyed bool
	logf  func(string, ...any)
}

type pending struct {
	value  string
	invoke int64
}

// publish publishes "p<proc>-<n>" values with confirms until ctx ends,
// keeping up to window unconfirmed on one connection; when it is lost it
// moves to the next node. An answer other than a confirm, or none, is
// recorded as unknown (info): a forwarded publish whose forwarding link
// broke is answered not_leader although the leader may have stored it.
func (l *load) publish(ctx context.Context, proc int) {
	n, node := 0, 0
	pace := &pacer{rate: l.rate}
	for ctx.Err() == nil {
		c, err := dial(l.addrs[node])
		if err != nil {
			node = (node + 1) % len(l.addrs)
			pause(ctx, 20*time.Millisecond)
			continue
		}
		n = l.publishOn(ctx, c, proc, n, pace)
		node = (node + 1) % len(l.addrs)
	}
}

// publishOn runs one connection's publishes from value number n and
// returns the next number once the connection is lost or ctx ends (then
// after the outstanding answers came, or readTimeout passed).
func (l *load) publishOn(ctx context.Context, c *conn, proc, n int, pace *pacer) int {
	slots := make(chan struct{}, l.window)
	pend := make(chan pending, l.window)
	readerDone := make(chan struct{})
	var lastOK atomic.Int64 // the last answer (or the session's start)
	lastOK.Store(now())
	// A window waiting for answers that do not come (the server's PINGs
	// keep the reads alive) is a lost connection too.
	stopWatch := make(chan struct{})
	defer close(stopWatch)
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stopWatch:
				return
			case <-t.C:
				if len(pend) > 0 && time.Duration(now()-lastOK.Load()) > readTimeout {
					c.close()
					return
				}
			}
		}
	}()
	go func() {
		defer close(readerDone)
		for {
			f, err := c.next()
			if err != nil {
				return
			}
			if f.Op == protocol.OpPing {
				_ = c.write([]byte("PONG\r\n"))
				continue
			}
			if f.Op != protocol.OpOK && f.Op != protocol.OpErr {
				continue
			}
			p := <-pend
			op := history.Op{Kind: history.Publish, Proc: proc, Topic: l.topic, Value: p.value,
				Invoke: p.invoke, Complete: now(), Outcome: history.Info}
			lastOK.Store(op.Complete)
			if f.Op == protocol.OpErr {
				op.Err = string(f.Text)
				pace.backOff(errBackoff)
			} else if pos, stored, err := protocol.ParseConfirm(f.Text); err != nil || !stored {
				op.Err = fmt.Sprintf("confirm %q", f.Text)
			} else {
				op.Outcome, op.Pos = history.OK, fmt.Sprintf("%d:%d", pos.Partition, pos.Seq)
				l.mon.confirmed(int(pos.Partition), op.Invoke, op.Complete)
			}
			_ = l.h.Add(op)
			<-slots
		}
	}()
	var buf, hdr []byte
send:
	for ctx.Err() == nil {
		if d := pace.wait(); d > 0 {
			select {
			case <-time.After(d):
			case <-readerDone:
				break send
			case <-ctx.Done():
				break send
			}
		}
		select {
		case slots <- struct{}{}:
		case <-readerDone:
			break send
		case <-ctx.Done():
			break send
		}
		v := fmt.Sprintf("p%d-%d", proc, n)
		n++
		pend <- pending{v, now()}
		if l.keyed {
			hdr = protocol.AppendHeader(hdr[:0], "Fibril-Key", v)
			buf = protocol.AppendHPub(buf[:0], l.topic, "", hdr, payload(v), protocol.NoCRC)
		} else {
			buf = protocol.AppendPub(buf[:0], l.topic, "", payload(v), protocol.NoCRC)
		}
		if err := c.write(buf); err != nil {
			break
		}
	}
	// Wait for the outstanding answers (the window's slots all free).
	for range l.window {
		select {
		case slots <- struct{}{}:
			continue
		case <-readerDone:
		}
		break
	}
	c.close()
	<-readerDone
	lost := false
	for {
		select {
		case p := <-pend:
			lost = true
			_ = l.h.Add(history.Op{Kind: history.Publish, Proc: proc, Topic: l.topic, Value: p.value,
				Invoke: p.invoke, Complete: now(), Outcome: history.Info, Err: "connection lost"})
			continue
		default:
		}
		break
	}
	_ = l.h.Add(history.Op{Kind: history.Close, Proc: proc, Outcome: history.OK, Invoke: lastOK.Load(), Complete: now(),
		Err: map[bool]string{true: "lost", false: ""}[lost]})
	return n
}

// errBackoff is how long the publisher waits after a publish answered
// -ERR (an election under way), as the SDKs do, instead of sending the
// rest of the window into the same refusal.
const errBackoff = 20 * time.Millisecond

// pacer spaces the publisher's sends: at most rate a second (0: no
// bound), and none for a while after a refusal. Shared by the writer and
// the reader of a connection.
type pacer struct {
	rate float64
	mu   sync.Mutex
	next time.Time // no send before it
}

// wait returns how long to wait before the next send, and counts it sent.
func (p *pacer) wait() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	t := time.Now()
	if p.next.Before(t) {
		p.next = t // no bursts to catch up
	}
	d := p.next.Sub(t)
	if p.rate > 0 {
		p.next = p.next.Add(time.Duration(float64(time.Second) / p.rate))
	}
	return d
}

// backOff holds the next send back d from now.
func (p *pacer) backOff(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next = later(p.next, time.Now().Add(d))
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// pollMax and pollWaitMs shape the consumer's polls.
const (
	pollMax    = 64
	pollWaitMs = 200
)

// consume polls every node in turn (a node that leads no partition of the
// topic answers not_leader) and acks what it gets, one ACK per delivery,
// pipelined on the connection the poll came on. With quiet > 0 it returns
// once no poll has brought anything for that long; otherwise when ctx ends.
func (l *load) consume(ctx context.Context, proc int, quiet time.Duration) {
	conns := make([]*conn, len(l.addrs))
	lastOK := make([]int64, len(l.addrs))
	defer func() {
		for i, c := range conns {
			if c != nil {
				c.close()
				_ = l.h.Add(history.Op{Kind: history.Close, Proc: proc, Outcome: history.OK, Invoke: lastOK[i], Complete: now()})
			}
		}
	}()
	drop := func(i int) {
		conns[i].close()
		conns[i] = nil
		_ = l.h.Add(history.Op{Kind: history.Close, Proc: proc, Outcome: history.OK, Invoke: lastOK[i], Complete: now(), Err: "lost"})
	}
	last := time.Now()
	for node := 0; ctx.Err() == nil; node = (node + 1) % len(l.addrs) {
		if quiet > 0 && time.Since(last) > quiet {
			return
		}
		if conns[node] == nil {
			c, err := dial(l.addrs[node])
			if err != nil {
				pause(ctx, 10*time.Millisecond)
				continue
			}
			conns[node], lastOK[node] = c, now()
		}
		c := conns[node]
		got, err := l.pollOnce(c, proc, node)
		if err != nil && !isAnswer(err) {
			drop(node)
			continue
		}
		lastOK[node] = now()
		if len(got) > 0 {
			last = time.Now()
			if err := l.ackAll(c, proc, got); err != nil {
				drop(node)
				continue
			}
			lastOK[node] = now()
		}
	}
}

// pollOnce sends one POLL on c and records what it brought; an -ERR
// answer (not_leader on a node that leads no partition of the topic) is
// returned as an *errAnswer.
func (l *load) pollOnce(c *conn, proc, node int) ([]history.Op, error) {
	inv := now()
	if err := c.write(protocol.AppendPoll(nil, l.topic, l.group, pollMax, pollWaitMs)); err != nil {
		return nil, err
	}
	var got []history.Op
	for {
		f, err := c.next()
		if err == nil && time.Duration(now()-inv) > readTimeout {
			err = errors.New("clusterkill: POLL unanswered (PINGs only)")
		}
		if err != nil {
			// What came was delivered: record it (its lease runs out and
			// it is delivered again).
			l.delivered(got, node, inv, now())
			return nil, err
		}
		switch f.Op {
		case protocol.OpPing:
			_ = c.write([]byte("PONG\r\n"))
		case protocol.OpMsg, protocol.OpHMsg:
			h, herr := protocol.ParseHandle(f.Reply)
			op := history.Op{Kind: history.Deliver, Proc: proc, Topic: l.topic, Group: l.group, Value: valueOf(f.Payload),
				Handle: string(f.Reply), LeaseMs: l.leaseMs, Outcome: history.OK, Invoke: inv}
			if herr == nil {
				op.Pos, op.Attempt = fmt.Sprintf("%d:%d", h.Partition, h.Seq), int(h.Attempt)
			} else {
				op.Err = fmt.Sprintf("handle %q: %v", f.Reply, herr)
			}
			got = append(got, op)
		case protocol.OpOK:
			l.delivered(got, node, inv, now())
			return got, nil
		case protocol.OpErr:
			l.delivered(got, node, inv, now())
			if !strings.Contains(string(f.Text), "not_leader") {
				l.logf("clusterkill: POLL on %s answered -ERR %s", l.addrs[node], f.Text)
			}
			return got, &errAnswer{string(f.Text)}
		}
	}
}

// delivered records the deliveries of one poll answered at complete.
func (l *load) delivered(got []history.Op, node int, invoke, complete int64) {
	for i := range got {
		got[i].Complete = complete
		_ = l.h.Add(got[i])
		if h, err := protocol.ParseHandle([]byte(got[i].Handle)); err == nil {
			l.mon.delivered(node, int(h.Partition), invoke, complete)
		}
	}
}

// ackAll sends an ACK for each delivery and records each answer: +OK is
// ok; -ERR or no answer is unknown (a settle cut off by a leader change
// may have been applied).
func (l *load) ackAll(c *conn, proc int, dels []history.Op) error {
	var buf []byte
	inv := now()
	for _, d := range dels {
		h, err := protocol.ParseHandle([]byte(d.Handle))
		if err != nil {
			continue
		}
		buf = protocol.AppendAck(buf, h)
	}
	werr := c.write(buf)
	var err error = werr
	for _, d := range dels {
		if _, perr := protocol.ParseHandle([]byte(d.Handle)); perr != nil {
			continue
		}
		op := history.Op{Kind: history.Ack, Proc: proc, Topic: l.topic, Group: l.group, Value: d.Value, Handle: d.Handle,
			Invoke: inv, Outcome: history.Info}
		for err == nil {
			f, rerr := c.next()
			if rerr == nil && time.Duration(now()-inv) > readTimeout {
				rerr = errors.New("clusterkill: ACK unanswered (PINGs only)")
			}
			if rerr != nil {
				err = rerr
				break
			}
			if f.Op == protocol.OpPing {
				_ = c.write([]byte("PONG\r\n"))
				continue
			}
			if f.Op == protocol.OpOK {
				op.Outcome = history.OK
			} else if f.Op == protocol.OpErr {
				op.Err = string(f.Text)
			} else {
				continue
			}
			break
		}
		if err != nil && op.Err == "" {
			op.Err = err.Error()
		}
		op.Complete = now()
		_ = l.h.Add(op)
	}
	return err
}

// pause waits d, or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
