package admin

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMain fails the run when goroutines started by the tests outlive them
// (admin listeners, engines, the browser driver).
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := leakedGoroutines(5*time.Second, "github.com/fibrilmq/fibril/", "github.com/chromedp/"); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines leaked by the tests:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}

// leakedGoroutines waits up to d for every goroutine whose stack mentions
// one of pkgs to end and returns the stacks of those still running.
func leakedGoroutines(d time.Duration, pkgs ...string) string {
	deadline := time.Now().Add(d)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var leaked []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "leakedGoroutines") {
				continue
			}
			for _, p := range pkgs {
				if strings.Contains(g, p) {
					leaked = append(leaked, g)
					break
				}
			}
		}
		if len(leaked) == 0 || time.Now().After(deadline) {
			return strings.Join(leaked, "\n\n")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
