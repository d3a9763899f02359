package admin_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/internal/testserver"
)

// TestMain fails the run when goroutines started by the tests outlive them
// (admin listeners, engines, the browser driver). It is in the external
// test package because internal/testserver imports server, which imports
// this package.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if leaked := testserver.LeakedGoroutines(5*time.Second, "github.com/fibrilmq/fibril/", "github.com/chromedp/"); leaked != "" {
			fmt.Fprintf(os.Stderr, "goroutines leaked by the tests:\n%s\n", leaked)
			code = 1
		}
	}
	os.Exit(code)
}
