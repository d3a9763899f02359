package seglog

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// BenchmarkOpenSmallLogs opens SEGLOG_BENCH_LOGS (default 200) small logs
// one after the other, as a broker restart does: half with 64 MiB segments
// (a partition's data log), half with 4 MiB (its events log), each holding
// 5 records of 1 KiB. "fresh" creates them, "clean" reopens them after
// Close, "crash" after Abandon (a SIGKILL); "clean+write" reopens after
// Close and appends one 1 KiB record to each log before closing it, as a
// restarted broker whose topics are busy. An op is all the logs; the
// open-ms, append-ms (clean+write only) and close-ms metrics split Open,
// that first Append and Close (Abandon for crash).
func BenchmarkOpenSmallLogs(b *testing.B) {
	n := 200
	if s := os.Getenv("SEGLOG_BENCH_LOGS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	opts := func(i int) Options {
		if i%2 == 0 {
			return Options{SegmentSize: 64 << 20}
		}
		return Options{SegmentSize: 4 << 20}
	}
	for _, kind := range []string{"fresh", "clean", "clean+write", "crash"} {
		b.Run(fmt.Sprintf("logs=%d/%s", n, kind), func(b *testing.B) {
			root := b.TempDir()
			dirs := make([]string, n)
			for i := range dirs {
				dirs[i] = filepath.Join(root, strconv.Itoa(i))
			}
			if kind != "fresh" {
				es := benchEntries(5)
				for i, d := range dirs {
					l, err := Open(d, opts(i))
					if err != nil {
						b.Fatal(err)
					}
					if _, err := l.Append(es); err != nil {
						b.Fatal(err)
					}
					if kind == "crash" {
						l.Abandon()
					} else if err := l.Close(); err != nil {
						b.Fatal(err)
					}
				}
			}
			logs := make([]*Log, n)
			var openT, appendT, closeT time.Duration
			one := benchEntries(1)
			b.ResetTimer()
			for it := 0; it < b.N; it++ {
				if kind == "fresh" {
					b.StopTimer()
					os.RemoveAll(root)
					b.StartTimer()
				}
				t0 := time.Now()
				for i, d := range dirs {
					l, err := Open(d, opts(i))
					if err != nil {
						b.Fatal(err)
					}
					logs[i] = l
				}
				t1 := time.Now()
				if kind == "clean+write" {
					for _, l := range logs {
						if _, err := l.Append(one); err != nil {
							b.Fatal(err)
						}
					}
					appendT += time.Since(t1)
					t1 = time.Now()
				}
				for _, l := range logs {
					if kind == "crash" {
						l.Abandon()
					} else if err := l.Close(); err != nil {
						b.Fatal(err)
					}
				}
				openT += t1.Sub(t0)
				closeT += time.Since(t1)
			}
			b.ReportMetric(float64(openT.Milliseconds())/float64(b.N), "open-ms")
			if kind == "clean+write" {
				b.ReportMetric(float64(appendT.Milliseconds())/float64(b.N), "append-ms")
			}
			b.ReportMetric(float64(closeT.Milliseconds())/float64(b.N), "close-ms")
		})
	}
}

// BenchmarkOpenAfterCrashInSpare measures the Open after a crash whose
// last segment is a reused spare: 1 MiB of new records, then 63 MiB of the
// file's old records, which the tail scan (findNextRecord, tornBefore) and
// cutTail step over 8 bytes at a time. "reused" is that case; "fresh" the
// same 1 MiB tail in a new segment (zeros after it), for comparison.
func BenchmarkOpenAfterCrashInSpare(b *testing.B) {
	rec := make([]byte, 1000)
	for _, reuse := range []bool{false, true} {
		b.Run(map[bool]string{false: "fresh", true: "reused"}[reuse], func(b *testing.B) {
			dir := b.TempDir()
			opts := Options{SegmentSize: 64 << 20, Policy: PolicyNone}
			l, err := Open(dir, opts)
			if err != nil {
				b.Fatal(err)
			}
			appendMiB := func(mib int) {
				for range mib << 10 {
					if _, err := l.Append([]Entry{{Data: rec}}); err != nil {
						b.Fatal(err)
					}
				}
			}
			if reuse {
				appendMiB(128) // two full segments, dropped into spares
				_, last := l.Bounds()
				for range 2 { // the second call releases them
					if err := l.TruncateFront(last); err != nil {
						b.Fatal(err)
					}
				}
				l.rel.wait()
			}
			segs := l.Segments()
			for len(l.Segments()) == len(segs) {
				appendMiB(1) // roll into the spare (or a new file)
			}
			appendMiB(1)
			l.Abandon()
			b.ResetTimer()
			for range b.N {
				l, err := Open(dir, opts)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				l.Abandon() // stays unclean: every Open scans the tail
				b.StartTimer()
			}
		})
	}
}
