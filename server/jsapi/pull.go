package jsapi

// SPEC.md 16.2 "Pull requests": CONSUMER.MSG.NEXT with batch, expires,
// no_wait, max_bytes and idle_heartbeat. Each waiting request runs on a
// goroutine of its own (at most Options.MaxWaitingPulls, and the
// consumer's max_waiting) that polls the group and sends deliveries to the
// request's reply subject, ending with JetStream's status messages:
// 404 No Messages, 408 Request Timeout, 409 (Exceeded MaxWaiting, Batch
// Completed, Consumer Deleted, ...) and 100 Idle Heartbeat while idle.

import (
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/fibrilmq/fibril/server/broker"
)

// pollChunk bounds one poll's wait, so a request notices its connection
// closing within it.
const pollChunk = 5 * time.Second

// Next serves a pull request for stream/consumer whose deliveries go to
// reply. It returns at once; what is refused before waiting returns an
// error (answered as status messages here, never as JSON: the reply
// subject is a pull inbox). Exported for +NXT acks.
func (a *API) Next(r Requester, stream, consumer, reply string, body []byte) *APIError {
	if reply == "" {
		return nil // nowhere to deliver: nats-server ignores it too
	}
	req, e := parseNext(body)
	if e != nil {
		a.status(r, reply, 400, "Bad Request", "")
		return nil
	}
	if req.Group != "" {
		a.status(r, reply, 400, "Bad Request - priority groups are not supported by Fibril", "")
		return nil
	}
	id := r.Identity()
	_, g, e := a.findConsumer(id, stream, consumer, id.ConsumeTopic) // POLL's rights
	if e != nil {
		if e.Code == 404 {
			a.status(r, reply, 503, "", "") // no consumer: no responders, as nats-server
		} else {
			a.status(r, reply, 409, e.Description, "")
		}
		return nil
	}
	k := consumerKey{stream, consumer}
	cfg, _ := a.consumerConfigOf(stream, g)
	st := a.stateOf(k)
	st.lastActive.Store(time.Now().UnixNano())
	if st.waiting.Add(1) > int64(cfg.MaxWaiting) || a.waiting.Add(1) > int64(a.opts.MaxWaitingPulls) {
		a.waiting.Add(-1)
		st.waiting.Add(-1)
		a.status(r, reply, 409, "Exceeded MaxWaiting", "")
		return nil
	}
	go func() {
		defer a.waiting.Add(-1)
		defer st.waiting.Add(-1)
		a.pull(r, g, k, st, cfg, reply, req)
		st.lastActive.Store(time.Now().UnixNano())
	}()
	return nil
}

// parseNext reads a pull request body: empty (one message), a bare
// batch size (the old form), or the JSON request.
func parseNext(body []byte) (nextRequest, *APIError) {
	req := nextRequest{Batch: 1}
	if len(body) == 0 {
		return req, nil
	}
	if n, err := strconv.Atoi(string(body)); err == nil {
		req.Batch = n
	} else if err := json.Unmarshal(body, &req); err != nil {
		return req, errInvalidJSON(err)
	}
	if req.Batch <= 0 {
		req.Batch = 1
	}
	if req.Expires < 0 || req.MaxBytes < 0 || req.Heartbeat < 0 {
		return req, errBadRequest("negative expires, max_bytes or idle_heartbeat")
	}
	if req.Heartbeat > 0 && req.Expires > 0 && req.Heartbeat*2 > req.Expires {
		return req, errBadRequest("idle_heartbeat more than half of expires")
	}
	return req, nil
}

type pollResult struct {
	n, bytes int
	err      error
}

// pull delivers up to req.Batch messages to reply (goroutine).
func (a *API) pull(r Requester, g *broker.Group, k consumerKey, st *consumerState, cfg ConsumerConfig, reply string, req nextRequest) {
	ctx := r.Context()
	start := time.Now()
	var deadline time.Time
	if req.Expires > 0 {
		deadline = start.Add(req.Expires)
	}
	left, bytesLeft := req.Batch, req.MaxBytes
	lastSent := start
	ch := make(chan pollResult, 1)
	var out batch // one poll at a time: reused
	for left > 0 {
		if ctx.Err() != nil {
			return
		}
		now := time.Now()
		if !deadline.IsZero() && !now.Before(deadline) {
			a.pending(r, reply, 408, "Request Timeout", left, bytesLeft)
			return
		}
		n := left
		in := g.Info()
		if cfg.MaxAckPending > 0 {
			n = min(n, cfg.MaxAckPending-int(in.Inflight))
		}
		wait := pollChunk
		if !deadline.IsZero() {
			wait = min(wait, deadline.Sub(now))
		}
		if req.Heartbeat > 0 {
			wait = min(wait, max(req.Heartbeat-now.Sub(lastSent), time.Millisecond))
		}
		if req.NoWait {
			wait = 0
		}
		if n <= 0 {
			// At max ack pending: wait for acks, as JetStream does.
			if req.NoWait {
				a.status(r, reply, 409, "Exceeded MaxAckPending", "")
				return
			}
			a.sleep(ctx, min(wait, 50*time.Millisecond))
			if req.Heartbeat > 0 && time.Since(lastSent) >= req.Heartbeat {
				a.heartbeat(r, reply, st)
				lastSent = time.Now()
			}
			continue
		}
		ready := uint64(max(in.Ready, 0))
		err := g.PollAsyncBytes(n, int64(bytesLeft), wait, r.Owner(), func(ds []broker.Delivery, err error) {
			res := pollResult{err: err, n: len(ds)}
			if len(ds) > 0 {
				cseq := st.cseq.Add(uint64(len(ds))) - uint64(len(ds))
				for i := range ds {
					d := &ds[i]
					cseq++
					ready = max(ready, 1) - 1
					out.add(d, Ack{Stream: k.stream, Consumer: k.consumer, Delivered: d.Attempt,
						StreamSeq: uint64(d.Handle.Seq), ConsumerSeq: cseq, Timestamp: d.Time.UnixNano(), Pending: ready})
					res.bytes += len(d.Subject) + len(d.Header) + len(d.Data)
				}
				r.SendBatch(reply, out.msgs())
				out.reset()
			}
			ch <- res
		})
		if errors.Is(err, broker.ErrQueueFull) {
			a.sleep(ctx, time.Millisecond)
			continue
		}
		if err != nil {
			a.status(r, reply, 409, "Consumer Deleted", "")
			return
		}
		var res pollResult
		select {
		case res = <-ch:
		case <-ctx.Done():
			return // the poll's leases go back with the connection
		}
		if res.err != nil {
			a.status(r, reply, 409, "Consumer Deleted", "")
			return
		}
		if res.n == 0 {
			if req.NoWait && deadline.IsZero() {
				a.status(r, reply, 404, "No Messages", "")
				return
			}
			if req.Heartbeat > 0 && time.Since(lastSent) >= req.Heartbeat {
				a.heartbeat(r, reply, st)
				lastSent = time.Now()
			}
			if req.NoWait {
				a.sleep(ctx, min(50*time.Millisecond, time.Until(deadline)))
			}
			continue
		}
		st.lastActive.Store(time.Now().UnixNano())
		lastSent = time.Now()
		left -= res.n
		if req.MaxBytes > 0 {
			bytesLeft -= res.bytes
			if bytesLeft <= 0 && left > 0 {
				a.pending(r, reply, 409, "Batch Completed", left, 0)
				return
			}
		}
	}
}

func (a *API) sleep(ctx interface{ Done() <-chan struct{} }, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-a.quit:
	}
}

// status sends a JetStream status message (header only) to reply.
func (a *API) status(r Requester, reply string, code int, text, extra string) {
	hdr := "NATS/1.0 " + strconv.Itoa(code)
	if text != "" {
		hdr += " " + text
	}
	hdr += "\r\n" + extra + "\r\n"
	r.Send(reply, reply, "", []byte(hdr), nil)
}

// pending sends a status that ends a request with what it had left.
func (a *API) pending(r Requester, reply string, code int, text string, msgs, bytes int) {
	a.status(r, reply, code, text, "Nats-Pending-Messages: "+strconv.Itoa(msgs)+"\r\nNats-Pending-Bytes: "+strconv.Itoa(max(bytes, 0))+"\r\n")
}

func (a *API) heartbeat(r Requester, reply string, st *consumerState) {
	a.status(r, reply, 100, "Idle Heartbeat", "Nats-Last-Consumer: "+strconv.FormatUint(st.cseq.Load(), 10)+"\r\n")
}

// batch is the deliveries of one poll as Requester.SendBatch takes them,
// their ack subjects in one buffer: reused from poll to poll, it costs no
// allocation once grown.
type batch struct {
	subjects []byte
	ends     []int
	out      []Msg
}

// reset empties b once its messages are sent.
func (b *batch) reset() {
	b.subjects, b.ends = b.subjects[:0], b.ends[:0]
	clear(b.out) // the deliveries' bytes were borrowed
	b.out = b.out[:0]
}

// add appends delivery d with the ack subject of ack.
func (b *batch) add(d *broker.Delivery, ack Ack) {
	b.subjects = AppendAckSubject(b.subjects, ack)
	b.ends = append(b.ends, len(b.subjects))
	b.out = append(b.out, Msg{Subject: d.Subject, Header: d.Header, Data: d.Data})
}

// msgs returns the messages added since reset (their replies are set now
// that the subject buffer no longer moves).
func (b *batch) msgs() []Msg {
	start := 0
	for i, end := range b.ends {
		b.out[i].Reply = b.subjects[start:end:end]
		start = end
	}
	return b.out
}
