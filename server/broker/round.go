package broker

import (
	"encoding/binary"

	"github.com/fibrilmq/fibril/server/seglog"
	"github.com/fibrilmq/fibril/server/stagetime"
)

type cmdKind uint8

const (
	cmdPublish cmdKind = iota + 1
	cmdSettle
	cmdPoll
)

// command is one request to a partition actor, carried by value in its ring.
type command struct {
	kind cmdKind
	// publish
	subject string
	hdrLen  int
	body    []byte   // header block followed by payload; owned by the command
	buf     *bodyBuf // body's pooled buffer, given back once appended (nil: not pooled)
	crc     uint32   // CRC-32 of body, computed once by prepare (0: the log computes it)
	pubDone PublishDone
	// id is the message id in body, found by prepare (dedup.go), and
	// expectLast the publish's Message.ExpectLastMsgID, expect its
	// Message.Expect (copied; nil: none) (expect.go).
	id         msgIDSpan
	expectLast string
	expect     *Expect
	// reserved: the publish holds a place under the topic's
	// max_unsettled_* (Topic.reserve), given back once the round's
	// counters include it (publishStats).
	reserved bool
	recv     int64 // Message.Received (0: not sampled)
	// settle
	h       Handle
	op      SettleOp
	setDone func(error)
	// poll
	poll *pollWaiter
}

// roundInput (actor) is what one round took in and the scratch it needs
// to write it: the commands and control closures taken from the mailbox,
// the publishes among them with the reservations they hold, and the data
// log entries built for those.
type roundInput struct {
	cmds    []command
	ctls    []func(*partition)
	pubs    []*command
	entries []seglog.Entry
	meta    []byte // the entries' record meta, back to back
	// resMsgs, resBytes: reservations of the round's publishes, given
	// back in publishStats (takeReserved).
	resMsgs, resBytes int64
	// sample: the earliest Message.Received of the round's sampled
	// publishes (0: none), the origin of the round's stage samples;
	// appended: when their append returned (noteAppended).
	sample, appended int64
}

// take (actor) takes what arrived in m: at most max commands, and every
// control closure.
func (in *roundInput) take(m *mailbox, max int) {
	in.cmds, in.ctls = m.take(in.cmds[:0], max, in.ctls[:0])
}

// idle reports whether nothing arrived.
func (in *roundInput) idle() bool { return len(in.cmds) == 0 && len(in.ctls) == 0 }

// addPublish gathers a publish command and the reservation it holds.
func (in *roundInput) addPublish(c *command) {
	in.pubs = append(in.pubs, c)
	if c.recv != 0 && (in.sample == 0 || c.recv < in.sample) {
		in.sample = c.recv
	}
	if c.reserved {
		in.resMsgs++
		in.resBytes += int64(len(c.body))
	}
}

// takeReserved returns the reservations gathered since the last call.
func (in *roundInput) takeReserved() (msgs, bytes int64) {
	msgs, bytes = in.resMsgs, in.resBytes
	in.resMsgs, in.resBytes = 0, 0
	return msgs, bytes
}

// dataEntries builds the data log entries of the round's publishes,
// stored at now. They borrow the commands' bodies and the input's meta
// until clearEntries.
func (in *roundInput) dataEntries(now int64) []seglog.Entry {
	need := 0
	for _, c := range in.pubs {
		need += 1 + binary.MaxVarintLen64 + len(c.subject)
	}
	if cap(in.meta) < need {
		in.meta = make([]byte, 0, need)
	}
	m := in.meta[:0]
	in.entries = in.entries[:0]
	for _, c := range in.pubs {
		start := len(m)
		m = encodeMeta(m, c.hdrLen, c.subject)
		in.entries = append(in.entries, seglog.Entry{Meta: m[start:len(m):len(m)], Data: c.body, Time: now, CRC: c.crc})
	}
	return in.entries
}

// clearEntries drops the entries' references once the log has them.
func (in *roundInput) clearEntries() {
	for i := range in.entries {
		in.entries[i] = seglog.Entry{}
	}
}

// recycle gives the round's publish buffers back to pool once the log has
// copied them (or refused them): nothing refers to their bytes after
// that.
func (in *roundInput) recycle(pool *bodyPool) {
	for _, c := range in.pubs {
		pool.put(c.buf)
		c.buf, c.body = nil, nil
	}
}

// reset (end of round) drops the commands, and with them every body,
// callback and waiter they refer to.
func (in *roundInput) reset() {
	for i := range in.cmds {
		in.cmds[i] = command{}
	}
	in.sample, in.appended = 0, 0
}

// noteAppended records the round's sample reaching stagetime.Appended and
// keeps the time: the fsync that makes the round durable is counted as
// begun no earlier (a lane already fsyncing may start the fsync that
// covers the round's records before the actor reads the clock).
func (in *roundInput) noteAppended(r *stagetime.Recorder) {
	if in.sample == 0 || r == nil {
		return
	}
	in.appended = stagetime.Now()
	r.At(stagetime.Appended, in.sample, in.appended)
}
