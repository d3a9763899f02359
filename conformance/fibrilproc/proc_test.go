package fibrilproc

import (
	"strings"
	"sync"
	"testing"
)

// TestLogsReadWhileTheServerWrites is the regression test for a data race
// -race found in TestOpenFilesLimitIsTooManyFiles: Logs read the stderr
// builder under the Server's lock while the process's output goroutine
// wrote it under the writer's own. Now both go through the writer's lock.
func TestLogsReadWhileTheServerWrites(t *testing.T) {
	w := &lockedWriter{b: &strings.Builder{}}
	s := &Server{logs: w}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 1000 {
			_, _ = w.Write([]byte("line\n"))
		}
	}()
	for range 1000 {
		_ = s.Logs()
	}
	wg.Wait()
	if got := strings.Count(s.Logs(), "line\n"); got != 1000 {
		t.Fatalf("logs hold %d lines, want 1000", got)
	}
}
