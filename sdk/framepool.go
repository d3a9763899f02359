package fibril

// The frame pool: a publish is encoded once and the encoding is kept until
// its confirm, because a reconnect replays what was not confirmed; after
// the confirm it is garbage. At a full window that is one allocation the
// size of the payload per publish, most of what a publisher allocates. The
// Conn keeps the frames of answered publishes in a bounded free list and
// encodes later publishes into them. Confirms come in bursts, one per
// group commit, of up to a whole window, so the list holds as many frames
// as the window (fewer bounce to the garbage collector and the next burst
// of publishes allocates again). The bound: one frame per window token, of
// at most framePoolCap bytes (4 MiB at the default window of 1,024, about
// 1.1 MiB with 1 KiB payloads: what a full window held anyway); a larger
// frame, or one past a full list, is left to the garbage collector.

const framePoolCap = 4 << 10

// takeFrame returns an empty buffer to encode a publish into, or nil when
// none is free (appendPub then allocates one).
func (c *Conn) takeFrame() []byte {
	select {
	case b := <-c.frames:
		return b
	default:
		return nil
	}
}

// recycleFrame gives back the frame of an answered publish. Nothing holds
// it any more: the writer copies each frame into its own buffer when it is
// queued, and only a request still in the fifo is replayed.
func (c *Conn) recycleFrame(b []byte) {
	if b == nil || cap(b) > framePoolCap {
		return
	}
	select {
	case c.frames <- b[:0]:
	default: // full: let it go
	}
}
