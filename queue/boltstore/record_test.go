package boltstore

import (
	"bytes"
	"hash/crc32"
	"testing"

	"github.com/fibrilmq/fibril/server/seglog"
)

// FuzzDecode: a value built by appendValue decodes to what was encoded,
// under its own sequence number only; any other bytes are refused or
// decoded (without a panic) with a data CRC that matches.
func FuzzDecode(f *testing.F) {
	f.Add(uint64(1), []byte("meta"), []byte("data"), int64(7), []byte{})
	f.Add(uint64(1<<40), []byte{}, []byte{}, int64(0), []byte{0, 1, 2})
	f.Fuzz(func(t *testing.T, seq uint64, meta, data []byte, ts int64, junk []byte) {
		if seq == 0 || len(meta) > seglog.MaxMetaSize {
			return
		}
		s := seglog.Seq(seq)
		v := appendValue(nil, s, &seglog.Entry{Meta: meta, Data: data, Time: ts}, 99)
		r, err := decode(s, v)
		wantTime := ts
		if ts == 0 {
			wantTime = 99
		}
		if err != nil || r.Seq != s || !bytes.Equal(r.Meta, meta) || !bytes.Equal(r.Data, data) || r.Time != wantTime {
			t.Fatalf("round trip of seq %d: %+v, %v", seq, r, err)
		}
		if _, err := decode(s+1, v); err == nil {
			t.Fatalf("value of seq %d decoded under %d", seq, seq+1)
		}
		if r, err := decode(s, junk); err == nil && crc32.ChecksumIEEE(r.Data) != r.CRC {
			t.Fatalf("junk decoded with a data CRC that does not match")
		}
	})
}
