package broker

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/fibrilmq/fibril/server/seglog"
)

// TestTornTailCutIsLogged: a data log whose recovery cut a torn tail (a
// record written but never fsynced, half on disk) opens, keeps every
// confirmed message, and says so in the broker's log.
func TestTornTailCutIsLogged(t *testing.T) {
	e := newEnv(t, nil)
	tp := e.topic("jobs", TopicConfig{})
	for i := range 5 {
		e.publish(tp, fmt.Sprint("m", i))
	}
	if err := e.b.Close(); err != nil {
		t.Fatal(err)
	}
	e.b = nil
	dirs, _ := filepath.Glob(filepath.Join(e.dir, "topics", "*", "0", dataLogName))
	if len(dirs) != 1 {
		t.Fatalf("data logs: %v", dirs)
	}
	// A sixth record, written and never synced (PolicyNone, then a crash),
	// torn in half on disk.
	l, err := seglog.Open(dirs[0], seglog.Options{Policy: seglog.PolicyNone, SegmentSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append([]seglog.Entry{{Data: bytes.Repeat([]byte("x"), 500)}}); err != nil {
		t.Fatal(err)
	}
	segs := l.Segments()
	act := segs[len(segs)-1]
	l.Abandon()
	path := filepath.Join(dirs[0], fmt.Sprintf("%020d.seg", act.First))
	end := act.Bytes + 32 // the segment header
	if err := os.Truncate(path, end-268); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, act.Allocated); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var lines []string
	o := e.opts()
	o.Logf = func(format string, args ...any) {
		mu.Lock()
		lines = append(lines, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	b, err := Open(e.dir, o)
	if err != nil {
		t.Fatalf("open after the torn write: %v", err)
	}
	e.b = b
	mu.Lock()
	logged := strings.Join(lines, "\n")
	mu.Unlock()
	if !strings.Contains(logged, "recovery cut a torn tail") || !strings.Contains(logged, "topic jobs") {
		t.Fatalf("broker log says nothing of the cut:\n%s", logged)
	}
	g := e.group(e.topic("jobs", TopicConfig{}), "w", GroupConfig{})
	if got := datas(e.poll(g, 10)); strings.Join(got, ",") != "m0,m1,m2,m3,m4" {
		t.Fatalf("after recovery: %v", got)
	}
}
