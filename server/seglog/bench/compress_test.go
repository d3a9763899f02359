package bench

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// segmentImage builds 16 MiB of record bodies as a sealed segment would hold
// them: "json" is typical event payloads (repeated field names, varying
// values), "random" is incompressible (encrypted or already-compressed
// payloads).
func segmentImage(kind string) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 0, 16<<20)
	for len(buf) < 16<<20 {
		switch kind {
		case "json":
			buf = fmt.Appendf(buf, `{"order_id":%d,"customer":"c-%06d","items":[{"sku":"SKU-%04d","qty":%d,"price":%d.%02d}],"status":"%s","ts":"2026-11-29T09:%02d:%02d.%03dZ","region":"eu-west-%d"}`,
				rng.Int64N(1e12), rng.IntN(1e6), rng.IntN(1e4), rng.IntN(9)+1, rng.IntN(500), rng.IntN(100),
				[]string{"new", "paid", "shipped", "cancelled"}[rng.IntN(4)], rng.IntN(60), rng.IntN(60), rng.IntN(1000), rng.IntN(3)+1)
		default:
			for i := 0; i < 1024; i++ {
				buf = append(buf, byte(rng.Uint32()))
			}
		}
	}
	return buf
}

// BenchmarkCompressSegment measures what compressing a sealed segment would
// cost and save: MB/s is compression speed, "ratio" is original/compressed.
func BenchmarkCompressSegment(b *testing.B) {
	for _, kind := range []string{"json", "random"} {
		img := segmentImage(kind)
		b.Run("s2/"+kind, func(b *testing.B) {
			b.SetBytes(int64(len(img)))
			var out []byte
			for i := 0; i < b.N; i++ {
				out = s2.Encode(out[:0], img)
			}
			b.ReportMetric(float64(len(img))/float64(len(out)), "ratio")
		})
		b.Run("zstd-fastest/"+kind, func(b *testing.B) {
			enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
			if err != nil {
				b.Fatal(err)
			}
			defer enc.Close()
			b.SetBytes(int64(len(img)))
			var out []byte
			for i := 0; i < b.N; i++ {
				out = enc.EncodeAll(img, out[:0])
			}
			b.ReportMetric(float64(len(img))/float64(len(out)), "ratio")
		})
		b.Run("zstd-decode/"+kind, func(b *testing.B) {
			enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest))
			comp := enc.EncodeAll(img, nil)
			enc.Close()
			dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
			if err != nil {
				b.Fatal(err)
			}
			defer dec.Close()
			b.SetBytes(int64(len(img)))
			var out []byte
			for i := 0; i < b.N; i++ {
				if out, err = dec.DecodeAll(comp, out[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
