package seglog

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentUse runs appenders, readers, a scanner, a syncer and a
// front truncator at once (meant for -race). Readers stay well above the
// truncation point, as the borrowing rule requires.
func TestConcurrentUse(t *testing.T) {
	for _, p := range []Policy{PolicySync, PolicyCaller, PolicyNone} {
		t.Run(p.String(), func(t *testing.T) {
			l, _ := openTest(t, Options{Policy: p, SegmentSize: 4 << 10, IndexInterval: 256})
			const writers, per = 3, 80
			var truncatedTo atomic.Uint64
			var wg sync.WaitGroup
			errs := make(chan error, 16)
			fail := func(err error) {
				select {
				case errs <- err:
				default:
				}
			}
			var writersDone atomic.Int32
			for w := 0; w < writers; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer writersDone.Add(1)
					for i := 0; i < per; i++ {
						meta := fmt.Appendf(nil, "%d", w)
						if _, err := l.Append([]Entry{{Meta: meta, Data: fmt.Appendf(nil, "w%d-%d-%0100d", w, i, 0)}}); err != nil {
							fail(err)
							return
						}
					}
				}()
			}
			readCheck := func(r Record) error {
				if len(r.Meta) != 1 || len(r.Data) < 4 || r.Data[1] != r.Meta[0] {
					return fmt.Errorf("record %d: meta %q data %q do not match", r.Seq, r.Meta, r.Data)
				}
				return nil
			}
			wg.Add(3)
			go func() { // reader
				defer wg.Done()
				for writersDone.Load() < writers {
					_, last := l.Bounds()
					lo := Seq(truncatedTo.Load()) + 40
					if last <= lo {
						runtime.Gosched()
						continue
					}
					for seq := lo; seq <= last; seq += 7 {
						r, err := l.Read(seq)
						if err != nil && !errors.Is(err, ErrNotFound) {
							fail(err)
							return
						}
						if err == nil {
							if cerr := readCheck(r); cerr != nil {
								fail(cerr)
								return
							}
						}
					}
				}
			}()
			go func() { // scanner and syncer
				defer wg.Done()
				for writersDone.Load() < writers {
					from := Seq(truncatedTo.Load()) + 40
					err := l.Scan(from, 4096, func(r Record) bool {
						if cerr := readCheck(r); cerr != nil {
							fail(cerr)
							return false
						}
						return true
					})
					if err != nil {
						fail(err)
						return
					}
					if _, err := l.Sync(); err != nil {
						fail(err)
						return
					}
				}
			}()
			go func() { // truncator: keeps the front moving, far behind readers
				defer wg.Done()
				for writersDone.Load() < writers {
					runtime.Gosched()
					_, last := l.Bounds()
					if last > 100 {
						to := last - 100
						if to > Seq(truncatedTo.Load()) {
							truncatedTo.Store(uint64(to))
						}
						if err := l.TruncateFront(to); err != nil {
							fail(err)
							return
						}
					}
				}
			}()
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if first, last := l.Bounds(); last != writers*per || first == 1 {
				t.Fatalf("bounds %d,%d; want last %d and the front truncated", first, last, writers*per)
			}
		})
	}
}
