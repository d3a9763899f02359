module github.com/fibrilmq/fibril

go 1.26.8

require (
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/klauspost/compress v1.20.4
	go.etcd.io/bbolt v1.4.3
	golang.org/x/sys v0.50.0
)
