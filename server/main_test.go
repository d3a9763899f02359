package server

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/internal/testrun"
)

// TestMain fails the run when goroutines started by the tests outlive them
// (servers, connections, lanes, TLS readers and writers).
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := testrun.LeakedGoroutines(5*time.Second, "github.com/fibrilmq/fibril/"); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines leaked by the tests:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}
