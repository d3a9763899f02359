package seglog

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkFdatasyncAfterWrite measures a group commit's I/O on the disk of
// TMPDIR: write chunk bytes at the end of what was written so far into a 64
// MiB file, fdatasync, repeat, and report the median and p99 fdatasync (µs).
// "fallocated" is how the log prepares a new segment (fallocate: the blocks
// are "unwritten", and the first write into each converts its extent, so
// the fdatasync also writes the inode), "zerorange" how it prepared a spare
// (fallocate ZERO_RANGE over written blocks, which makes them unwritten
// again), "written" a file whose blocks already hold written zeros (no
// conversion: one I/O per commit). See ARCHITECTURE.md, "Decisions and
// what was measured".
//
//	go test ./server/seglog -run '^$' -bench FdatasyncAfterWrite -benchtime 3x
func BenchmarkFdatasyncAfterWrite(b *testing.B) {
	const size = 64 << 20
	for _, prep := range []string{"fallocated", "zerorange", "written"} {
		for _, chunk := range []int{64 << 10, 512 << 10} {
			b.Run(prep+"/"+strconv.Itoa(chunk>>10)+"KiB", func(b *testing.B) {
				path := filepath.Join(b.TempDir(), "seg")
				buf := make([]byte, chunk)
				for i := range buf {
					buf[i] = byte(i*7 + 1)
				}
				var p50, p99 []float64
				for range b.N {
					f := preparedFile(b, path, prep, size)
					var lat []time.Duration
					for off := int64(0); off+int64(chunk) <= size; off += int64(chunk) {
						if _, err := f.WriteAt(buf, off); err != nil {
							b.Fatal(err)
						}
						t0 := time.Now()
						if err := unix.Fdatasync(int(f.Fd())); err != nil {
							b.Fatal(err)
						}
						lat = append(lat, time.Since(t0))
					}
					f.Close()
					slices.Sort(lat)
					p50 = append(p50, float64(lat[len(lat)/2].Microseconds()))
					p99 = append(p99, float64(lat[len(lat)*99/100].Microseconds()))
				}
				slices.Sort(p50)
				slices.Sort(p99)
				b.ReportMetric(p50[len(p50)/2], "p50-µs")
				b.ReportMetric(p99[len(p99)/2], "p99-µs")
			})
		}
	}
}

// preparedFile creates path afresh, size bytes long, its blocks prepared
// as prep says and synced.
func preparedFile(b *testing.B, path, prep string, size int64) *os.File {
	b.Helper()
	_ = os.Remove(path)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	writeZeros := func() {
		zeros := make([]byte, 1<<20)
		for off := int64(0); off < size; off += int64(len(zeros)) {
			if _, err := f.WriteAt(zeros, off); err != nil {
				b.Fatal(err)
			}
		}
	}
	switch prep {
	case "fallocated":
		err = unix.Fallocate(int(f.Fd()), 0, 0, size)
	case "zerorange":
		writeZeros()
		if err = unix.Fsync(int(f.Fd())); err == nil {
			zeroFile(b, path, size) // as prepareSpare does, in one step
		}
	case "written":
		writeZeros()
	}
	if err != nil {
		b.Fatal(err)
	}
	if err := unix.Fsync(int(f.Fd())); err != nil {
		b.Fatal(err)
	}
	return f
}
