package server

import (
	"strings"
	"sync"
	"testing"
)

// written drains the head of q as client.releaseLocked does and returns
// the answers in the order they would reach the outbox.
func (q *answerQueue) writeHeadLocked() []string {
	var out []string
	bytes := 0
	head := q.headLocked()
	for _, a := range head {
		bytes += len(a.data) + a.own.n + len(a.tail)
		out = append(out, string(a.data)+string(a.tail))
		a.written.Store(true)
	}
	q.dropLocked(len(head), bytes)
	return out
}

func TestAnswerQueueKeepsCommandOrder(t *testing.T) {
	for _, tc := range []struct {
		name  string
		order []int // which slot is filled at each step
		want  []string
	}{
		{"in order", []int{0, 1, 2}, []string{"a", "b", "c"}},
		{"reversed", []int{2, 1, 0}, []string{"a", "b", "c"}},
		{"middle first", []int{1, 0, 2}, []string{"a", "b", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var q answerQueue
			slots := []*answer{q.reserve(), q.reserve(), q.reserve()}
			var got []string
			for step, i := range tc.order {
				q.mu.Lock()
				if !q.fillLocked(slots[i], []byte(string(rune('a'+i))), false) {
					t.Fatalf("fill of an open queue refused")
				}
				got = append(got, q.writeHeadLocked()...)
				if want := int64(q.pendingHeldBytes()); q.held.Load() != want {
					t.Fatalf("step %d: held %d, want %d", step, q.held.Load(), want)
				}
				q.mu.Unlock()
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Fatalf("written %v, want %v", got, tc.want)
			}
			if q.pendingLocked() != 0 || q.held.Load() != 0 || q.slots != nil {
				t.Fatalf("after all: %d pending, %d held", q.pendingLocked(), q.held.Load())
			}
		})
	}
}

// pendingHeldBytes is what held must be: the bytes of done slots not yet
// written.
func (q *answerQueue) pendingHeldBytes() int {
	n := 0
	for _, a := range q.slots {
		if a.done {
			n += len(a.data) + a.own.n
		}
		n += len(a.tail)
	}
	return n
}

func TestAnswerQueueTailFollowsItsSlot(t *testing.T) {
	var q answerQueue
	first, sub := q.reserve(), q.reserve()
	q.mu.Lock()
	sub.tail = append(sub.tail, "msg"...)
	q.holdTailLocked(3)
	q.fillLocked(sub, []byte("+OK"), false)
	if got := q.writeHeadLocked(); got != nil {
		t.Fatalf("written %v behind an unfilled slot", got)
	}
	if q.held.Load() != 6 {
		t.Fatalf("held %d, want 6 (the +OK and its tail)", q.held.Load())
	}
	q.fillLocked(first, []byte("1"), false)
	got := q.writeHeadLocked()
	q.mu.Unlock()
	if strings.Join(got, ",") != "1,+OKmsg" || !sub.written.Load() || q.held.Load() != 0 {
		t.Fatalf("written %v (sub written %v, held %d)", got, sub.written.Load(), q.held.Load())
	}
}

func TestAnswerQueueWindow(t *testing.T) {
	var q answerQueue
	c := &client{}
	q.mu.Lock()
	defer q.mu.Unlock()
	a, ok1 := q.reserveConfirmLocked(c, 2)
	_, ok2 := q.reserveConfirmLocked(c, 2)
	if _, ok3 := q.reserveConfirmLocked(c, 2); !ok1 || !ok2 || ok3 {
		t.Fatalf("window of 2: reserved %v %v %v, want true true false", ok1, ok2, ok3)
	}
	if a.confirmOf != c || q.unconfirmed != 2 {
		t.Fatalf("confirmOf %p, unconfirmed %d", a.confirmOf, q.unconfirmed)
	}
	q.fillLocked(a, []byte("+OK 0:1"), true)
	if _, ok := q.reserveConfirmLocked(c, 2); !ok {
		t.Fatal("a confirm did not reopen the window")
	}
}

func TestAnswerQueueClosed(t *testing.T) {
	var q answerQueue
	a, b := q.reserve(), q.reserve()
	q.mu.Lock()
	q.fillLocked(b, []byte("held"), false)
	q.closeLocked()
	if q.fillLocked(a, []byte("late"), false) || a.done {
		t.Fatal("a fill after close was stored")
	}
	q.appendLocked(&answer{})
	if q.pendingLocked() != 0 || q.held.Load() != 0 {
		t.Fatalf("closed queue: %d pending, %d held", q.pendingLocked(), q.held.Load())
	}
	_, ok := q.reserveConfirmLocked(&client{}, 1)
	q.fillLocked(a, nil, true) // its confirm still reopens the window
	q.mu.Unlock()
	if !ok || q.unconfirmed != 0 {
		t.Fatalf("window on a closed queue: reserved %v, unconfirmed %d", ok, q.unconfirmed)
	}
}

// TestAnswerQueueConcurrentFills fills slots from many goroutines, as
// partition actors confirm, and checks every answer is written once, in
// command order.
func TestAnswerQueueConcurrentFills(t *testing.T) {
	var q answerQueue
	const n = 500
	slots := make([]*answer, n)
	for i := range slots {
		slots[i] = q.reserve()
	}
	var (
		mu  sync.Mutex // stands for client.mu: the outbox
		out []string
		wg  sync.WaitGroup
	)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 4 {
				q.mu.Lock()
				q.fillLocked(slots[i], []byte{byte(i), byte(i >> 8)}, false)
				mu.Lock()
				out = append(out, q.writeHeadLocked()...)
				mu.Unlock()
				q.mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(out) != n {
		t.Fatalf("%d answers written, want %d", len(out), n)
	}
	for i, s := range out {
		if s != string([]byte{byte(i), byte(i >> 8)}) {
			t.Fatalf("answer %d out of order: %q", i, s)
		}
	}
}
