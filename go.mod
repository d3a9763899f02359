module github.com/fibrilmq/fibril

go 1.26.8

require (
	github.com/cespare/xxhash/v2 v2.3.0
	golang.org/x/sys v0.50.0
)
