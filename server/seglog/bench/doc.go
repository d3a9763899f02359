// Package bench holds benchmarks that compare the segment log with another
// well-known Go store (go.etcd.io/bbolt) doing the same appends. It is
// test-only: the bbolt dependency never reaches seglog itself. See
// BENCHMARKS.md for the command and the numbers.
package bench
