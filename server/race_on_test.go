//go:build race

package server

// raceEnabled: under -race sync.Pool drops what it is given at random, so
// pooled output buffers are allocated again; allocation counts are checked
// only without it.
const raceEnabled = true
