package broker

import "time"

// Clock supplies time to the broker so tests can drive leases and delays with
// a fake clock.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed and returns a
	// function that cancels the call (reporting whether it did).
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

// SystemClock returns the Clock backed by package time.
func SystemClock() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}
