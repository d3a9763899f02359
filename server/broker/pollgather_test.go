package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

func TestPollGathersAcrossPartitions(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("jobs", TopicConfig{Partitions: 4})
	g := e.group(tp, "w", GroupConfig{})
	var want []string
	for i := 0; i < 8; i++ { // round robin: two per partition
		s := strconv.Itoa(i)
		want = append(want, s)
		e.publish(tp, s)
	}
	perPart := func(ds []Delivery) map[Partition]int {
		m := map[Partition]int{}
		for _, d := range ds {
			m[d.Handle.Partition]++
		}
		return m
	}
	// a non-waiting poll gathers too
	ds := e.pollNow(g, 6, 0)
	if len(ds) != 6 || len(perPart(ds)) < 3 {
		t.Fatalf("poll(6) got %d from partitions %v, want 6 from at least 3", len(ds), perPart(ds))
	}
	got := datas(ds)
	ds = e.poll(g, 10)
	if len(ds) != 2 {
		t.Fatalf("second poll got %d, want the 2 left", len(ds))
	}
	got = append(got, datas(ds)...)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	// order within a partition holds
	for i := 1; i < len(ds); i++ {
		if ds[i].Handle.Partition == ds[i-1].Handle.Partition && ds[i].Handle.Seq < ds[i-1].Handle.Seq {
			t.Fatalf("out of order within partition: %+v", ds)
		}
	}

	// long poll unchanged: waits for the first message, answers with it
	ch := make(chan []Delivery, 1)
	if err := g.PollAsync(10, -1, 0, func(ds []Delivery, err error) {
		out := make([]Delivery, len(ds))
		for i := range ds {
			out[i] = ds[i].clone()
		}
		ch <- out
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case ds := <-ch:
		t.Fatalf("empty group answered a waiting poll with %v", datas(ds))
	default:
	}
	e.publish(tp, "late")
	select {
	case ds := <-ch:
		if !slices.Equal(datas(ds), []string{"late"}) {
			t.Fatalf("long poll got %v", datas(ds))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("long poll not answered")
	}
	// a timed poll on an empty group still times out with nothing
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	done := make(chan int, 1)
	if err := g.PollAsync(4, 20*time.Millisecond, 0, func(ds []Delivery, err error) { done <- len(ds) }); err != nil {
		t.Fatal(err)
	}
	select {
	case n := <-done:
		if n != 0 {
			t.Fatalf("timed poll got %d", n)
		}
	case <-ctx.Done():
		t.Fatal("timed poll not answered")
	}
}

func TestOwnerReleasedSince(t *testing.T) {
	e := newEnv(t, nil)
	b := e.b
	gen := b.relGen.Load()
	if b.ownerReleasedSince(5, gen) {
		t.Fatal("nothing released yet")
	}
	b.ReleaseOwner(6)
	if b.ownerReleasedSince(5, gen) || !b.ownerReleasedSince(6, gen) {
		t.Fatal("release of 6 misreported")
	}
	b.ReleaseOwner(5)
	if !b.ownerReleasedSince(5, gen) || b.ownerReleasedSince(5, b.relGen.Load()) {
		t.Fatal("release of 5 misreported")
	}
	gen = b.relGen.Load()
	for i := 0; i < releasedRing; i++ {
		b.ReleaseOwner(OwnerID(1000 + i))
	}
	if !b.ownerReleasedSince(5, gen) {
		t.Fatal("after a full ring of releases a poll must assume the worst")
	}
}

// Concurrent pollers on four partitions while messages arrive: every
// message is delivered exactly once (long leases, all acked) and every
// poll is answered.
func TestPollGatherConcurrent(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("jobs", TopicConfig{Partitions: 4})
	g := e.group(tp, "w", GroupConfig{})
	const n = 400
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go func() {
		for i := 0; i < n; i++ {
			if _, err := tp.Publish(ctx, Message{Subject: "jobs", Data: []byte(strconv.Itoa(i))}); err != nil {
				t.Errorf("publish: %v", err)
				return
			}
		}
	}()
	seen := make(chan Delivery, n+100)
	errs := make(chan error, 3)
	var total atomic.Int64
	for w := 0; w < 3; w++ {
		go func() {
			for total.Load() < n {
				pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
				ds, err := g.Poll(pctx, 7)
				pcancel()
				if err != nil {
					if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
						continue
					}
					errs <- err
					return
				}
				if len(ds) > 7 {
					errs <- fmt.Errorf("poll(7) returned %d", len(ds))
					return
				}
				for _, d := range ds {
					if err := d.Ack(ctx); err != nil {
						errs <- err
						return
					}
					seen <- d
					total.Add(1)
				}
			}
			errs <- nil
		}()
	}
	for w := 0; w < 3; w++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(seen)
	got := map[string]int{}
	for d := range seen {
		got[string(d.Data)]++
		if d.Attempt != 1 {
			t.Errorf("message %s delivered with attempt %d", d.Data, d.Attempt)
		}
	}
	if len(got) != n {
		t.Fatalf("%d distinct messages, want %d", len(got), n)
	}
	for k, c := range got {
		if c != 1 {
			t.Fatalf("message %s delivered %d times", k, c)
		}
	}
}
