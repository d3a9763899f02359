package seglog

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestReadHintForwardBackwardAndDamage: Read guesses that the record after
// the last one read comes next. Whatever the order of reads, every Read
// returns its own record, and a damaged record reached through the guess is
// still reported as damaged.
func TestReadHintForwardBackwardAndDamage(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 64 << 10, IndexInterval: 1024}
	l, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, l, 1, 300, 7)
	check := func(seq Seq) {
		t.Helper()
		r, err := l.Read(seq)
		if err != nil {
			t.Fatalf("Read(%d): %v", seq, err)
		}
		want := entry(int(seq))
		if r.Seq != seq || !bytes.Equal(r.Data, want.Data) || !bytes.Equal(r.Meta, want.Meta) {
			t.Fatalf("Read(%d) returned seq %d data %q", seq, r.Seq, r.Data)
		}
	}
	for seq := Seq(1); seq <= 300; seq++ {
		check(seq)
	}
	for seq := Seq(300); seq >= 1; seq-- {
		check(seq)
	}
	for seq := Seq(1); seq <= 300; seq += 3 {
		check(seq)
		check(seq + 1)
	}
	// Damage record 150's data on disk, then reach it through the guess
	// (read 149 first).
	r150, err := l.Read(150)
	if err != nil {
		t.Fatal(err)
	}
	r150.Data = append([]byte(nil), r150.Data...) // the map goes with Close
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	var path string
	var b []byte
	i := -1
	for _, f := range files {
		if b, err = os.ReadFile(f); err != nil {
			t.Fatal(err)
		}
		if i = bytes.Index(b, r150.Data); i >= 0 {
			path = f
			break
		}
	}
	if i < 0 {
		t.Fatal("record 150 not found in any segment file")
	}
	b[i] ^= 0x40
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err = Open(dir, Options{SegmentSize: 64 << 10, IndexInterval: 1024, SkipCorrupt: true})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer l.Close()
	if _, err := l.Read(149); err != nil {
		t.Fatalf("Read(149): %v", err)
	}
	if r, err := l.Read(150); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Read(150) after 149 = seq %d %q, %v; want ErrCorrupt", r.Seq, r.Data, err)
	}
}
