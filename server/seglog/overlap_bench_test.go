package seglog

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkOverlappedFdatasync measures whether two fdatasyncs of one file
// in flight at once help on the disk of TMPDIR, under a steady writer:
// 4 KiB pwrites (4 records of 1 KiB) at 7,500 bursts/s into a 64 MiB file
// whose blocks are already written (as a recycled segment's are), while
// syncers fdatasync whenever something was written after the last fsync
// began. "one" is how a commit lane runs today (one fsync at a time, the
// next started as soon as one ends), "two-shared" lets two run at once on
// one descriptor, "two-fds" on a descriptor each (on one descriptor Linux
// reports a writeback error to only one of two concurrent fsyncs). It
// reports fsyncs/s and the p50/p99 from a write to the end of the first
// fsync that began after it (write→durable, µs). Run it interleaved, a few
// times; the machine's other load moves the tail a lot.
//
//	go test ./server/seglog -run '^$' -bench OverlappedFdatasync -benchtime 2x -count 5
func BenchmarkOverlappedFdatasync(b *testing.B) {
	for _, mode := range []struct {
		name   string
		slots  int
		sepFDs bool
	}{{"one", 1, false}, {"two-shared", 2, false}, {"two-fds", 2, true}} {
		b.Run(mode.name, func(b *testing.B) {
			var p50, p99, rate []float64
			for range b.N {
				r := overlapRun(b, mode.slots, mode.sepFDs, time.Second)
				p50, p99, rate = append(p50, r.p50), append(p99, r.p99), append(rate, r.rate)
			}
			b.ReportMetric(median(p50), "p50-µs")
			b.ReportMetric(median(p99), "p99-µs")
			b.ReportMetric(median(rate), "fsyncs/s")
		})
	}
}

type overlapResult struct{ p50, p99, rate float64 }

// overlapRun runs the writer and slots syncers for d (bounded) and
// measures write→durable.
func overlapRun(b *testing.B, slots int, sepFDs bool, d time.Duration) overlapResult {
	b.Helper()
	const size = 64 << 20
	path := filepath.Join(b.TempDir(), "seg")
	f := preparedFile(b, path, "written", size)
	defer f.Close()
	fds := []int{int(f.Fd())}
	for i := 1; i < slots; i++ {
		fds = append(fds, int(f.Fd()))
		if sepFDs {
			g, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer g.Close()
			fds[i] = int(g.Fd())
		}
	}
	type write struct {
		n int64 // bursts written up to and including this one
		t time.Time
	}
	var (
		mu       sync.Mutex
		written  int64   // bursts written
		started  int64   // bursts covered by the latest fsync started
		durable  int64   // bursts known durable
		open     []write // writes not yet durable, oldest first
		lat      []time.Duration
		fsyncs   int
		syncErr  error
		stop     = make(chan struct{})
		wg       sync.WaitGroup
		burst    = make([]byte, 4<<10)
		interval = time.Second / 7500
	)
	wg.Add(1)
	go func() { // the writer
		defer wg.Done()
		off := int64(0)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			t := time.Now()
			if _, err := unix.Pwrite(int(f.Fd()), burst, off%size); err != nil {
				b.Error(err)
				return
			}
			off += int64(len(burst))
			mu.Lock()
			written++
			open = append(open, write{written, t})
			mu.Unlock()
			time.Sleep(interval - time.Since(t))
		}
	}()
	for _, fd := range fds {
		wg.Add(1)
		go func(fd int) { // a syncer
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				upto := written
				if upto <= started {
					mu.Unlock()
					time.Sleep(20 * time.Microsecond)
					continue
				}
				started = upto
				mu.Unlock()
				err := unix.Fdatasync(fd)
				now := time.Now()
				mu.Lock()
				if err != nil {
					syncErr = err
				}
				fsyncs++
				durable = max(durable, upto)
				k := 0
				for k < len(open) && open[k].n <= durable {
					lat = append(lat, now.Sub(open[k].t))
					k++
				}
				open = open[:copy(open, open[k:])]
				mu.Unlock()
			}
		}(fd)
	}
	time.Sleep(d)
	close(stop)
	wg.Wait()
	if syncErr != nil {
		b.Fatal(syncErr)
	}
	if len(lat) == 0 {
		b.Fatal("nothing became durable")
	}
	slices.Sort(lat)
	us := func(p float64) float64 { return float64(lat[int(float64(len(lat)-1)*p)]) / 1e3 }
	return overlapResult{p50: us(.5), p99: us(.99), rate: float64(fsyncs) / d.Seconds()}
}
