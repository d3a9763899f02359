package seglog

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestReadForwardDropsSealedSegmentsFromRSS: a reader moving forward out of
// a sealed segment drops that segment's pages from the process's resident
// set (a consumer draining a big backlog used to keep every segment it had
// read resident: 349 MiB of mapped pages in the 1M-message benchmark).
// What was read stays readable.
func TestReadForwardDropsSealedSegmentsFromRSS(t *testing.T) {
	dir := t.TempDir()
	l, segs, payload := fourSegments(t, dir)
	defer l.Close()
	first := filepath.Join(dir, segName(segs[0].First))
	_, last := l.Bounds()
	for seq := Seq(1); seq <= last; seq++ {
		if seq == segs[0].Last {
			// still in the first segment: its pages are resident
			if rss := mappedRSS(t, first); rss < 512<<10 {
				t.Fatalf("first segment RSS %d while it is being read, want most of 1 MiB", rss)
			}
		}
		if _, err := l.Read(seq); err != nil {
			t.Fatalf("Read(%d): %v", seq, err)
		}
	}
	if rss := mappedRSS(t, first); rss > 64<<10 {
		t.Fatalf("first segment still has %d bytes resident after the reader moved on", rss)
	}
	r, err := l.Read(1) // readable again (faulted back in)
	if err != nil || len(r.Data) != len(payload) || r.Data[100] != payload[100] {
		t.Fatalf("Read(1) after the drop: %v", err)
	}
}

// TestReadForwardDropsPagesInChunks (the bug: the broker's partition actor
// stalled for 1-6 ms at every 64 MiB segment roll, in one MADV_DONTNEED of
// the whole segment its consumer had just left): within a segment, reads
// moving forward drop the chunks they passed, so no single drop is ever
// more than a chunk or two and the resident part of the segment stays
// small; a read behind the forward position neither moves it nor keeps the
// drops from going on, and what was dropped stays readable.
func TestReadForwardDropsPagesInChunks(t *testing.T) {
	dir := t.TempDir()
	const n = 2500 // about 10 MiB, all in the first segment
	l, payload := filledLog(t, dir, 16<<20, n)
	defer l.Close()
	if segs := l.Segments(); len(segs) != 1 {
		t.Fatalf("want one segment, got %d", len(segs))
	}
	path := filepath.Join(dir, segName(1))
	limit := int64(3*dropChunk + 256<<10) // the chunk being read, the one before, and slack
	for seq := Seq(1); seq <= n; seq++ {
		if _, err := l.Read(seq); err != nil {
			t.Fatalf("Read(%d): %v", seq, err)
		}
		if seq%500 == 0 {
			if _, err := l.Read(seq / 10); err != nil { // behind the forward position
				t.Fatalf("Read(%d): %v", seq/10, err)
			}
			if rss := mappedRSS(t, path); rss > limit {
				t.Fatalf("after reading %d records (%d MiB) the segment has %d KiB resident, want <= %d KiB",
					seq, int64(seq)*4032>>20, rss>>10, limit>>10)
			}
		}
	}
	r, err := l.Read(1)
	if err != nil || len(r.Data) != len(payload) || r.Data[100] != payload[100] {
		t.Fatalf("Read(1) after the drop: %v", err)
	}
}

// TestReadForwardTwoReadersApart (the bug, in the first chunked version:
// a read behind the forward position was ignored, so a consumer group two
// segments behind another kept every page it read resident): each reader's
// pages are dropped behind it, and what both have left is not resident.
func TestReadForwardTwoReadersApart(t *testing.T) {
	dir := t.TempDir()
	const n = 12000 // about 48 MiB: 12 segments
	l, _ := filledLog(t, dir, 4<<20, n)
	defer l.Close()
	const lag = 2000 // about two segments
	for seq := Seq(1); seq <= n; seq++ {
		if _, err := l.Read(seq); err != nil {
			t.Fatalf("Read(%d): %v", seq, err)
		}
		if seq > lag {
			if _, err := l.Read(seq - lag); err != nil {
				t.Fatalf("Read(%d): %v", seq-lag, err)
			}
		}
	}
	var rss int64
	for _, sg := range l.Segments() {
		rss += mappedRSS(t, filepath.Join(dir, segName(sg.First)))
	}
	// Each reader keeps the chunk it reads and the one before; the lagging
	// one also the segment it is in (it has not left it).
	t.Logf("%d KiB resident", rss>>10)
	if limit := int64(4<<20 + 4*dropChunk + 512<<10); rss > limit {
		t.Fatalf("%d KiB of the log resident after two readers went through it, want <= %d KiB", rss>>10, limit>>10)
	}
}

// fourSegments opens a log in dir with 1 MiB segments and fills it with
// 1000 records of 4000 bytes (about 4 MiB: four sealed segments and more).
func fourSegments(t *testing.T, dir string) (*Log, []SegmentInfo, []byte) {
	t.Helper()
	l, payload := filledLog(t, dir, 1<<20, 1000)
	segs := l.Segments()
	if len(segs) < 4 {
		t.Fatalf("want at least 4 segments, got %d", len(segs))
	}
	return l, segs, payload
}

// filledLog opens a log in dir with segments of segSize and appends n
// records of the 4000-byte payload it returns, in batches of up to 100.
func filledLog(t *testing.T, dir string, segSize int64, n int) (*Log, []byte) {
	t.Helper()
	l, err := Open(dir, Options{SegmentSize: segSize})
	if err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 4000)
	for i := range payload {
		payload[i] = byte(i)
	}
	batch := make([]Entry, 0, 100)
	for i := 0; i < n; i += len(batch) {
		batch = batch[:0]
		for j := i; j < n && len(batch) < cap(batch); j++ {
			batch = append(batch, Entry{Data: payload})
		}
		if _, err := l.Append(batch); err != nil {
			t.Fatal(err)
		}
	}
	return l, payload
}

// mappedRSS sums the Rss of this process's mappings of path (/proc/self/smaps).
func mappedRSS(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no smaps: %v", err)
	}
	defer f.Close()
	var total int64
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":") {
			in = len(fields) >= 6 && fields[5] == path
			continue
		}
		if in && len(fields) >= 2 && fields[0] == "Rss:" {
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			total += kb << 10
		}
	}
	return total
}
