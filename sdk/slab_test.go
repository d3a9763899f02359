package fibril

import "testing"

// TestSlabBlocksAreSmallAllocations: a block is a small allocation (at
// most 32 KiB less the runtime's 8-byte header allowance, served from its
// per-P caches), pieces never overlap and have their length as capacity,
// and 1 KiB pieces cost one allocation per 31.
func TestSlabBlocksAreSmallAllocations(t *testing.T) {
	if slabBlock > 32<<10-8 {
		t.Fatalf("slab block of %d bytes: a large allocation", slabBlock)
	}
	var s slab
	a, b := s.bytes(1024), s.bytes(1024)
	if cap(a) != 1024 || cap(b) != 1024 {
		t.Fatalf("pieces of cap %d and %d, want 1024", cap(a), cap(b))
	}
	a[1023], b[0] = 1, 2
	if a[1023] != 1 {
		t.Fatal("pieces overlap")
	}
	if big := s.bytes(slabMax + 1); cap(big) != slabMax+1 {
		t.Fatalf("a piece over slabMax has cap %d", cap(big))
	}
	n := testing.AllocsPerRun(10, func() {
		for range 320 {
			s.bytes(1024)
		}
	})
	if n > 12 {
		t.Fatalf("%.0f allocations for 320 pieces of 1 KiB, want at most 12", n)
	}
}
