package seglog

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
	"testing"
)

// storeMaker opens a fresh, empty store for one test.
type storeMaker func(t *testing.T) Store

// entry builds a test entry whose content depends on n, so a mixed-up record
// is detected.
func entry(n int) Entry {
	return Entry{Meta: fmt.Appendf(nil, "m%d", n), Data: bytes.Repeat(fmt.Appendf(nil, "<%d>", n), n%7+1), Time: int64(n) + 1}
}

// wantRecord fails the test unless r holds entry(n) at seq.
func wantRecord(t *testing.T, r Record, seq Seq, n int) {
	t.Helper()
	want := entry(n)
	if r.Seq != seq || !bytes.Equal(r.Meta, want.Meta) || !bytes.Equal(r.Data, want.Data) || r.Time != want.Time || r.CRC != crc32.ChecksumIEEE(want.Data) {
		t.Fatalf("record %d: got seq %d meta %q data %q time %d crc %08x; want entry %d", seq, r.Seq, r.Meta, r.Data, r.Time, r.CRC, n)
	}
}

// runStoreContract checks the behaviour every Store promises.
// durableOnAppend says whether Append returns only once the batch is
// durable (false for PolicyNone).
func runStoreContract(t *testing.T, mk storeMaker, durableOnAppend bool) {
	t.Run("empty", func(t *testing.T) {
		s := mk(t)
		if f, l := s.Bounds(); f != 1 || l != 0 {
			t.Fatalf("bounds of empty store = %d,%d; want 1,0", f, l)
		}
		if _, err := s.Read(1); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Read(1) on empty store: %v, want ErrNotFound", err)
		}
		if _, err := s.Append(nil); !errors.Is(err, ErrEmptyBatch) {
			t.Fatalf("Append(nil): %v, want ErrEmptyBatch", err)
		}
		calls := 0
		if err := s.Scan(1, 0, func(Record) bool { calls++; return true }); err != nil || calls != 0 {
			t.Fatalf("Scan on empty store: %v, %d calls", err, calls)
		}
	})
	t.Run("append-read", func(t *testing.T) {
		s := mk(t)
		for _, size := range []int{1, 3, 10} {
			_, last := s.Bounds()
			batch := make([]Entry, size)
			for i := range batch {
				batch[i] = entry(int(last) + 1 + i)
			}
			first, err := s.Append(batch)
			if err != nil {
				t.Fatal(err)
			}
			if first != last+1 {
				t.Fatalf("Append returned %d, want %d", first, last+1)
			}
		}
		f, l := s.Bounds()
		if f != 1 || l != 14 {
			t.Fatalf("bounds = %d,%d; want 1,14", f, l)
		}
		for seq := Seq(1); seq <= 14; seq++ {
			r, err := s.Read(seq)
			if err != nil {
				t.Fatal(err)
			}
			wantRecord(t, r, seq, int(seq))
		}
		if _, err := s.Read(15); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Read past end: %v", err)
		}
		if _, err := s.Read(0); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Read(0): %v", err)
		}
		d, err := s.Sync()
		if err != nil || d != 14 || s.Durable() != 14 {
			t.Fatalf("Sync = %d,%v Durable = %d; want 14", d, err, s.Durable())
		}
	})
	t.Run("time-defaults-to-now", func(t *testing.T) {
		s := mk(t)
		if _, err := s.Append([]Entry{{Data: []byte("x")}}); err != nil {
			t.Fatal(err)
		}
		r, err := s.Read(1)
		if err != nil || r.Time <= 0 {
			t.Fatalf("record time %d, err %v; want now", r.Time, err)
		}
	})
	t.Run("caller-may-reuse-buffers", func(t *testing.T) {
		s := mk(t)
		buf := []byte("hello")
		if _, err := s.Append([]Entry{{Meta: buf[:2], Data: buf}}); err != nil {
			t.Fatal(err)
		}
		copy(buf, "XXXXX")
		r, err := s.Read(1)
		if err != nil || string(r.Data) != "hello" || string(r.Meta) != "he" {
			t.Fatalf("read %q/%q, %v after caller reused its buffer", r.Meta, r.Data, err)
		}
	})
	t.Run("scan", func(t *testing.T) {
		s := mk(t)
		for i := 1; i <= 20; i++ {
			if _, err := s.Append([]Entry{entry(i)}); err != nil {
				t.Fatal(err)
			}
		}
		tests := []struct {
			from     Seq
			maxBytes int
			stopAt   Seq // fn returns false at this seq (0 = never)
			want     []Seq
		}{
			{from: 1, want: seqs(1, 20)},
			{from: 15, want: seqs(15, 20)},
			{from: 21, want: nil},
			{from: 5, stopAt: 7, want: seqs(5, 7)},
			{from: 3, maxBytes: 1, want: seqs(3, 3)}, // at least one record
			{from: 1, maxBytes: len(entry(1).Data) + len(entry(2).Data), want: seqs(1, 2)},
		}
		for _, tc := range tests {
			var got []Seq
			err := s.Scan(tc.from, tc.maxBytes, func(r Record) bool {
				wantRecord(t, r, r.Seq, int(r.Seq))
				got = append(got, r.Seq)
				return r.Seq != tc.stopAt
			})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("Scan(%d, %d) stop %d passed %v, want %v", tc.from, tc.maxBytes, tc.stopAt, got, tc.want)
			}
		}
	})
	t.Run("truncate-front", func(t *testing.T) {
		s := mk(t)
		for i := 1; i <= 50; i++ {
			if _, err := s.Append([]Entry{entry(i)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.TruncateFront(30); err != nil {
			t.Fatal(err)
		}
		f, l := s.Bounds()
		if f > 30 || l != 50 {
			t.Fatalf("bounds after TruncateFront(30) = %d,%d", f, l)
		}
		for seq := Seq(30); seq <= 50; seq++ {
			r, err := s.Read(seq)
			if err != nil {
				t.Fatalf("Read(%d) after TruncateFront(30): %v", seq, err)
			}
			wantRecord(t, r, seq, int(seq))
		}
		if f > 1 {
			if _, err := s.Read(f - 1); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Read(%d) below first: %v", f-1, err)
			}
		}
		// Truncating everything keeps numbering going.
		if err := s.TruncateFront(1000); err != nil {
			t.Fatal(err)
		}
		first, err := s.Append([]Entry{entry(51)})
		if err != nil || first != 51 {
			t.Fatalf("append after truncate-all: %d, %v; want 51", first, err)
		}
	})
	t.Run("concurrent", func(t *testing.T) {
		s := mk(t)
		const writers, per = 4, 50
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := 0; w < writers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < per; i++ {
					first, err := s.Append([]Entry{{Data: []byte{byte(i)}}, {Data: []byte{byte(i)}}})
					if err != nil {
						errs <- err
						return
					}
					if d := s.Durable(); durableOnAppend && d < first+1 {
						errs <- fmt.Errorf("durable %d below own batch end %d after Append", d, first+1)
						return
					}
					if _, err := s.Read(first + 1); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if _, l := s.Bounds(); l != writers*per*2 {
			t.Fatalf("last = %d, want %d", l, writers*per*2)
		}
		// Batches are contiguous: both records of a batch carry the same byte.
		for seq := Seq(1); seq <= writers*per*2; seq += 2 {
			a, _ := s.Read(seq)
			b, _ := s.Read(seq + 1)
			if !bytes.Equal(a.Data, b.Data) {
				t.Fatalf("batch at %d interleaved: %v %v", seq, a.Data, b.Data)
			}
		}
	})
	t.Run("close", func(t *testing.T) {
		s := mk(t)
		if _, err := s.Append([]Entry{entry(1)}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if _, err := s.Append([]Entry{entry(2)}); !errors.Is(err, ErrClosed) {
			t.Fatalf("Append after Close: %v", err)
		}
		if _, err := s.Read(1); !errors.Is(err, ErrClosed) {
			t.Fatalf("Read after Close: %v", err)
		}
		if _, err := s.Sync(); !errors.Is(err, ErrClosed) {
			t.Fatalf("Sync after Close: %v", err)
		}
	})
	t.Run("meta-too-large", func(t *testing.T) {
		s := mk(t)
		if _, err := s.Append([]Entry{{Meta: make([]byte, MaxMetaSize+1)}}); !errors.Is(err, ErrTooLarge) {
			t.Fatalf("huge meta: %v", err)
		}
		if _, l := s.Bounds(); l != 0 {
			t.Fatalf("failed append stored something: last %d", l)
		}
	})
}

func seqs(a, b Seq) []Seq {
	var s []Seq
	for i := a; i <= b; i++ {
		s = append(s, i)
	}
	return s
}

func TestMemStoreContract(t *testing.T) {
	runStoreContract(t, func(t *testing.T) Store {
		s := NewMemStore()
		t.Cleanup(func() { s.Close() })
		return s
	}, true)
}
