package broker

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// commitLog records the completions a commitPipeline runs, in order.
type commitLog struct{ got []string }

func (l *commitLog) pub(name string) PublishDone {
	return PublishFunc(func(pos Position, err error) { l.got = append(l.got, fmt.Sprintf("%s:%d:%v", name, pos.Seq, err)) })
}

func (l *commitLog) set(name string) func(error) {
	return func(err error) { l.got = append(l.got, fmt.Sprintf("%s:%v", name, err)) }
}

// round fills c with one round's completions: a publish at seq, a settle
// that succeeded, one that failed on its own, and a closure that reports
// the outcome it sees.
func (l *commitLog) round(c *commitPipeline, name string, seq Seq) {
	c.beginRound()
	c.confirm(l.pub(name+"-pub"), Position{Seq: seq})
	c.answer(l.set(name+"-ack"), nil)
	c.answer(l.set(name+"-bad"), ErrUnknownHandle)
	c.onCommit(func() { l.got = append(l.got, fmt.Sprintf("%s-after:%v", name, c.dataErr)) })
}

// TestCommitPipelineCompletes: a sealed batch runs its publish confirms,
// then its settle answers, then its closures; an events failure fails the
// settles but not the publishes (their data is durable), a data fsync
// failure fails everything and is what the closures see, only a batch
// without error moves the durable frontier, and the outcome is forgotten
// once the completions ran.
func TestCommitPipelineCompletes(t *testing.T) {
	evErr, dataErr := errors.New("events lost"), errors.New("fsync failed")
	for _, tc := range []struct {
		name    string
		err     error // the round's events failed
		fail    error // an fsync failed (syncBatch.fail)
		want    string
		safeLow Seq
	}{
		{"durable", nil, nil, "r-pub:7:<nil> r-ack:<nil> r-bad:" + ErrUnknownHandle.Error() + " r-after:<nil>", 5},
		{"events failed", evErr, nil, "r-pub:7:<nil> r-ack:events lost r-bad:" + ErrUnknownHandle.Error() + " r-after:<nil>", 1},
		{"fsync failed", nil, dataErr, "r-pub:0:fsync failed r-ack:fsync failed r-bad:" + ErrUnknownHandle.Error() + " r-after:fsync failed", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var l commitLog
			c := commitPipeline{safeLow: 1}
			l.round(&c, "r", 7)
			c.roundErr = tc.err
			if c.idle(false) {
				t.Fatal("a round with completions is idle")
			}
			b := c.seal(syncBatch{data: 7, low: 5})
			if len(c.pubs)+len(c.sets)+len(c.after) != 0 {
				t.Fatal("seal left completions in the pipeline")
			}
			if b.err != tc.err || len(b.pubs) != 1 || len(b.sets) != 2 || len(b.after) != 1 {
				t.Fatalf("sealed batch %+v", b)
			}
			if tc.fail != nil {
				b.fail(tc.fail)
			}
			c.complete(&b)
			if got := strings.Join(l.got, " "); got != tc.want {
				t.Fatalf("completions\n got %s\nwant %s", got, tc.want)
			}
			if c.safeLow != tc.safeLow {
				t.Fatalf("safeLow %d, want %d", c.safeLow, tc.safeLow)
			}
			if c.err != nil || c.dataErr != nil {
				t.Fatal("the batch's outcome outlived its completions")
			}
			if cap(c.pubs) == 0 || cap(c.sets) == 0 || cap(c.after) == 0 {
				t.Fatal("the batch's slices were not kept for the next round")
			}
		})
	}
}

// TestCommitPipelineIdle: a round without completions is idle unless,
// with group commit, it wrote records not known durable, or its append
// failed (the error must reach nobody, but the frontier must not move).
func TestCommitPipelineIdle(t *testing.T) {
	for _, tc := range []struct {
		pipelined, written bool
		roundErr           error
		want               bool
	}{
		{false, false, nil, true},
		{false, true, nil, true},
		{true, false, nil, true},
		{true, true, nil, false},
		{false, false, errors.New("append"), false},
	} {
		c := commitPipeline{pipelined: tc.pipelined, roundErr: tc.roundErr}
		if got := c.idle(tc.written); got != tc.want {
			t.Errorf("pipelined %v written %v err %v: idle %v, want %v", tc.pipelined, tc.written, tc.roundErr, got, tc.want)
		}
	}
}

// TestCommitPipelineDrainsInOrder: pending batches complete oldest first
// and stop at the first one not durable; after an fsync failure every one
// completes, failed.
func TestCommitPipelineDrainsInOrder(t *testing.T) {
	var l commitLog
	c := commitPipeline{pipelined: true}
	for i, name := range []string{"a", "b", "c"} {
		c.beginRound()
		c.confirm(l.pub(name), Position{Seq: Seq(i + 1)})
		c.pending = append(c.pending, c.seal(syncBatch{data: Seq(i + 1), low: Seq(i + 2)}))
	}
	durableTo := Seq(2)
	durable := func(b *syncBatch) bool { return b.data <= durableTo }
	c.drain(nil, durable)
	if got := strings.Join(l.got, " "); got != "a:1:<nil> b:2:<nil>" {
		t.Fatalf("durable to 2: completed %s", got)
	}
	if len(c.pending) != 1 || c.pending[0].data != 3 || c.safeLow != 3 {
		t.Fatalf("left %d pending (first %d), safeLow %d", len(c.pending), c.pending[0].data, c.safeLow)
	}
	c.drain(nil, durable)
	if len(l.got) != 2 {
		t.Fatal("a batch not durable completed")
	}
	c.drain(errors.New("fsync failed"), durable)
	if got := l.got[len(l.got)-1]; got != "c:0:fsync failed" || len(c.pending) != 0 {
		t.Fatalf("after the failure: %s, %d pending", got, len(c.pending))
	}
	if c.safeLow != 3 {
		t.Fatalf("a failed batch moved safeLow to %d", c.safeLow)
	}
}

// TestCommitPipelineBorrowed: what unanswered deliveries hold is the
// lowest offset and SwapCount over pending batches with deliveries and
// collecting polls.
func TestCommitPipelineBorrowed(t *testing.T) {
	for _, tc := range []struct {
		name       string
		pending    []syncBatch
		collecting []*pollWaiter
		low        Seq
		swap       uint64
		ok         bool
	}{
		{"nothing", nil, nil, 0, 0, false},
		{"batches without deliveries", []syncBatch{{swap: 1}, {swap: 2}}, nil, 0, 0, false},
		{"a batch", []syncBatch{{minDeliv: 9, swap: 4}}, nil, 9, 4, true},
		{"the lowest of each", []syncBatch{{minDeliv: 9, swap: 2}, {minDeliv: 5, swap: 3}}, []*pollWaiter{{lowBorrowed: 7, swap: 1}}, 5, 1, true},
	} {
		c := commitPipeline{pending: tc.pending, collecting: tc.collecting}
		low, swap, ok := c.borrowed()
		if low != tc.low || swap != tc.swap || ok != tc.ok {
			t.Errorf("%s: borrowed %d, %d, %v; want %d, %d, %v", tc.name, low, swap, ok, tc.low, tc.swap, tc.ok)
		}
	}
}
