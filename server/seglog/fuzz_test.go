package seglog

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecoders feeds arbitrary bytes to every on-disk decoder: they must
// reject or accept without panicking, and never accept out-of-range values.
func FuzzDecoders(f *testing.F) {
	s := &segment{first: 7, end: segHeaderSize + 64, last: 8, sparseIndex: sparseIndex{index: []indexEntry{{7, 32}, {8, 64}}}}
	f.Add(encodeIndex(s))
	s2 := &segment{first: 7, end: segHeaderSize + 64, last: 12, sparseIndex: s.sparseIndex,
		damage: damage{skipped: []SkippedRange{{Offset: 96, Length: 40, From: 9, To: 10}, {Offset: 136, From: 11, To: 12}}}}
	f.Add(encodeIndex(s2))
	f.Add(encodeClean(cleanMarker{segFirst: 7, last: 8, end: 96}))
	f.Add(appendRecord(nil, 7, 0, 1, []byte("m"), []byte("data"), 0))
	f.Add(encodeSegHeader(7, 4096))
	f.Add(encodeDurableHint(9))
	f.Add(appendRecord(nil, 70000, 3, 1, nil, []byte("hinted"), 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		if x, ok := decodeIndex(b, 7, 4096); ok {
			if x.end > 4096 || x.first != 7 {
				t.Fatalf("accepted index out of range: %+v", x)
			}
			for _, r := range x.skipped {
				if r.Offset < segHeaderSize || r.Offset+r.Length > 4096 || r.To > x.last || r.From < 7 {
					t.Fatalf("accepted skipped range out of range: %+v", r)
				}
			}
		}
		decodeClean(b)
		checkSegHeader(b, 7)
		for off := int64(0); off < int64(len(b)); off += recAlign {
			if h, st := checkRecord(b, off); st == recOK {
				if off+h.size() > int64(len(b)) {
					t.Fatalf("record at %d runs past the buffer", off)
				}
				recordAt(b, off, h) // must not panic
			}
		}
		looksTorn(b, 0, int64(len(b)))
		decodeDurableHint(b)
		staleSegHeader(b, 7)
		for off := int64(0); off+recHeaderSize <= int64(len(b)); off += recAlign {
			if mayHead(b, off, 7) {
				if h := parseHeader(b[off:]); h.seq < 7 {
					t.Fatalf("mayHead took seq %d for 7 or above", h.seq)
				}
			}
		}
	})
}

// FuzzRecoverDamagedTail overwrites bytes anywhere in a log's last segment
// after a crash: Open must fail with ErrCorrupt or open a log whose every
// record reads back as written or as ErrCorrupt, never other bytes.
func FuzzRecoverDamagedTail(f *testing.F) {
	f.Add(uint16(0), []byte{0xff})
	f.Add(uint16(100), []byte{0, 0, 0, 0, 0, 0, 0, 0})
	f.Add(uint16(333), []byte("garbage in the middle"))
	f.Fuzz(func(t *testing.T, at uint16, junk []byte) {
		dir := t.TempDir()
		opts := Options{SegmentSize: 4 << 10, IndexInterval: 128, Policy: PolicyNone}
		l, err := Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		fill(t, l, 1, 30, 3)
		l.Abandon()
		path := filepath.Join(dir, segName(1))
		file, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(junk) > 512 {
			junk = junk[:512]
		}
		file.WriteAt(junk, int64(at)%(4<<10-int64(len(junk))))
		file.Close()
		l2, err := Open(dir, opts)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("open: %v, want nil or ErrCorrupt", err)
			}
			return
		}
		defer l2.Close()
		_, last := l2.Bounds()
		for seq := Seq(1); seq <= last; seq++ {
			r, err := l2.Read(seq)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("read %d: %v", seq, err)
				}
				continue
			}
			if seq > 30 {
				t.Fatalf("record %d was never written", seq)
			}
			wantRecord(t, r, seq, int(seq))
		}
	})
}
