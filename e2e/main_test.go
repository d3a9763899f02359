package e2e

import (
	"os"
	"testing"
)

// TestMain removes the binary built for the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}
