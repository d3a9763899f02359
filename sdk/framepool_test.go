package fibril

import "testing"

// TestFramePoolBounded: the pool keeps at most one frame per slot (its
// capacity is the window), never one over framePoolCap, and hands frames
// back empty.
func TestFramePoolBounded(t *testing.T) {
	c := &Conn{frames: make(chan []byte, 2)}
	if b := c.takeFrame(); b != nil {
		t.Fatalf("empty pool returned a frame of cap %d", cap(b))
	}
	c.recycleFrame(make([]byte, 100, 128))
	c.recycleFrame(make([]byte, 0, framePoolCap+1)) // too large: dropped
	c.recycleFrame(nil)
	c.recycleFrame(make([]byte, 10, 64))
	c.recycleFrame(make([]byte, 10, 32)) // the pool is full: dropped
	if n := len(c.frames); n != 2 {
		t.Fatalf("pool holds %d frames, want 2", n)
	}
	for range 2 {
		b := c.takeFrame()
		if b == nil || len(b) != 0 || cap(b) > framePoolCap {
			t.Fatalf("took len %d cap %d, want an empty frame", len(b), cap(b))
		}
	}
	if b := c.takeFrame(); b != nil {
		t.Fatal("drained pool returned a frame")
	}
}

// TestAppendPubReusesRoom: a publish encoded into a frame from the pool
// reuses its array when it fits, and a smaller array is replaced rather
// than grown.
func TestAppendPubReusesRoom(t *testing.T) {
	data := make([]byte, 1000)
	first := appendPub(nil, "orders", nil, data, true)
	again := appendPub(first[:0], "orders", nil, data, true)
	if &again[0] != &first[0] || string(again) != string(first) {
		t.Fatal("a frame with room was not reused")
	}
	small := appendPub(make([]byte, 0, 16), "orders", nil, data, true)
	if string(small) != string(first) || cap(small) > len(first)+128 {
		t.Fatalf("re-encoded into cap %d (len %d)", cap(small), len(small))
	}
}
