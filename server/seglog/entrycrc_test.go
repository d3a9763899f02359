package seglog

import (
	"bytes"
	"errors"
	"hash/crc32"
	"testing"
)

// TestEntryCRCGivenByCaller: a caller's CRC is stored instead of computed
// (the broker computes it once while checking the producer's checksum); a
// wrong one makes the record read as corrupt, never as data.
func TestEntryCRCGivenByCaller(t *testing.T) {
	l, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	data := []byte("hello, fibril")
	good := crc32.ChecksumIEEE(data)
	for _, c := range []struct {
		name    string
		given   uint32
		corrupt bool
	}{{"computed", 0, false}, {"given", good, false}, {"wrong", good ^ 1, true}} {
		seq, err := l.Append([]Entry{{Data: data, CRC: c.given}})
		if err != nil {
			t.Fatal(err)
		}
		r, err := l.Read(seq)
		switch {
		case c.corrupt && !errors.Is(err, ErrCorrupt):
			t.Errorf("%s: Read = %v, want ErrCorrupt", c.name, err)
		case !c.corrupt && (err != nil || r.CRC != good || !bytes.Equal(r.Data, data)):
			t.Errorf("%s: Read = %v, crc %08x, want %08x", c.name, err, r.CRC, good)
		}
	}
}
