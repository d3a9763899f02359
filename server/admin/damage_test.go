package admin

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/server/broker"
)

// TestDamagedRecordFailsReadyz damages a stored record under a running
// engine: once a consumer reaches it, /readyz answers 503 naming the
// group, partition and offset, and /metrics shows
// fibril_group_damaged_offset for it.
func TestDamagedRecordFailsReadyz(t *testing.T) {
	dir := t.TempDir()
	o := broker.DefaultOptions()
	o.SegmentSize, o.EventSegmentSize, o.Logf = 1<<20, 1<<20, t.Logf
	b, err := broker.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s := startAdmin(t, Options{Broker: staticBroker(b)})
	tp, err := b.CreateTopic("orders", broker.TopicConfig{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := tp.Group("billing", broker.GroupConfig{})
	if err != nil {
		t.Fatal(err)
	}
	publish(t, tp, 5)
	if code, _ := get(t, s.URL()+"/readyz"); code != 200 {
		t.Fatalf("/readyz before the damage: %d", code)
	}
	// Flip the last byte of the first record's data (seq 1).
	seg := filepath.Join(dir, "topics", "1", "0", "data", "00000000000000000001.seg")
	f, err := os.OpenFile(seg, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	hdr := make([]byte, 32)
	if _, err := f.ReadAt(hdr, 32); err != nil {
		t.Fatal(err)
	}
	at := int64(32+32+int(binary.LittleEndian.Uint16(hdr[26:]))+int(binary.LittleEndian.Uint32(hdr[4:]))) - 1
	bb := []byte{0}
	f.ReadAt(bb, at)
	bb[0] ^= 1
	if _, err := f.WriteAt(bb, at); err != nil {
		t.Fatal(err)
	}
	f.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if ds, err := g.Poll(ctx, 10); err == nil && len(ds) > 0 {
		t.Fatalf("poll past a damaged first record delivered %d messages", len(ds))
	}
	code, body := get(t, s.URL()+"/readyz")
	if code != 503 || !strings.Contains(string(body), `"damaged data"`) || !strings.Contains(string(body), `"seq":1`) {
		t.Fatalf("/readyz with a group stopped at damage: %d %s", code, body)
	}
	_, body = get(t, s.URL()+"/metrics")
	if !strings.Contains(string(body), `fibril_group_damaged_offset{group="billing",partition="0",topic="orders"} 1`) {
		t.Fatalf("/metrics lacks fibril_group_damaged_offset:\n%s", body)
	}
}
