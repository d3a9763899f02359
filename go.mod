module github.com/fibrilmq/fibril

go 1.26.8

require (
	go.etcd.io/bbolt v1.4.3
	golang.org/x/sys v0.50.0
)

require github.com/klauspost/compress v1.20.4
