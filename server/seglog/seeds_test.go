package seglog

import (
	"os"
	"strconv"
	"testing"
)

// seedCount returns how many random seeds a randomized test runs: def, or
// SEGLOG_SEEDS for a longer soak (e.g. SEGLOG_SEEDS=500 go test -run Crash).
func seedCount(t *testing.T, def int) int {
	if s := os.Getenv("SEGLOG_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("SEGLOG_SEEDS=%q: want a positive number", s)
		}
		return n
	}
	if testing.Short() {
		return max(def/4, 1)
	}
	return def
}
