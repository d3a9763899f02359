package seglog

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// jsonEntries builds n 1 KiB-ish JSON-like event payloads.
func jsonEntries(rng *rand.Rand, n int) []Entry {
	es := make([]Entry, n)
	for i := range es {
		var d []byte
		for len(d) < 1000 {
			d = fmt.Appendf(d, `{"order_id":%d,"customer":"c-%06d","sku":"SKU-%04d","qty":%d,"status":"%s","region":"eu-west-%d"}`,
				rng.Int64N(1e12), rng.IntN(1e6), rng.IntN(1e4), rng.IntN(9)+1,
				[]string{"new", "paid", "shipped", "cancelled"}[rng.IntN(4)], rng.IntN(3)+1)
		}
		es[i] = Entry{Data: d}
	}
	return es
}

// BenchmarkReadCompressed reads the sealed part of a log (3 segments of
// 4 MiB of JSON-like 1 KiB records) with each codec: "scan" streams every
// record in order (one decompression per segment), "point" reads one record
// from each segment in turn (more segments than the cache holds: every read
// decompresses a segment, the worst case). It reports the disk the sealed
// segments use (disk-MiB) against their plain size (plain-MiB).
func BenchmarkReadCompressed(b *testing.B) {
	for _, c := range []Compression{CompressionNone, CompressionS2, CompressionZstd} {
		dir := b.TempDir()
		l, err := Open(dir, Options{SegmentSize: 4 << 20, Policy: PolicyNone, Compression: c})
		if err != nil {
			b.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		for len(l.Segments()) < 4 {
			if _, err := l.Append(jsonEntries(rng, 256)); err != nil {
				b.Fatal(err)
			}
		}
		deadline := time.Now().Add(30 * time.Second)
		for c != CompressionNone && !allSealedCompressed(l) {
			if time.Now().After(deadline) {
				b.Fatal("segments not compressed")
			}
			time.Sleep(5 * time.Millisecond)
		}
		segs := l.Segments()[:3]
		var plain, disk int64
		for _, s := range segs {
			plain += s.Bytes
			disk += s.Allocated
		}
		b.Run(c.String()+"/scan", func(b *testing.B) {
			b.SetBytes(plain)
			for i := 0; i < b.N; i++ {
				n := 0
				if err := l.Scan(segs[0].First, 0, func(r Record) bool { n++; return r.Seq < segs[2].Last }); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(plain)/(1<<20), "plain-MiB")
			b.ReportMetric(float64(disk)/(1<<20), "disk-MiB")
		})
		b.Run(c.String()+"/point", func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				s := segs[i%3]
				if _, err := l.Read(s.First + Seq(i)%(s.Last-s.First+1)); err != nil {
					b.Fatal(err)
				}
			}
		})
		l.Close()
	}
}
