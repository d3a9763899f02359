// Package storetest is the conformance suite for seglog.Store: the one set
// of checks every store behind the broker passes (the segment log, the
// in-memory store, queue/boltstore, and any store a user writes). Call Run
// from a test of the store's package:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, dir string) seglog.Store {
//			s, err := mystore.Open(dir)
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s
//		}, storetest.Options{Persistent: true, DurableOnAppend: true})
//	}
//
// The suite covers appends, reads and scans (the maxBytes rule: at least one
// record), the bounds of empty and truncated stores, TruncateFront never
// dropping a record at or above its argument, Sync and Durable, reopening
// with what was synced, the errors of a closed store and, for a store that
// keeps files, a crash: a child process (the test binary run again) appends
// and syncs until it is killed with SIGKILL, and every record it was told
// durable must be there, intact and in order, after the reopen.
//
// The package owns the checks and nothing else: it never reaches into a
// store's files, and knows of a store only its seglog.Store methods and
// what Options says.
//
// # Caveats
//
//   - The crash case runs the calling test again in a child process (only
//     it, with -test.run), so the code of that test before Run runs in the
//     child too: keep it to setup. Run itself recognizes the child by its
//     environment and turns into the writer there.
//   - The crash case needs os.Args[0] to be the test binary (go test does
//     that) and a platform with SIGKILL; it is skipped with -short.
package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"math/rand/v2"
	"testing"

	"github.com/fibrilmq/fibril/server/seglog"
)

// Options says what a store promises beyond the common contract.
type Options struct {
	// Persistent: records survive Close and a reopen (open called again
	// with the same directory). Without it the reopen and crash cases are
	// skipped (an in-memory store).
	Persistent bool
	// DurableOnAppend: Append returns only once its batch is durable
	// (Durable at or past the batch's last record), as under
	// seglog.PolicySync; false when the store syncs only on Sync or in the
	// background.
	DurableOnAppend bool
	// NoCrash skips the SIGKILL case of a Persistent store (a store whose
	// files cannot be reopened by another process).
	NoCrash bool
	// UnverifiedCRC: the store hands records back without checking their
	// data against the CRC it was given (seglog.MemStore: memory does not
	// rot, and it trusts Entry.CRC). The CallerCRC case then checks only
	// that a given CRC is kept, not that a wrong one reads as corrupt.
	UnverifiedCRC bool
}

// Opener opens the store kept in dir (created empty by the suite with
// t.TempDir), failing t if it cannot. Called again with the same dir after
// the store was closed it must reopen what was stored there. The suite
// closes every store it opens.
type Opener func(t *testing.T, dir string) seglog.Store

// Run checks the store open makes against seglog.Store's contract, each
// case a subtest of t with a fresh directory.
func Run(t *testing.T, open Opener, opts Options) {
	if crashChild(t, open) {
		return
	}
	mk := func(t *testing.T) (seglog.Store, string) {
		t.Helper()
		dir := t.TempDir()
		s := open(t, dir)
		t.Cleanup(func() { s.Close() })
		return s, dir
	}
	cases := []struct {
		name string
		fn   func(t *testing.T, mk func(*testing.T) (seglog.Store, string), open Opener, opts Options)
	}{
		{"Empty", testEmpty},
		{"AppendRead", testAppendRead},
		{"Time", testTime},
		{"CallerReusesBuffers", testReuse},
		{"CallerCRC", testCallerCRC},
		{"MetaLimit", testMetaLimit},
		{"Scan", testScan},
		{"ScanCallsBack", testScanCallsBack},
		{"TruncateFront", testTruncate},
		{"SyncDurable", testSyncDurable},
		{"Concurrent", testConcurrent},
		{"Closed", testClosed},
		{"Reopen", testReopen},
		{"ReopenTruncated", testReopenTruncated},
		{"Crash", testCrash},
		{"SideRecords", testSideRecords},
		{"HeldMaps", testHeldMaps},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, mk, open, opts) })
	}
}

// entry is test entry n: its content depends on n, so a record handed back
// for another sequence number is caught.
func entry(n int) seglog.Entry {
	return seglog.Entry{
		Meta: fmt.Appendf(nil, "m%d", n),
		Data: bytes.Repeat(fmt.Appendf(nil, "<%d>", n), n%7+1),
		Time: int64(n) + 1,
	}
}

// appendN appends entries from..to one batch at a time of size batch.
func appendN(t *testing.T, s seglog.Store, from, to, batch int) {
	t.Helper()
	for n := from; n <= to; n += batch {
		var es []seglog.Entry
		for i := n; i < n+batch && i <= to; i++ {
			es = append(es, entry(i))
		}
		first, err := s.Append(es)
		if err != nil {
			t.Fatalf("append %d..%d: %v", n, n+len(es)-1, err)
		}
		if first != seglog.Seq(n) {
			t.Fatalf("append of entry %d got seq %d", n, first)
		}
	}
}

// checkRecord fails t unless r is entry(n) stored at seq.
func checkRecord(t *testing.T, r seglog.Record, seq seglog.Seq, n int) {
	t.Helper()
	want := entry(n)
	if r.Seq != seq || !bytes.Equal(r.Meta, want.Meta) || !bytes.Equal(r.Data, want.Data) ||
		r.Time != want.Time || r.CRC != crc32.ChecksumIEEE(want.Data) {
		t.Fatalf("record %d: seq %d meta %q data %q time %d crc %08x; want entry %d", seq, r.Seq, r.Meta, r.Data, r.Time, r.CRC, n)
	}
}

// checkAll reads and scans every record in [from, to], each entry(seq).
func checkAll(t *testing.T, s seglog.Store, from, to seglog.Seq) {
	t.Helper()
	for seq := from; seq <= to; seq++ {
		r, err := s.Read(seq)
		if err != nil {
			t.Fatalf("read %d: %v", seq, err)
		}
		checkRecord(t, r, seq, int(seq))
	}
	next := from
	err := s.Scan(from, 0, func(r seglog.Record) bool {
		checkRecord(t, r, next, int(next))
		next++
		return true
	})
	if err != nil || next != to+1 {
		t.Fatalf("scan from %d: ended at %d (%v), want %d", from, next, err, to+1)
	}
}

func wantBounds(t *testing.T, s seglog.Store, first, last seglog.Seq) {
	t.Helper()
	if f, l := s.Bounds(); f != first || l != last {
		t.Fatalf("bounds %d,%d; want %d,%d", f, l, first, last)
	}
}

func testEmpty(t *testing.T, mk func(*testing.T) (seglog.Store, string), _ Opener, _ Options) {
	s, _ := mk(t)
	wantBounds(t, s, 1, 0)
	for _, seq := range []seglog.Seq{0, 1, 2} {
		if _, err := s.Read(seq); !errors.Is(err, seglog.ErrNotFound) {
			t.Errorf("read %d of an empty store: %v, want ErrNotFound", seq, err)
		}
	}
	if _, err := s.Append(nil); !errors.Is(err, seglog.ErrEmptyBatch) {
		t.Errorf("append of no entries: %v, want ErrEmptyBatch", err)
	}
	calls := 0
	if err := s.Scan(1, 0, func(seglog.Record) bool { calls++; return true }); err != nil || calls != 0 {
		t.Errorf("scan of an empty store: %v, %d calls", err, calls)
	}
	if d, err := s.Sync(); err != nil || d != 0 || s.Durable() != 0 {
		t.Errorf("sync of an empty store: %d, %v, durable %d; want 0", d, err, s.Durable())
	}
	if err := s.TruncateFront(5); err != nil {
		t.Errorf("truncate an empty store: %v", err)
	}
	if first, err := s.Append([]seglog.Entry{entry(1)}); err != nil || first != 1 {
		t.Errorf("first append after truncating an empty store: seq %d, %v; want 1", first, err)
	}
}

func testAppendRead(t *testing.T, mk func(*testing.T) (seglog.Store, string), _ Opener, _ Options) {
	s, _ := mk(t)
	next := 1
	for _, size := range []int{1, 3, 10, 1, 64} {
		appendN(t, s, next, next+size-1, size)
		next += size
	}
	last := seglog.Seq(next - 1)
	wantBounds(t, s, 1, last)
	checkAll(t, s, 1, last)
	for _, seq := range []seglog.Seq{0, last + 1, last + 100} {
		if _, err := s.Read(seq); !errors.Is(err, seglog.ErrNotFound) {
			t.Errorf("read %d outside 1..%d: %v, want ErrNotFound", seq, last, err)
		}
	}
	// An empty entry is a record too.
	first, err := s.Append([]seglog.Entry{{}})
	if err != nil || first != last+1 {
		t.Fatalf("append of an empty entry: %d, %v", first, err)
	}
	r, err := s.Read(first)
	if err != nil || len(r.Data) != 0 || len(r.Meta) != 0 || r.CRC != 0 {
		t.Fatalf("empty entry read back as %+v, %v", r, err)
	}
}

func testTime(t *testing.T, mk func(*testing.T) (seglog.Store, string), _ Opener, _ Options) {
	s, _ := mk(t)
	if _, err := s.Append([]seglog.Entry{{Data: []byte("now")}, {Data: []byte("then"), Time: 42}}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Read(1); err != nil || r.Time <= 0 {
		t.Errorf("entry without a time read back with %d (%v), want now", r.Time, err)
	}
	if r, err := s.Read(2); err != nil || r.Time != 42 {
		t.Errorf("entry with time 42 read back with %d (%v)", r.Time, err)
	}
}

func testReuse(t *testing.T, mk func(*testing.T) (seglog.Store, string), _ Opener, _ Options) {
	s, _ := mk(t)
	buf := []byte("hello")
	if _, err := s.Append([]seglog.Entry{{Meta: buf[:2], Data: buf}}); err != nil {
		t.Fatal(err)
	}
	copy(buf, "XXXXX")
	r, err := s.Read(1)
	if err != nil || string(r.Data) != "hello" || string(r.Meta) != "he" {
		t.Fatalf("read %q/%q (%v) after the caller reused its buffer", r.Meta, r.Data, err)
	}
}

// testCallerCRC: a CRC the caller computed is stored as given; a wrong
// one makes the record read as corrupt, never as data.
func testCallerCRC(t *testing.T, mk func(*testing.T) (seglog.Store, string), _ Opener, opts Options) {
	s, _ := mk(t)
	good := []byte("checked by the producer")
	crc := crc32.ChecksumIEEE(good)
	if _, err := s.Append([]seglog.Entry{{Data: good, CRC: crc}, {Data: []byte("lied about"), CRC: crc}}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Read(1); err != nil || r.CRC != crc || !bytes.Equal(r.Data, good) {
		t.Errorf("record with the caller's CRC: %+v, %v", r, err)
	}
	if r, err := s.Read(2); !opts.UnverifiedCRC && !errors.Is(err, seglog.ErrCorrupt) {
		t.Errorf("record with a wrong caller CRC: read %q, %v; want ErrCorrupt", r.Data, err)
	}
}

func testMetaLimit(t *testing.T, mk func(*testing.T) (seglog.Store, string), _ Opener, _ Options) {
	s, _ := mk(t)
	if _, err := s.Append([]seglog.Entry{entry(1), {Meta: make([]byte, seglog.MaxMetaSize+1)}}); !errors.Is(err, seglog.ErrTooLarge) {
		t.Fatalf("meta of %d bytes: %v, want ErrTooLarge", seglog.MaxMetaSize+1, err)
	}
	wantBounds(t, s, 1, 0) // nothing of the failed batch
	big := bytes.Repeat([]byte{'m'}, seglog.MaxMetaSize)
	first, err := s.Append([]seglog.Entry{{Meta: big, Data: []byte("x")}})
	if err != nil || first != 1 {
		t.Fatalf("meta of exactly MaxMetaSize: %d, %v", first, err)
	}
	if r, err := s.Read(1); err != nil || !bytes.Equal(r.Meta, big) {
		t.Fatalf("read back the largest meta: %d bytes, %v", len(r.Meta), err)
	}
}

func testScan(t *testing.T, mk func(*testing.T) (seglog.Store, string), _ Opener, _ Options) {
	s, _ := mk(t)
	appendN(t, s, 1, 40, 3)
	size := func(n int) int { return len(entry(n).Data) }
	tests := []struct {
		from     seglog.Seq
		maxBytes int
		stopAt   seglog.Seq // fn returns false at this record (0: never)
		want     [2]seglog.Seq
	}{
		{from: 1, want: [2]seglog.Seq{1, 40}},
		{from: 0, want: [2]seglog.Seq{1, 40}},
		{from: 15, want: [2]seglog.Seq{15, 40}},
		{from: 40, want: [2]seglog.Seq{40, 40}},
		{from: 41, want: [2]seglog.Seq{1, 0}},
		{from: 5, stopAt: 7, want: [2]seglog.Seq{5, 7}},
		{from: 3, maxBytes: 1, want: [2]seglog.Seq{3, 3}}, // at least one record
		{from: 1, maxBytes: size(1) + size(2), want: [2]seglog.Seq{1, 2}},
		{from: 1, maxBytes: size(1) + size(2) + 1, want: [2]seglog.Seq{1, 2}},
		{from: 10, maxBytes: -1, want: [2]seglog.Seq{10, 40}},
		{from: 39, maxBytes: 1 << 20, want: [2]seglog.Seq{39, 40}},
	}
	for _, tc := range tests {
		var got []seglog.Seq
		err := s.Scan(tc.from, tc.maxBytes, func(r seglog.Record) bool {
			checkRecord(t, r, r.Seq, int(r.Seq))
			got = append(got, r.Seq)
			return r.Seq != tc.stopAt
		})
		if err != nil {
			t.Fatalf("scan from %d: %v", tc.from, err)
		}
		var want []seglog.Seq
		for q := tc.want[0]; q <= tc.want[1]; q++ {
			want = append(want, q)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Scan(%d, %d) stopping at %d passed %v, want %v", tc.from, tc.maxBytes, tc.stopAt, got, want)
		}
	}
}

// testScanCallsBack: fn runs without the store's locks, so it may read the
// store and append to it (an append during a scan is not passed to it, or
// passed in order: either way no deadlock and no disorder).
func testScanCallsBack(t *testing.T, mk func(*testing.T) (seglog.Store, string), _ Opener, _ Options) {
	s, _ := mk(t)
	appendN(t, s, 1, 10, 10)
	next, n := seglog.Seq(1), 11
	err := s.Scan(1, 0, func(r seglog.Record) bool {
		if r.Seq != next {
			t.Fatalf("scan passed %d, want %d", r.Seq, next)
		}
		next++
		if _, err := s.Read(r.Seq); err != nil {
			t.Fatalf("read %d inside scan: %v", r.Seq, err)
		}
		if n <= 15 {
			appendN(t, s, n, n, 1)
			n++
		}
		s.Bounds()
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if next < 11 {
		t.Fatalf("scan ended at %d, before the records it started with", next)
	}
	checkAll(t, s, 1, 15)
}

func testTruncate(t *testing.T, mk func(*testing.T) (seglog.Store, string), _ Opener, _ Options) {
	s, _ := mk(t)
	const n = 300
	appendN(t, s, 1, n, 7)
	for _, cut := range []seglog.Seq{1, 0, 40, 30, 41, 200} {
		before, _ := s.Bounds()
		if err := s.TruncateFront(cut); err != nil {
			t.Fatalf("TruncateFront(%d): %v", cut, err)
		}
		first, last := s.Bounds()
		if last != n || first > max(cut, before) || first < before {
			t.Fatalf("bounds after TruncateFront(%d) = %d,%d (first was %d)", cut, first, last, before)
		}
		checkAll(t, s, max(cut, first), n)
		if first > 1 {
			if _, err := s.Read(first - 1); !errors.Is(err, seglog.ErrNotFound) {
				t.Fatalf("read %d below first %d: %v, want ErrNotFound", first-1, first, err)
			}
		}
		// A scan from below first starts at first.
		var got seglog.Seq
		if err := s.Scan(1, 1, func(r seglog.Record) bool { got = r.Seq; return false }); err != nil || got != first {
			t.Fatalf("scan from 1 after TruncateFront(%d) started at %d (%v), want %d", cut, got, err, first)
		}
	}
	// Truncating past the end empties the store (or keeps a tail) and the
	// numbering goes on.
	if err := s.TruncateFront(n + 1000); err != nil {
		t.Fatal(err)
	}
	first, last := s.Bounds()
	if last != n || first > n+1 {
		t.Fatalf("bounds after truncating everything = %d,%d", first, last)
	}
	if seq, err := s.Append([]seglog.Entry{entry(n + 1)}); err != nil || seq != n+1 {
		t.Fatalf("append after truncating everything: seq %d, %v; want %d", seq, err, n+1)
	}
	checkAll(t, s, n+1, n+1)
}

func testSyncDurable(t *testing.T, mk func(*testing.T) (seglog.Store, string), _ Opener, opts Options) {
	s, _ := mk(t)
	var prev seglog.Seq
	for i := 1; i <= 30; i++ {
		appendN(t, s, i, i, 1)
		d := s.Durable()
		if opts.DurableOnAppend && d < seglog.Seq(i) {
			t.Fatalf("durable %d after the append of %d returned", d, i)
		}
		if d > seglog.Seq(i) || d < prev {
			t.Fatalf("durable %d after %d appended (was %d): past the end or backwards", d, i, prev)
		}
		prev = d
		if i%4 == 0 {
			got, err := s.Sync()
			if err != nil || got < seglog.Seq(i) || got > seglog.Seq(i) {
				t.Fatalf("sync after %d appended: %d, %v", i, got, err)
			}
			if d := s.Durable(); d < got {
				t.Fatalf("durable %d after sync returned %d", d, got)
			}
			prev = got
		}
	}
}

// testConcurrent: appends from several goroutines with syncs alongside;
// batches stay contiguous and every append sees its own records.
func testConcurrent(t *testing.T, mk func(*testing.T) (seglog.Store, string), _ Opener, opts Options) {
	s, _ := mk(t)
	const writers, per = 4, 40
	errs := make(chan error, writers+1)
	done := make(chan struct{})
	go func() { // a syncer, as the broker runs one
		var prev seglog.Seq
		for {
			select {
			case <-done:
				errs <- nil
				return
			default:
			}
			d, err := s.Sync()
			if err != nil || d < prev {
				errs <- fmt.Errorf("sync: %d (was %d), %v", d, prev, err)
				return
			}
			prev = d
		}
	}()
	var failed = make(chan error, writers)
	for w := range writers {
		go func() {
			for i := range per {
				b := byte(w*per + i)
				first, err := s.Append([]seglog.Entry{{Data: []byte{b}}, {Data: []byte{b}}, {Data: []byte{b}}})
				if err != nil {
					failed <- err
					return
				}
				if d := s.Durable(); opts.DurableOnAppend && d < first+2 {
					failed <- fmt.Errorf("durable %d below the batch %d..%d after its append", d, first, first+2)
					return
				}
				if r, err := s.Read(first + 2); err != nil || r.Data[0] != b {
					failed <- fmt.Errorf("read own record %d: %v, %v", first+2, r.Data, err)
					return
				}
			}
			failed <- nil
		}()
	}
	for range writers {
		if err := <-failed; err != nil {
			t.Error(err)
		}
	}
	close(done)
	if err := <-errs; err != nil {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	const total = writers * per * 3
	wantBounds(t, s, 1, total)
	seen := map[byte]bool{}
	for seq := seglog.Seq(1); seq <= total; seq += 3 {
		var b []byte
		for i := range seglog.Seq(3) {
			r, err := s.Read(seq + i)
			if err != nil {
				t.Fatal(err)
			}
			b = append(b, r.Data...)
		}
		if b[0] != b[1] || b[1] != b[2] || seen[b[0]] {
			t.Fatalf("batch at %d interleaved or repeated: %v", seq, b)
		}
		seen[b[0]] = true
	}
	if d, err := s.Sync(); err != nil || d != total {
		t.Fatalf("final sync %d, %v; want %d", d, err, total)
	}
}

func testClosed(t *testing.T, mk func(*testing.T) (seglog.Store, string), _ Opener, _ Options) {
	s, _ := mk(t)
	appendN(t, s, 1, 3, 3)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if _, err := s.Append([]seglog.Entry{entry(4)}); !errors.Is(err, seglog.ErrClosed) {
		t.Errorf("append after close: %v", err)
	}
	if _, err := s.Read(1); !errors.Is(err, seglog.ErrClosed) {
		t.Errorf("read after close: %v", err)
	}
	if _, err := s.Sync(); !errors.Is(err, seglog.ErrClosed) {
		t.Errorf("sync after close: %v", err)
	}
	if err := s.Scan(1, 0, func(seglog.Record) bool { return true }); !errors.Is(err, seglog.ErrClosed) {
		t.Errorf("scan after close: %v", err)
	}
	if err := s.TruncateFront(2); !errors.Is(err, seglog.ErrClosed) {
		t.Errorf("truncate after close: %v", err)
	}
	s.Bounds() // no panic, whatever it says
	s.Durable()
}

// testReopen: what was synced, and what Close flushed, is there after a
// reopen, and the numbering goes on.
func testReopen(t *testing.T, mk func(*testing.T) (seglog.Store, string), open Opener, opts Options) {
	if !opts.Persistent {
		t.Skip("not persistent")
	}
	s, dir := mk(t)
	appendN(t, s, 1, 50, 5)
	if d, err := s.Sync(); err != nil || d != 50 {
		t.Fatalf("sync: %d, %v", d, err)
	}
	appendN(t, s, 51, 60, 2) // not synced: Close must
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, open, dir)
	wantBounds(t, s, 1, 60)
	if d := s.Durable(); d != 60 {
		t.Errorf("durable after reopen %d, want 60", d)
	}
	checkAll(t, s, 1, 60)
	appendN(t, s, 61, 70, 10)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, open, dir)
	wantBounds(t, s, 1, 70)
	checkAll(t, s, 1, 70)
}

// testReopenTruncated: a truncation holds across a reopen, and a store
// truncated empty never hands out a sequence number again.
func testReopenTruncated(t *testing.T, mk func(*testing.T) (seglog.Store, string), open Opener, opts Options) {
	if !opts.Persistent {
		t.Skip("not persistent")
	}
	s, dir := mk(t)
	const n = 400
	appendN(t, s, 1, n, 9)
	if err := s.TruncateFront(250); err != nil {
		t.Fatal(err)
	}
	first, _ := s.Bounds()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, open, dir)
	f, l := s.Bounds()
	if l != n || f > 250 || f < first {
		t.Fatalf("bounds after reopen %d,%d; before %d,%d", f, l, first, n)
	}
	checkAll(t, s, max(f, 250), n)
	if err := s.TruncateFront(n + 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, open, dir)
	if f, l := s.Bounds(); l != n || f > n+1 {
		t.Fatalf("bounds after truncating everything and reopening %d,%d; want last %d", f, l, n)
	}
	if seq, err := s.Append([]seglog.Entry{entry(n + 1)}); err != nil || seq != n+1 {
		t.Fatalf("append after reopening an emptied store: seq %d, %v; want %d (numbers are never reused)", seq, err, n+1)
	}
	checkAll(t, s, n+1, n+1)
}

func reopen(t *testing.T, open Opener, dir string) seglog.Store {
	t.Helper()
	s := open(t, dir)
	t.Cleanup(func() { s.Close() })
	return s
}

// selfChecking returns the entry a crash writer appends under meta: its
// data and time derive from meta, so the reader checks a record alone.
func selfChecking(meta string) seglog.Entry {
	h := fnv.New64a()
	h.Write([]byte(meta))
	rng := rand.New(rand.NewPCG(h.Sum64(), 7))
	data := make([]byte, 32+rng.IntN(2000))
	for i := range data {
		data[i] = byte(rng.Uint32()) | 1 // never zero: a zeroed tail is not a record
	}
	return seglog.Entry{Meta: []byte(meta), Data: data, Time: int64(h.Sum64() >> 2)}
}
