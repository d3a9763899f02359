package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/wire"
)

// pubCond publishes data to subject on topic t under the conditions e.
func pubCond(t *Topic, subject string, e Expect) (Position, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return t.Publish(ctx, Message{Subject: subject, Data: []byte("x"), Expect: &e})
}

func lastSeq(s Seq) Expect    { return Expect{LastSeq: s, HasLastSeq: true} }
func subjectSeq(s Seq) Expect { return Expect{SubjectSeq: s, HasSubjectSeq: true} }

// wantWrongSeq fails unless err is a *LastSeqError naming last.
func wantWrongSeq(t *testing.T, err error, last Seq, subject bool) {
	t.Helper()
	var le *LastSeqError
	if !errors.Is(err, ErrWrongLastSeq) || !errors.As(err, &le) || le.Last != last || le.Subject != subject {
		t.Fatalf("err %v, want a wrong last sequence naming %d (subject %v)", err, last, subject)
	}
}

// concurrentRound publishes n messages at once (most land in one round),
// each under e, and returns how many were stored and the errors.
func concurrentRound(t *testing.T, tp *Topic, subject string, n int, e Expect) (stored int, errs []error) {
	t.Helper()
	var wg sync.WaitGroup
	errs = make([]error, n)
	for i := range errs {
		wg.Add(1)
		ec := e
		if err := tp.PublishAsync(Message{Subject: subject, Data: []byte(fmt.Sprint(i)), Expect: &ec}, func(_ Position, err error) { errs[i] = err; wg.Done() }); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	for _, err := range errs {
		if err == nil {
			stored++
		}
	}
	return stored, errs
}

// TestExpectLastSeq: a publish with Expect.LastSeq is stored only when the
// partition's last offset is that (0 on an empty one), with or without the
// duplicate window, also after a restart; of racing publishers expecting
// the same offset exactly one is stored; a duplicate is answered as one
// before the check.
func TestExpectLastSeq(t *testing.T) {
	for _, win := range []int64{0, 120_000} {
		t.Run(fmt.Sprint("window=", win), func(t *testing.T) {
			e := newEnv(t, nil)
			tp := e.topic("q", TopicConfig{DuplicateWindowMs: window(win)})
			_, err := pubCond(tp, "q", lastSeq(3))
			wantWrongSeq(t, err, 0, false)
			p, err := pubCond(tp, "q", lastSeq(0))
			if err != nil || p.Seq != 1 {
				t.Fatalf("expect 0 on an empty topic: %+v, %v", p, err)
			}
			_, err = pubCond(tp, "q", lastSeq(0))
			wantWrongSeq(t, err, 1, false)
			if p, err := pubCond(tp, "q", lastSeq(1)); err != nil || p.Seq != 2 {
				t.Fatalf("expect 1: %+v, %v", p, err)
			}
			e.restart()
			tp, _ = e.b.Topic("q")
			_, err = pubCond(tp, "q", lastSeq(1))
			wantWrongSeq(t, err, 2, false)
			if p, err := pubCond(tp, "q", lastSeq(2)); err != nil || p.Seq != 3 {
				t.Fatalf("expect 2 after a restart: %+v, %v", p, err)
			}
			stored, errs := concurrentRound(t, tp, "q", 16, lastSeq(3))
			if stored != 1 {
				t.Fatalf("%d of 16 racing publishes expecting 3 were stored (%v)", stored, errs)
			}
			for _, err := range errs {
				if err != nil {
					wantWrongSeq(t, err, 4, false)
				}
			}
			if p, err := pubCond(tp, "q", lastSeq(4)); err != nil || p.Seq != 5 {
				t.Fatalf("expect 4 after the race: %+v, %v", p, err)
			}
		})
	}
	t.Run("duplicate-first", func(t *testing.T) {
		e := newEnv(t, nil)
		tp := e.topic("q", TopicConfig{})
		a := e.pubID(tp, "a", "a")
		e.pubID(tp, "b", "b")
		m := Message{Subject: "q", Data: []byte("a again"), Header: wire.AppendHeader(nil, wire.HeaderMsgID, "a"), Expect: &Expect{LastSeq: 99, HasLastSeq: true}}
		if p, err := tp.Publish(context.Background(), m); err != nil || !p.Duplicate || p.Seq != a.Seq {
			t.Fatalf("duplicate under a wrong expectation: %+v, %v", p, err)
		}
	})
}

// TestExpectStream: Expect.Stream must be the topic's name.
func TestExpectStream(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("orders", TopicConfig{})
	if _, err := pubCond(tp, "orders", Expect{Stream: "other"}); !errors.Is(err, ErrStreamMismatch) {
		t.Fatalf("expected stream other: %v", err)
	}
	if p, err := pubCond(tp, "orders", Expect{Stream: "orders"}); err != nil || p.Seq != 1 {
		t.Fatalf("expected stream orders: %+v, %v", p, err)
	}
	if p, err := pubCond(tp, "orders", lastSeq(1)); err != nil || p.Seq != 2 {
		t.Fatalf("after one stored: %+v, %v", p, err)
	}
}

// TestExpectSubjectSeq: Expect.SubjectSeq is the last offset of the
// publish's own subject (0: none), in a round, after a restart (the index
// is rebuilt from the log) and after a purge (the records are gone).
func TestExpectSubjectSeq(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("kv", TopicConfig{Subjects: []string{"kv.>"}, Retention: RetentionLimits})
	if p, err := pubCond(tp, "kv.a", subjectSeq(0)); err != nil || p.Seq != 1 {
		t.Fatalf("create a: %+v, %v", p, err)
	}
	if p, err := pubCond(tp, "kv.b", subjectSeq(0)); err != nil || p.Seq != 2 {
		t.Fatalf("create b: %+v, %v", p, err)
	}
	_, err := pubCond(tp, "kv.a", subjectSeq(0))
	wantWrongSeq(t, err, 1, true)
	e.publish(tp, "kv") // a record of subject kv, unconditioned: noted too
	if p, err := pubCond(tp, "kv.a", subjectSeq(1)); err != nil || p.Seq != 4 {
		t.Fatalf("update a at 1: %+v, %v", p, err)
	}
	e.restart()
	tp, _ = e.b.Topic("kv")
	_, err = pubCond(tp, "kv.a", subjectSeq(1))
	wantWrongSeq(t, err, 4, true)
	_, err = pubCond(tp, "kv.b", subjectSeq(4))
	wantWrongSeq(t, err, 2, true)
	if p, err := pubCond(tp, "kv.b", subjectSeq(2)); err != nil || p.Seq != 5 {
		t.Fatalf("update b at 2 after a restart: %+v, %v", p, err)
	}
	stored, errs := concurrentRound(t, tp, "kv.a", 16, subjectSeq(4))
	if stored != 1 {
		t.Fatalf("%d of 16 racing updates of a at 4 were stored (%v)", stored, errs)
	}
	for _, err := range errs {
		if err != nil {
			wantWrongSeq(t, err, 6, true)
		}
	}
	if err := tp.Purge(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err = pubCond(tp, "kv.a", subjectSeq(6))
	wantWrongSeq(t, err, 0, true)
	if p, err := pubCond(tp, "kv.a", subjectSeq(0)); err != nil || p.Seq != 7 {
		t.Fatalf("create a after a purge: %+v, %v", p, err)
	}
}

// TestSubjectIndexBound: at its bound the index forgets the subject whose
// last record is the oldest; a forgotten subject is "not known" while
// records up to the floor are retained, 0 once they are not; the record
// queue stays within a constant of the subjects held.
func TestSubjectIndexBound(t *testing.T) {
	x := newSubjectIndex(3)
	for i, s := range []string{"a", "b", "c", "a", "d"} { // offsets 1..5; b goes
		x.note(s, Seq(i+1))
	}
	for _, c := range []struct {
		subject string
		first   Seq
		want    Seq
		ok      bool
	}{
		{"a", 1, 4, true}, {"c", 1, 3, true}, {"d", 1, 5, true},
		{"b", 1, 0, false}, {"b", 2, 0, false}, {"b", 3, 0, true}, {"zz", 1, 0, false},
		{"c", 4, 0, true},
	} {
		got, ok := x.lookup(c.subject, c.first)
		if got != c.want || ok != c.ok {
			t.Errorf("lookup(%s, first %d) = %d, %v; want %d, %v", c.subject, c.first, got, ok, c.want, c.ok)
		}
	}
	y := newSubjectIndex(10)
	for i := range 10_000 {
		y.note(fmt.Sprint("s", i%4), Seq(i+1))
	}
	if n := len(y.fifo) - y.head; n > 64+2*4+1 {
		t.Fatalf("%d queued records for 4 subjects", n)
	}
	if got, ok := y.lookup("s3", 1); !ok || got != 10_000 {
		t.Fatalf("s3: %d, %v", got, ok)
	}
}

// TestExpectSubjectUnknownAtBound: a publish whose subject the partition's
// index forgot at its bound fails with ErrSubjectUnknown, stores nothing,
// and a subject still held is checked as before.
func TestExpectSubjectUnknownAtBound(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("kv", TopicConfig{Subjects: []string{"kv.>"}, Retention: RetentionLimits, Durability: DurabilityNone})
	if _, err := pubCond(tp, "kv.first", subjectSeq(0)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range subjectIndexMax {
		wg.Add(1)
		m := Message{Subject: fmt.Sprint("kv.k", i), Data: []byte("v")}
		for {
			err := tp.PublishAsync(m, func(_ Position, err error) {
				if err != nil {
					t.Error(err)
				}
				wg.Done()
			})
			if err == nil {
				break
			}
			if !errors.Is(err, ErrQueueFull) {
				t.Fatal(err)
			}
			time.Sleep(time.Millisecond)
		}
	}
	wg.Wait()
	before := 1 + subjectIndexMax
	if _, err := pubCond(tp, "kv.first", subjectSeq(1)); !errors.Is(err, ErrSubjectUnknown) {
		t.Fatalf("forgotten subject: %v", err)
	}
	if p, err := pubCond(tp, "kv.k7", subjectSeq(9)); err != nil || p.Seq != Seq(before)+1 {
		t.Fatalf("held subject: %+v, %v", p, err)
	}
}
