// Package offsetclock owns a test-only clock for the broker: the system
// clock plus an offset that a fault harness steps by rewriting a file (a
// decimal number of milliseconds, possibly negative). Go binaries ignore
// libfaketime and a network namespace cannot change the clock, so this is
// how a fault run steps one node's clock forward and back.
//
// It must never be used outside fault runs: cmd/fibril only installs it when
// the hidden FIBRIL_TEST_CLOCK_OFFSET_FILE variable names a file.
//
// # Caveats
//
//   - The offset moves Now (wall and monotonic readings alike, so the
//     broker's deadlines compare consistently); AfterFunc durations are
//     real time, as they are for a stepped system clock.
//   - A change is seen within one poll interval of the file's rewrite.
package offsetclock

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Clock is the system clock plus an offset read from a file. It satisfies
// server/broker's Clock.
type Clock struct {
	path   string
	offset atomic.Int64 // nanoseconds
	quit   chan struct{}
	done   chan struct{}
	once   sync.Once
}

// Open reads path once (a missing or empty file means offset 0) and then
// again every poll until Close.
func Open(path string, poll time.Duration) (*Clock, error) {
	c := &Clock{path: path, quit: make(chan struct{}), done: make(chan struct{})}
	if err := c.reload(); err != nil {
		return nil, err
	}
	go c.loop(poll)
	return c, nil
}

// Now returns the system time plus the offset.
func (c *Clock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// AfterFunc calls f in its own goroutine after d of real time.
func (c *Clock) AfterFunc(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// Offset returns the offset in force.
func (c *Clock) Offset() time.Duration { return time.Duration(c.offset.Load()) }

// Close stops polling the file.
func (c *Clock) Close() {
	c.once.Do(func() { close(c.quit) })
	<-c.done
}

func (c *Clock) loop(poll time.Duration) {
	defer close(c.done)
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-c.quit:
			return
		case <-t.C:
			_ = c.reload() // a torn rewrite is read again at the next tick
		}
	}
}

func (c *Clock) reload() error {
	b, err := os.ReadFile(c.path)
	if os.IsNotExist(err) {
		c.offset.Store(0)
		return nil
	}
	if err != nil {
		return fmt.Errorf("offsetclock: %w", err)
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		c.offset.Store(0)
		return nil
	}
	ms, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("offsetclock: %s: %w", c.path, err)
	}
	c.offset.Store(ms * int64(time.Millisecond))
	return nil
}

// Write sets the offset a Clock on path will read: written to a temporary
// file and renamed, so a reader never sees half of it.
func Write(path string, offset time.Duration) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(offset.Milliseconds(), 10)+"\n"), 0o644); err != nil {
		return fmt.Errorf("offsetclock: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("offsetclock: %w", err)
	}
	return nil
}
