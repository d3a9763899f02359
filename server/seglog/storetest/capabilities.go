package storetest

import (
	"errors"
	"testing"

	"github.com/fibrilmq/fibril/server/seglog"
)

// testSideRecords checks the side-record methods against what SideRecords
// says: a store with side records takes them (marks 1, 2, ...), makes them
// durable with Sync, hands them back through ScanSide tagged with the
// number of the record after them, and never through Read or Scan; a
// store without them refuses AppendSide with errors.ErrUnsupported and
// reports none.
func testSideRecords(t *testing.T, mk func(*testing.T) (seglog.Store, string), _ Opener, _ Options) {
	s, _ := mk(t)
	appendN(t, s, 1, 3, 3)
	if !s.SideRecords() {
		if _, err := s.AppendSide(seglog.Entry{Data: []byte("x")}); !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("AppendSide on a store without side records: %v, want errors.ErrUnsupported", err)
		}
		if d := s.DurableSide(); d != 0 {
			t.Fatalf("DurableSide %d on a store without side records, want 0", d)
		}
		if err := s.ScanSide(1, func(r seglog.Record) bool { t.Fatalf("ScanSide passed %+v", r); return false }); err != nil {
			t.Fatalf("ScanSide on a store without side records: %v", err)
		}
		return
	}
	for i, data := range []string{"side-a", "side-b"} {
		mark, err := s.AppendSide(seglog.Entry{Data: []byte(data)})
		if err != nil || mark != uint64(i+1) {
			t.Fatalf("AppendSide %q = %d, %v; want mark %d", data, mark, err, i+1)
		}
	}
	if _, err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if d := s.DurableSide(); d != 2 {
		t.Fatalf("DurableSide %d after Sync, want 2", d)
	}
	appendN(t, s, 4, 4, 1)
	var got []string
	if err := s.ScanSide(1, func(r seglog.Record) bool {
		if r.Seq != 4 {
			t.Fatalf("side record %q tagged %d, want 4 (the record after it)", r.Data, r.Seq)
		}
		got = append(got, string(r.Data))
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "side-a" || got[1] != "side-b" {
		t.Fatalf("ScanSide passed %q, want side-a, side-b", got)
	}
	wantBounds(t, s, 1, 4)
	checkAll(t, s, 1, 4) // Read and Scan pass the records only
}

// testHeldMaps: SwapCount never goes down and ReleaseSwapped, with any
// argument, leaves every record readable (a store that holds no replaced
// maps counts none and ignores it).
func testHeldMaps(t *testing.T, mk func(*testing.T) (seglog.Store, string), _ Opener, _ Options) {
	s, _ := mk(t)
	appendN(t, s, 1, 20, 5)
	n := s.SwapCount()
	s.ReleaseSwapped(n)
	s.ReleaseSwapped(n + 10) // past what was replaced: nothing more to release
	if m := s.SwapCount(); m < n {
		t.Fatalf("SwapCount went from %d to %d", n, m)
	}
	checkAll(t, s, 1, 20)
}
