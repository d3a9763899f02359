package bench

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkBoltAppend appends batches of 1 KiB records to bbolt, one
// read-write transaction (and so one fdatasync) per batch, keys being
// big-endian sequence numbers. NoSync mirrors PolicyNone.
func BenchmarkBoltAppend(b *testing.B) {
	for _, noSync := range []bool{false, true} {
		for _, n := range []int{1, 64, 1024} {
			policy := "sync"
			if noSync {
				policy = "none"
			}
			b.Run(fmt.Sprintf("bbolt/%s/batch=%d", policy, n), func(b *testing.B) {
				db, err := bolt.Open(filepath.Join(b.TempDir(), "bolt.db"), 0o644, &bolt.Options{NoSync: noSync, NoFreelistSync: true})
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				bucket := []byte("log")
				if err := db.Update(func(tx *bolt.Tx) error {
					_, err := tx.CreateBucket(bucket)
					return err
				}); err != nil {
					b.Fatal(err)
				}
				data := make([]byte, 1024)
				for i := range data {
					data[i] = byte(i*7 + 1)
				}
				var seq uint64
				b.SetBytes(int64(n * 1024))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					err := db.Update(func(tx *bolt.Tx) error {
						bk := tx.Bucket(bucket)
						bk.FillPercent = 1 // append-only keys
						for j := 0; j < n; j++ {
							seq++
							var k [8]byte
							binary.BigEndian.PutUint64(k[:], seq)
							if err := bk.Put(k[:], data); err != nil {
								return err
							}
						}
						return nil
					})
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
