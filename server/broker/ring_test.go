package broker

import (
	"sync"
	"testing"
)

// TestRingAllocatesChunksOnDemand is the regression test for "each topic
// costs 1.5 MiB of RSS" (issue 24): every partition's 8,192-slot ring was
// allocated whole at open. Now an idle ring holds one chunk, and a busy one
// grows chunk by chunk as producers first reach them.
func TestRingAllocatesChunksOnDemand(t *testing.T) {
	r := newRing(8192)
	allocated := func() int {
		n := 0
		for i := range r.chunks {
			if r.chunks[i].Load() != nil {
				n++
			}
		}
		return n
	}
	if got := allocated(); got != 1 {
		t.Fatalf("a new ring holds %d chunks, want 1", got)
	}
	for i := range ringChunk {
		if !r.push(&command{hdrLen: i}) {
			t.Fatalf("push %d refused", i)
		}
	}
	if got := allocated(); got != 1 {
		t.Fatalf("after %d pushes %d chunks, want 1", ringChunk, got)
	}
	r.push(&command{hdrLen: ringChunk})
	if got := allocated(); got != 2 {
		t.Fatalf("after %d pushes %d chunks, want 2", ringChunk+1, got)
	}
	got := r.drain(nil, 1<<20)
	if len(got) != ringChunk+1 {
		t.Fatalf("drained %d, want %d", len(got), ringChunk+1)
	}
	for i, c := range got {
		if c.hdrLen != i {
			t.Fatalf("drained %d at %d", c.hdrLen, i)
		}
	}
	if !r.empty() {
		t.Fatal("drained ring not empty")
	}
}

// TestRingFullAndLaps: the bound holds across chunks and laps: a ring of n
// takes exactly n, refuses the next, and after a drain takes n again, in
// order, for sizes below, at and above one chunk.
func TestRingFullAndLaps(t *testing.T) {
	for _, size := range []int{2, ringChunk, 4 * ringChunk} {
		r := newRing(size)
		next := 0
		for lap := range 3 {
			for i := range size {
				if !r.push(&command{hdrLen: next + i}) {
					t.Fatalf("size %d lap %d: push %d refused", size, lap, i)
				}
			}
			if r.push(&command{}) {
				t.Fatalf("size %d lap %d: a full ring took one more", size, lap)
			}
			got := r.drain(nil, 1<<20)
			if len(got) != size {
				t.Fatalf("size %d lap %d: drained %d", size, lap, len(got))
			}
			for i, c := range got {
				if c.hdrLen != next+i {
					t.Fatalf("size %d lap %d: %d at %d", size, lap, c.hdrLen, i)
				}
			}
			next += size
		}
	}
}

// TestRingConcurrentProducers: producers racing into chunks not yet
// allocated lose nothing and keep each producer's order (run with -race).
func TestRingConcurrentProducers(t *testing.T) {
	const producers, per = 4, 5000
	r := newRing(1024)
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; {
				if r.push(&command{hdrLen: p*per + i}) {
					i++
				}
			}
		}()
	}
	last := make([]int, producers)
	for i := range last {
		last[i] = -1
	}
	seen := 0
	var buf []command
	for seen < producers*per {
		buf = r.drain(buf[:0], 256)
		for _, c := range buf {
			p, i := c.hdrLen/per, c.hdrLen%per
			if i <= last[p] {
				t.Fatalf("producer %d: %d after %d", p, i, last[p])
			}
			last[p] = i
			seen++
		}
	}
	wg.Wait()
	if !r.empty() {
		t.Fatal("ring not empty at the end")
	}
}

// TestIdlePartitionStartsNoSyncGoroutine is the regression test for "each
// partition runs four goroutines, idle or not" (issue 24: 10,000 topics
// held 40,000 goroutines): a syncer goroutine waited for the two fsync
// lanes, each of which ran from the start. Now a lane starts at its first
// fsync request: a topic never written has only its actor, and a publish
// starts the data lane alone.
func TestIdlePartitionStartsNoSyncGoroutine(t *testing.T) {
	e := newEnvWith(t, func(o *Options) {})
	tp := e.topic("idle", TopicConfig{Partitions: 2})
	lanes := func(p *partition) (data, ev bool) {
		got := make(chan [2]bool, 1)
		if err := p.controlChecked(func(p *partition) { got <- [2]bool{p.lanes.data.started, p.lanes.ev.started} }); err != nil {
			t.Fatal(err)
		}
		b := <-got
		return b[0], b[1]
	}
	for i, p := range tp.parts {
		if !p.commit.pipelined {
			t.Fatalf("partition %d: not pipelined under the default durability", i)
		}
		if d, ev := lanes(p); d || ev {
			t.Fatalf("partition %d of a new topic: data lane %v, event lane %v started", i, d, ev)
		}
	}
	pos := e.publish(tp, "one")
	if d, ev := lanes(tp.parts[pos.Partition]); !d || ev {
		t.Fatalf("after a publish: data lane %v, event lane %v; want the data lane only", d, ev)
	}
	e.restart() // the lanes started and those never started both stop cleanly
}
