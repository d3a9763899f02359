package seglog

import (
	"fmt"
	"sync"
	"testing"
)

// runSeeds runs fn as subtest "<prefix>seed<N>" for n seeds, 8 at a time.
// The crash and property tests mostly wait on fsync, so they run wider than
// t.Parallel's GOMAXPROCS limit would allow (t.Run may be called from
// several goroutines at once).
func runSeeds(t *testing.T, prefix string, n int, fn func(t *testing.T, seed int)) {
	seeds := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seed := range seeds {
				t.Run(fmt.Sprintf("%sseed%d", prefix, seed), func(t *testing.T) { fn(t, seed) })
			}
		}()
	}
	for seed := range n {
		seeds <- seed
	}
	close(seeds)
	wg.Wait()
}
