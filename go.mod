module github.com/fibrilmq/fibril

go 1.26.8
