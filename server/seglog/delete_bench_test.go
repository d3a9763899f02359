package seglog

import (
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkDeleteUnderFsync deletes a 64 MiB file whose pages were mapped
// and read (as a truncated segment's are) while another goroutine appends
// 100 KiB and fdatasyncs another file in a loop, as a group commit does,
// and reports the worst and the median of those fdatasyncs (ms) and how
// long the deletion took. "unlink" is what the log did before trash.go,
// "gradual" is deleteGradually; "zero" and "zerosteps" zero the file for
// reuse instead (fallocate ZERO_RANGE at once, then in deleteStep steps as
// prepareSpare does) and fdatasync it; "none" leaves it alone (the
// baseline). The disk of TMPDIR is the one measured. (It replaces
// bench/dropstall of session 3, which dropped unmapped files.)
//
//	go test ./server/seglog -run '^$' -bench DeleteUnderFsync -benchtime 3x
func BenchmarkDeleteUnderFsync(b *testing.B) {
	for _, mode := range []string{"none", "unlink", "gradual", "zero", "zerosteps"} {
		b.Run(mode, func(b *testing.B) {
			dir := b.TempDir()
			l := &Log{fs: osFS{}, trash: trashBin{step: deleteStep, pause: deletePause}}
			var worst, p50, took []float64
			for range b.N {
				path := filepath.Join(dir, "victim")
				m := mappedFile(b, path, 64<<20)
				var stop atomic.Bool
				done := make(chan []time.Duration)
				go fsyncLoop(b, filepath.Join(dir, "log"), &stop, done)
				time.Sleep(100 * time.Millisecond)
				t0 := time.Now()
				if mode == "unlink" { // before the unmap: the unmap then frees the blocks
					if err := os.Remove(path); err != nil {
						b.Fatal(err)
					}
				}
				if err := unix.Munmap(m); err != nil {
					b.Fatal(err)
				}
				switch mode {
				case "gradual":
					l.deleteGradually(path)
				case "zero":
					zeroFile(b, path, 64<<20)
				case "zerosteps":
					zeroFile(b, path, l.trash.step)
				}
				took = append(took, float64(time.Since(t0))/1e6)
				time.Sleep(100 * time.Millisecond)
				stop.Store(true)
				ds := <-done
				slices.Sort(ds)
				worst = append(worst, float64(ds[len(ds)-1])/1e6)
				p50 = append(p50, float64(ds[len(ds)/2])/1e6)
			}
			b.ReportMetric(median(worst), "worst-fsync-ms")
			b.ReportMetric(median(p50), "p50-fsync-ms")
			b.ReportMetric(median(took), "delete-ms")
		})
	}
}

func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// mappedFile writes size bytes to path, fdatasyncs them and returns a
// read-only map of the file with every page read once.
func mappedFile(b *testing.B, path string, size int) []byte {
	b.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i)
	}
	for off := 0; off < size; off += len(chunk) {
		if _, err := f.WriteAt(chunk, int64(off)); err != nil {
			b.Fatal(err)
		}
	}
	if err := unix.Fdatasync(int(f.Fd())); err != nil {
		b.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		b.Fatal(err)
	}
	sum := 0
	for i := 0; i < size; i += 4096 {
		sum += int(m[i])
	}
	_ = sum
	return m
}

// fsyncLoop appends 100 KiB to path and fdatasyncs it until stop, then
// sends the fdatasync durations.
func fsyncLoop(b *testing.B, path string, stop *atomic.Bool, done chan<- []time.Duration) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		b.Error(err)
		done <- []time.Duration{0}
		return
	}
	defer os.Remove(path)
	defer f.Close()
	buf := make([]byte, 100<<10)
	var ds []time.Duration
	for off := int64(0); !stop.Load(); off = (off + int64(len(buf))) % (32 << 20) {
		if _, err := f.WriteAt(buf, off); err != nil {
			b.Error(err)
			break
		}
		t0 := time.Now()
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			b.Error(err)
			break
		}
		ds = append(ds, time.Since(t0))
	}
	if len(ds) == 0 {
		ds = []time.Duration{0}
	}
	done <- ds
}

// zeroFile zeroes the file at path step bytes at a time (pausing between
// steps like prepareSpare), then fdatasyncs it.
func zeroFile(b *testing.B, path string, step int64) {
	b.Helper()
	f, err := osFS{}.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		b.Fatal(err)
	}
	for off := int64(0); off < size; off += step {
		if off > 0 {
			time.Sleep(deletePause)
		}
		if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_KEEP_SIZE, off, min(step, size-off)); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
}
