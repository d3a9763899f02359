package seglog

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// Benchmarks for BENCHMARKS.md. One iteration appends one batch of 1 KiB
// records; MB/s counts record data. The raw-disk baselines write the same
// bytes to a plain file with pwrite, then fdatasync, with the same batches.

const benchRecord = 1024

var benchBatches = []int{1, 64, 1024}

func benchEntries(n int) []Entry {
	data := make([]byte, benchRecord)
	for i := range data {
		data[i] = byte(i*7 + 1)
	}
	es := make([]Entry, n)
	for i := range es {
		es[i] = Entry{Data: data}
	}
	return es
}

func BenchmarkAppend(b *testing.B) {
	for _, mode := range []string{"pwrite", "mmap"} {
		for _, p := range []Policy{PolicySync, PolicyCaller, PolicyNone} {
			for _, n := range benchBatches {
				b.Run(fmt.Sprintf("seglog-%s/%s/batch=%d", mode, p, n), func(b *testing.B) {
					l, err := Open(b.TempDir(), Options{Policy: p, writeViaMap: mode == "mmap"})
					if err != nil {
						b.Fatal(err)
					}
					defer l.Close()
					es := benchEntries(n)
					b.SetBytes(int64(n * benchRecord))
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						if _, err := l.Append(es); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// BenchmarkAppendPipelined is one writer that overlaps encoding and
// writing the next batch with the fsync of the previous ones, the way the
// broker's commit does: PolicyCaller Appends, and Syncs on another
// goroutine (up to 2 batches in flight). An op is done when its batch is
// durable.
func BenchmarkAppendPipelined(b *testing.B) {
	for _, n := range benchBatches {
		b.Run(fmt.Sprintf("seglog-pipelined/batch=%d", n), func(b *testing.B) {
			l, err := Open(b.TempDir(), Options{Policy: PolicyCaller})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			es := benchEntries(n)
			b.SetBytes(int64(n * benchRecord))
			inflight := make(chan Seq, 2)
			done := make(chan error, 1)
			b.ResetTimer()
			go func() {
				for last := range inflight {
					if l.Durable() >= last {
						continue // an earlier Sync covered it
					}
					if _, err := l.Sync(); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			for i := 0; i < b.N; i++ {
				first, err := l.Append(es)
				if err != nil {
					b.Fatal(err)
				}
				inflight <- first + Seq(n) - 1
			}
			close(inflight)
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkAppendParallel: 16 goroutines append single records under
// PolicySync, each paying its own fsync (the log shares none: a caller
// that wants them shared batches, or syncs itself as the broker does),
// beside the raw disk doing the same by hand.
func BenchmarkAppendParallel(b *testing.B) {
	for _, p := range []Policy{PolicySync} {
		b.Run(fmt.Sprintf("seglog/%s/batch=1", p), func(b *testing.B) {
			l, err := Open(b.TempDir(), Options{Policy: p})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			es := benchEntries(1)
			b.SetBytes(benchRecord)
			b.SetParallelism(8) // 16 goroutines on 2 CPUs
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := l.Append(es); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
	b.Run("raw-disk/fdatasync-shared/batch=1", func(b *testing.B) {
		// The ideal: each goroutine's pwrite followed by one fdatasync that
		// whoever comes first does for all (the same group commit by hand).
		f := rawFile(b, true)
		var mu sync.Mutex
		var off int64
		buf := make([]byte, benchRecord)
		b.SetBytes(benchRecord)
		b.SetParallelism(8)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				mu.Lock()
				o := off
				off += benchRecord
				mu.Unlock()
				if _, err := f.WriteAt(buf, o); err != nil {
					b.Error(err)
					return
				}
				if err := unix.Fdatasync(int(f.Fd())); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// rawFile opens a plain file, preallocated to 4 GiB with fallocate when
// prealloc is set (space is only reserved, as for a segment).
func rawFile(b *testing.B, prealloc bool) *os.File {
	f, err := os.OpenFile(filepath.Join(b.TempDir(), "raw"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	if prealloc {
		if err := unix.Fallocate(int(f.Fd()), 0, 0, 4<<30); err != nil {
			b.Fatal(err)
		}
	}
	return f
}

func BenchmarkRawDisk(b *testing.B) {
	for _, sync := range []bool{true, false} {
		for _, prealloc := range []bool{true, false} {
			for _, n := range benchBatches {
				name := fmt.Sprintf("raw-disk/fdatasync=%v/prealloc=%v/batch=%d", sync, prealloc, n)
				b.Run(name, func(b *testing.B) {
					f := rawFile(b, prealloc)
					buf := make([]byte, n*benchRecord)
					for i := range buf {
						buf[i] = byte(i*7 + 1)
					}
					b.SetBytes(int64(len(buf)))
					b.ResetTimer()
					var off int64
					for i := 0; i < b.N; i++ {
						if _, err := f.WriteAt(buf, off); err != nil {
							b.Fatal(err)
						}
						off += int64(len(buf))
						if sync {
							if err := unix.Fdatasync(int(f.Fd())); err != nil {
								b.Fatal(err)
							}
						}
						if off >= 4<<30 {
							off = 0
						}
					}
				})
			}
		}
	}
}

// benchLog fills a log with n 1 KiB records (not timed).
func benchLog(b *testing.B, dir string, mb int) {
	l, err := Open(dir, Options{Policy: PolicyNone})
	if err != nil {
		b.Fatal(err)
	}
	es := benchEntries(1024)
	for i := 0; i < mb; i++ {
		if _, err := l.Append(es); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkRead(b *testing.B) {
	dir := b.TempDir()
	benchLog(b, dir, 128)
	l, err := Open(dir, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	_, last := l.Bounds()
	b.Run("random", func(b *testing.B) {
		rng := rand.New(rand.NewPCG(1, 2))
		b.SetBytes(benchRecord)
		for i := 0; i < b.N; i++ {
			if _, err := l.Read(Seq(rng.Int64N(int64(last))) + 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("scan", func(b *testing.B) {
		b.SetBytes(benchRecord)
		n := 0
		for n < b.N {
			err := l.Scan(1, 0, func(Record) bool { n++; return n < b.N })
			if err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkReopen opens a log of SEGLOG_BENCH_REOPEN_MB MiB (default 1024)
// of 1 KiB records: after a clean Close, after a crash (the last segment is
// scanned), and with every index file lost (every segment is scanned).
func BenchmarkReopen(b *testing.B) {
	mb := 1024
	if s := os.Getenv("SEGLOG_BENCH_REOPEN_MB"); s != "" {
		mb, _ = strconv.Atoi(s)
	}
	dir := b.TempDir()
	benchLog(b, dir, mb)
	for _, kind := range []string{"clean", "crash", "no-index"} {
		b.Run(fmt.Sprintf("%dMiB/%s", mb, kind), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				if kind == "no-index" {
					idx, _ := filepath.Glob(filepath.Join(dir, "*"+idxExt))
					for _, p := range idx {
						os.Remove(p)
					}
				}
				b.StartTimer()
				l, err := Open(dir, Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if kind == "clean" {
					if err := l.Close(); err != nil {
						b.Fatal(err)
					}
				} else {
					l.Abandon()
				}
				b.StartTimer()
			}
			b.StopTimer()
			l, err := Open(dir, Options{})
			if err != nil {
				b.Fatal(err)
			}
			l.Close()
		})
	}
}
