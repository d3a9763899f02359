package broker

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// recordOnDisk finds record seq in the segment files of the log in dir and
// returns the file and the offset of its data's last byte.
func recordOnDisk(t *testing.T, dir string, seq Seq) (string, int64) {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "*.seg"))
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for off := 32; off+32 <= len(b); {
			dataLen := int(binary.LittleEndian.Uint32(b[off+4:]))
			n := Seq(binary.LittleEndian.Uint64(b[off+8:]))
			metaLen := int(binary.LittleEndian.Uint16(b[off+26:]))
			if n == 0 {
				break
			}
			size := (32 + metaLen + dataLen + 7) &^ 7
			if fl := binary.LittleEndian.Uint16(b[off+24:]); n == seq && fl&(1<<15|1<<14) != 1<<14 { // not a side record
				return name, int64(off + 32 + metaLen + dataLen - 1)
			}
			off += size
		}
	}
	t.Fatalf("record %d not found in %s", seq, dir)
	return "", 0
}

// flipByte flips the low bit of the byte at off of path.
func flipByte(t *testing.T, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 1
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedRecordIsNeverSettled is the regression test for "damage found
// when a consumer reaches it is settled for that group": dispatch logged
// "offset N unreadable, skipped", settled the offset and went on, so the
// message was gone for the group even once the bit was restored. Now the
// group stops before the damaged offset in that partition, the stop is
// logged at ERROR and shown by GroupInfo and Broker.Damaged, the other
// group's intact path is unaffected, and once the damage is undone and the
// broker reopened every message is delivered, the damaged one included.
func TestDamagedRecordIsNeverSettled(t *testing.T) {
	var mu sync.Mutex
	var logs []string
	e := newEnvWith(t, func(o *Options) {
		o.Logf = func(f string, a ...any) {
			mu.Lock()
			logs = append(logs, fmt.Sprintf(f, a...))
			mu.Unlock()
		}
	})
	tp := e.topic("orders", TopicConfig{})
	g := e.group(tp, "billing", GroupConfig{})
	for i := 1; i <= 60; i++ {
		e.publish(tp, fmt.Sprint("m", i))
	}
	dataDir := filepath.Join(tp.dir, "0", dataLogName)
	path, off := recordOnDisk(t, dataDir, 40)
	flipByte(t, path, off) // the log maps the file: the damage shows at once

	var got []string
	for range 100 {
		ds := e.pollNow(g, 7, 0)
		if len(ds) == 0 {
			break
		}
		for _, d := range ds {
			got = append(got, string(d.Data))
			if err := e.settle(d, Ack()); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(got) != 39 || got[38] != "m39" {
		t.Fatalf("delivered %d messages (%v), want m1..m39 and a stop before the damaged m40", len(got), got)
	}
	in := g.Info()
	if p := in.Partitions[0]; p.DamagedSeq != 40 || !strings.Contains(p.DamagedError, path) {
		t.Fatalf("GroupInfo partition: damaged %d %q, want 40 naming %s", p.DamagedSeq, p.DamagedError, path)
	}
	if ds := e.b.Damaged(); len(ds) != 1 || ds[0].Seq != 40 || ds[0].Group != "billing" {
		t.Fatalf("Damaged() = %+v", ds)
	}
	mu.Lock()
	var errLine string
	for _, l := range logs {
		if strings.HasPrefix(l, "ERROR") && strings.Contains(l, "offset 40") {
			errLine = l
		}
	}
	mu.Unlock()
	if errLine == "" {
		t.Fatalf("no ERROR log naming offset 40 in %q", logs)
	}

	if err := e.b.Close(); err != nil {
		t.Fatal(err)
	}
	flipByte(t, path, off) // an operator restored the file
	b, err := Open(e.dir, e.opts())
	if err != nil {
		t.Fatal(err)
	}
	e.b = b
	tp, _ = b.Topic("orders")
	g, _ = tp.Group("billing", GroupConfig{})
	ds := e.pollNow(g, 100, 0)
	if len(ds) != 21 || string(ds[0].Data) != "m40" {
		t.Fatalf("after the restore: %v, want m40..m60", datas(ds))
	}
	if d := b.Damaged(); d != nil {
		t.Fatalf("Damaged after reopening: %+v", d)
	}
}

// TestScrubFindsDamageWhileServing: damage done to a sealed segment while
// the broker runs is found by the scrub, before any consumer reaches it:
// logged at ERROR, listed by ScrubStatus with the file, and the passes and
// bytes counted.
func TestScrubFindsDamageWhileServing(t *testing.T) {
	var mu sync.Mutex
	var logs []string
	e := newEnvWith(t, func(o *Options) {
		o.ScrubEvery, o.ScrubRate = 5*time.Millisecond, 1<<40
		o.Logf = func(f string, a ...any) {
			mu.Lock()
			logs = append(logs, fmt.Sprintf(f, a...))
			mu.Unlock()
		}
	})
	tp := e.topic("orders", TopicConfig{})
	for i := range 300 {
		e.publish(tp, fmt.Sprintf("m%d-%s", i, strings.Repeat("x", 500)))
	}
	waitFor(t, "a clean scrub pass", func() bool { return e.b.ScrubStatus().Passes > 0 && e.b.ScrubStatus().Bytes > 0 })
	if d := e.b.ScrubStatus().Damage; d != nil {
		t.Fatalf("damage in an intact log: %v", d)
	}
	path, off := recordOnDisk(t, filepath.Join(tp.dir, "0", dataLogName), 10)
	flipByte(t, path, off)
	waitFor(t, "the scrub to find the damage", func() bool { return len(e.b.ScrubStatus().Damage) > 0 })
	if d := e.b.ScrubStatus().Damage; len(d) != 1 || !strings.Contains(d[0], path) || !strings.Contains(d[0], "seq 10") {
		t.Fatalf("scrub damage %v, want %s seq 10", d, path)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(strings.Join(logs, "\n"), "ERROR scrub: seglog: corrupt record in "+path) {
		t.Fatalf("no ERROR line: %q", logs)
	}
}
