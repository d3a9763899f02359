package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// Payload layout (every message, both systems):
//
//	[0:8)   message id: publisher index << 40 | sequence within the publisher
//	[8:16)  publish time, Unix nanoseconds, taken just before the frame is written
//	[16:)   filler: a fixed pattern derived from the size, so a consumer can
//	        check the content with one bytes.Equal against a template
//
// The minimum payload is therefore 16 bytes.
const (
	minPayload = 16
	seqBits    = 40
	seqMask    = 1<<seqBits - 1
)

// errShortPayload is returned for a delivery shorter than minPayload.
var errShortPayload = errors.New("payload shorter than 16 bytes")

// msgID packs a publisher index and its sequence number.
func msgID(pub int, seq uint64) uint64 { return uint64(pub)<<seqBits | seq&seqMask }

// template returns a payload of size bytes with the filler pattern in place.
func template(size int) []byte {
	b := make([]byte, size)
	for i := minPayload; i < size; i++ {
		b[i] = byte('a' + (i*7)%26)
	}
	return b
}

// stamp writes the id and the publish time into p (a copy of the template).
func stamp(p []byte, id uint64, nowNanos int64) {
	binary.BigEndian.PutUint64(p[0:8], id)
	binary.BigEndian.PutUint64(p[8:16], uint64(nowNanos))
}

// unstamp reads the id and the publish time of a delivered payload.
func unstamp(p []byte) (id uint64, sentNanos int64, err error) {
	if len(p) < minPayload {
		return 0, 0, errShortPayload
	}
	return binary.BigEndian.Uint64(p[0:8]), int64(binary.BigEndian.Uint64(p[8:16])), nil
}

// Tracker records which message ids arrived, for the end-of-run check: every
// published message arrived, none twice (except as a redelivery), content
// intact. It is safe for concurrent use; each publisher has its own bitmap
// shard so consumers on different publishers rarely contend.
type Tracker struct {
	size     int
	tmpl     []byte
	shards   []trackShard
	unique   atomic.Int64 // distinct ids received
	total    atomic.Int64 // deliveries handled, duplicates included
	dups     atomic.Int64 // deliveries of an id already seen with delivery count 1
	redeliv  atomic.Int64 // deliveries of an id already seen with delivery count > 1
	corrupt  atomic.Int64 // content or checksum mismatches, unknown ids
	firstErr atomic.Pointer[string]
}

type trackShard struct {
	mu   sync.Mutex
	seen []uint64 // bitmap by sequence
	_    [40]byte // keep shards on separate cache lines
}

// NewTracker returns a tracker for pubs publishers of payloads of size bytes.
// Sequences are tracked up to perPub per publisher and grow beyond it.
func NewTracker(pubs, size int, perPub uint64) *Tracker {
	t := &Tracker{size: size, tmpl: template(size), shards: make([]trackShard, pubs)}
	for i := range t.shards {
		t.shards[i].seen = make([]uint64, perPub/64+1)
	}
	return t
}

func (t *Tracker) fail(format string, a ...any) {
	t.corrupt.Add(1)
	s := fmt.Sprintf(format, a...)
	t.firstErr.CompareAndSwap(nil, &s)
}

// Record checks one delivery and returns its publish time and whether it was
// the first delivery of that message. attempt is the delivery count the
// server reported; when it is 0, lookup (if not nil) is asked for it, only
// for a repeated id. The payload is borrowed for the call only.
func (t *Tracker) Record(payload []byte, attempt int, lookup func() int) (sentNanos int64, fresh bool) {
	t.total.Add(1)
	id, sent, err := unstamp(payload)
	if err != nil {
		t.fail("delivery of %d bytes: %v", len(payload), err)
		return 0, false
	}
	if len(payload) != t.size || !bytes.Equal(payload[minPayload:], t.tmpl[minPayload:]) {
		t.fail("message %x: content differs from what was published (%d bytes)", id, len(payload))
		return 0, false
	}
	pub, seq := int(id>>seqBits), id&seqMask
	if pub >= len(t.shards) {
		t.fail("message %x: unknown publisher %d", id, pub)
		return 0, false
	}
	s := &t.shards[pub]
	w, bit := seq/64, uint64(1)<<(seq%64)
	s.mu.Lock()
	for uint64(len(s.seen)) <= w {
		s.seen = append(s.seen, make([]uint64, len(s.seen)+1)...)
	}
	had := s.seen[w]&bit != 0
	s.seen[w] |= bit
	s.mu.Unlock()
	if had {
		if attempt == 0 && lookup != nil {
			attempt = lookup()
		}
		if attempt > 1 {
			t.redeliv.Add(1)
		} else {
			t.dups.Add(1)
			t.fail("message %x delivered twice with delivery count 1", id)
		}
		return sent, false
	}
	t.unique.Add(1)
	return sent, true
}

// Unique returns the number of distinct messages received so far.
func (t *Tracker) Unique() int64 { return t.unique.Load() }

// Missing counts, for publisher pub, the sequences in [0, n) never received.
func (t *Tracker) Missing(pub int, n uint64) (missing uint64, first int64) {
	first = -1
	s := &t.shards[pub]
	s.mu.Lock()
	defer s.mu.Unlock()
	for seq := uint64(0); seq < n; seq++ {
		w := seq / 64
		if w >= uint64(len(s.seen)) || s.seen[w]&(1<<(seq%64)) == 0 {
			if first < 0 {
				first = int64(seq)
			}
			missing++
		}
	}
	return missing, first
}
