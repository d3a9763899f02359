package broker

import "testing"

// BenchmarkSnapshotDelayed: a partition's snapshot with 250,000 delayed
// offsets (a quarter of bench/delayed's million over 4 partitions). The
// actor pays only for capture (a copy of the pending entries); the sort
// and the encoding run on the snapshot's goroutine (encode). Both on the
// actor, as before, stalled deliveries by ~100 ms (bench/delayed's
// late tail).
func BenchmarkSnapshotDelayed(b *testing.B) {
	g := newGroupState(1, 30e9, 0, 1)
	for i := range 250_000 {
		s := Seq(1 + i*7%250_000)
		g.pending[s] = pendingOff{state: stDelayed, deadline: int64(i)}
	}
	g.next = 250_001
	gs := []*groupState{g}
	b.Run("capture", func(b *testing.B) {
		for b.Loop() {
			_ = captureSnapshot(9, gs)
		}
	})
	b.Run("encode", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			st := captureSnapshot(9, gs)
			b.StartTimer()
			_ = st.encode()
		}
	})
}
