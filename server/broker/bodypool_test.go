package broker

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
)

func TestBodyClass(t *testing.T) {
	for _, tc := range []struct{ n, class int }{
		{0, 0}, {1, 0}, {512, 0}, {513, 1}, {1024, 1}, {1025, 2},
		{32 << 10, 6}, {64<<10 - 1, 7}, {64 << 10, 7}, {64<<10 + 1, -1}, {1 << 20, -1},
	} {
		if got := bodyClass(tc.n); got != tc.class {
			t.Errorf("bodyClass(%d) = %d, want %d", tc.n, got, tc.class)
		}
	}
}

func TestBodyPoolGetPut(t *testing.T) {
	var p bodyPool
	for _, n := range []int{0, 100, 512, 700, 4096, 64 << 10, 64<<10 + 1} {
		b, bb := p.get(n)
		if len(b) != 0 || cap(b) < n {
			t.Fatalf("get(%d): len %d cap %d", n, len(b), cap(b))
		}
		if (bb == nil) != (n > 64<<10) {
			t.Fatalf("get(%d): pooled %v", n, bb != nil)
		}
		p.put(bb) // nil is fine
	}
	// A buffer of a size no class has is not taken in.
	odd := &bodyBuf{b: make([]byte, 0, 1000)}
	p.put(odd)
	if v := p.classes[1].Get(); v == odd {
		t.Fatal("a 1000-byte buffer went into the 1 KiB class")
	}
}

// TestRecycledBodiesKeepEveryPayload: publish bodies are recycled once the
// actor has appended them; with concurrent publishers of many size classes
// (and bodies too big to pool) every payload must still be delivered intact.
func TestRecycledBodiesKeepEveryPayload(t *testing.T) {
	e := newEnvWith(t, func(o *Options) { o.SegmentSize = 1 << 20 })
	tp := e.topic("q", TopicConfig{})
	g := e.group(tp, "g", GroupConfig{})
	sizes := []int{16, 300, 512, 513, 1500, 5000, 40 << 10, 70 << 10}
	const pubs, each = 4, 40
	payload := func(p, i int) []byte {
		b := bytes.Repeat([]byte{byte('a' + p)}, sizes[i%len(sizes)])
		copy(b, fmt.Sprintf("%d-%d:", p, i))
		return b
	}
	var wg sync.WaitGroup
	errs := make(chan error, pubs*each)
	for p := range pubs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				m := Message{Subject: "q", Data: payload(p, i)}
				done := make(chan error, 1)
				if err := tp.PublishAsync(m, func(_ Position, err error) { done <- err }); err != nil {
					errs <- err
					return
				}
				clear(m.Data) // the caller may reuse its buffer at once
				if i%5 == 4 { // sometimes wait, so rounds mix sizes and reuse
					errs <- <-done
				} else {
					go func() { errs <- <-done }()
				}
			}
		}()
	}
	wg.Wait()
	for range pubs * each {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]bool{}
	for p := range pubs {
		for i := range each {
			want[string(payload(p, i))] = true
		}
	}
	for len(want) > 0 {
		ds := e.poll(g, 50)
		if len(ds) == 0 {
			t.Fatalf("%d payloads never delivered", len(want))
		}
		for _, d := range ds {
			if !want[string(d.Data)] {
				t.Fatalf("delivered a payload nobody published (or twice): %.40q (%d bytes)", d.Data, len(d.Data))
			}
			delete(want, string(d.Data))
		}
	}
}
