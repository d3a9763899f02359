package memstore

import (
	"errors"
	"strings"
	"testing"

	"github.com/fibrilmq/fibril/server/seglog"
)

func entries(data ...string) []seglog.Entry {
	es := make([]seglog.Entry, len(data))
	for i, d := range data {
		es[i] = seglog.Entry{Data: []byte(d), Meta: []byte("m" + d)}
	}
	return es
}

func TestLog(t *testing.T) {
	s := New()
	st, err := s.Open("/d/a", seglog.PolicyCaller)
	if err != nil {
		t.Fatal(err)
	}
	if first, last := st.Bounds(); first != 1 || last != 0 {
		t.Fatalf("empty bounds %d..%d, want 1..0", first, last)
	}
	if seq, err := st.Append(entries("a", "bb")); err != nil || seq != 1 {
		t.Fatalf("append: %d %v", seq, err)
	}
	if seq, err := st.Append(entries("ccc")); err != nil || seq != 3 {
		t.Fatalf("append: %d %v", seq, err)
	}
	if d, err := st.Sync(); err != nil || d != 3 || st.Durable() != 3 {
		t.Fatalf("sync %d %v durable %d", d, err, st.Durable())
	}
	for _, tc := range []struct {
		seq  seglog.Seq
		data string
		ok   bool
	}{{1, "a", true}, {2, "bb", true}, {3, "ccc", true}, {0, "", false}, {4, "", false}} {
		r, err := st.Read(tc.seq)
		if tc.ok != (err == nil) || (tc.ok && (string(r.Data) != tc.data || string(r.Meta) != "m"+tc.data || r.Seq != tc.seq)) {
			t.Errorf("Read(%d) = %+v, %v", tc.seq, r, err)
		}
		if !tc.ok && !errors.Is(err, ErrNotFound) {
			t.Errorf("Read(%d): %v, want ErrNotFound", tc.seq, err)
		}
	}
	var got []string
	if err := st.Scan(2, 1, func(r seglog.Record) bool { got = append(got, string(r.Data)); return true }); err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, ",") != "bb" {
		t.Errorf("Scan(2, 1 byte) = %v, want [bb]", got)
	}
	if err := st.TruncateFront(3); err != nil {
		t.Fatal(err)
	}
	if first, last := st.Bounds(); first != 3 || last != 3 {
		t.Fatalf("bounds after TruncateFront(3): %d..%d", first, last)
	}
	if err := st.TruncateFront(99); err != nil {
		t.Fatal(err)
	}
	if first, last := st.Bounds(); first != 4 || last != 3 {
		t.Fatalf("bounds after TruncateFront(99): %d..%d", first, last)
	}
}

func TestOpenCloseAndFaults(t *testing.T) {
	s := New()
	a, _ := s.Open("/d/a", seglog.PolicyCaller)
	b, _ := s.Open("/d/events", seglog.PolicyCaller)
	if _, err := s.Open("/d/a", seglog.PolicyCaller); !errors.Is(err, ErrAlreadyOpen) {
		t.Fatalf("second open: %v, want ErrAlreadyOpen", err)
	}
	s.FailAppends(func(dir string) bool { return strings.HasSuffix(dir, "/events") })
	if _, err := a.Append(entries("x")); err != nil {
		t.Fatalf("append to an unmatched log: %v", err)
	}
	if _, err := b.Append(entries("x")); !errors.Is(err, ErrInjected) {
		t.Fatalf("append to a matched log: %v, want ErrInjected", err)
	}
	s.FailAppends(nil)
	if _, err := b.Append(entries("y")); err != nil {
		t.Fatalf("append after the fault was cleared: %v", err)
	}

	c := s.CrashCopy(RenameUnder("/d", "/e"))
	if _, err := a.Append(entries("after")); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(entries("z")); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v, want ErrClosed", err)
	}
	a2, err := s.Open("/d/a", seglog.PolicyCaller)
	if err != nil {
		t.Fatalf("reopen after close: %v", err)
	}
	if _, last := a2.Bounds(); last != 2 {
		t.Fatalf("reopened log ends at %d, want 2", last)
	}
	ca, err := c.Open("/e/a", seglog.PolicyCaller)
	if err != nil {
		t.Fatal(err)
	}
	if _, last := ca.Bounds(); last != 1 {
		t.Fatalf("crash copy ends at %d, want 1 (taken before the last append)", last)
	}
	if l, err := c.Open("/d/a", seglog.PolicyCaller); err != nil {
		t.Fatal(err)
	} else if _, last := l.Bounds(); last != 0 {
		t.Fatalf("the copy kept the old directory too (ends at %d)", last)
	}
}

func TestCrashCopyAndLoseTailKeepTheFront(t *testing.T) {
	s := New()
	st, _ := s.Open("/d/a", seglog.PolicyNone)
	if _, err := st.Append(entries("a", "b", "c", "d", "e")); err != nil {
		t.Fatal(err)
	}
	if err := st.TruncateFront(3); err != nil {
		t.Fatal(err)
	}
	c := s.CrashCopy(nil)
	if err := s.LoseTail("/d/a", 4); !errors.Is(err, ErrAlreadyOpen) {
		t.Fatalf("LoseTail on an open log: %v, want ErrAlreadyOpen", err)
	}
	st.Close()
	if err := s.LoseTail("/d/a", 3); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		s         *Stores
		last      seglog.Seq
		wantFirst string
	}{{c, 5, "c"}, {s, 3, "c"}} {
		l, err := tc.s.Open("/d/a", seglog.PolicyNone)
		if err != nil {
			t.Fatal(err)
		}
		if first, last := l.Bounds(); first != 3 || last != tc.last {
			t.Errorf("bounds %d..%d, want 3..%d", first, last, tc.last)
		}
		if r, err := l.Read(3); err != nil || string(r.Data) != tc.wantFirst || string(r.Meta) != "mc" {
			t.Errorf("Read(3) = %+v, %v", r, err)
		}
		if _, err := l.Read(2); !errors.Is(err, ErrNotFound) {
			t.Errorf("Read(2) = %v, want ErrNotFound", err)
		}
	}
	if err := s.LoseTail("/nowhere", 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("LoseTail of no log: %v", err)
	}
}
