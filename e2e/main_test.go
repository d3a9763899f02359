package e2e

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain removes the binary built for the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}
