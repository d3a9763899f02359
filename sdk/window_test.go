package fibril

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestWindow: tokens are taken up to the size, given back many at once,
// and a taker blocked on a full window leaves with ctx or the Conn.
func TestWindow(t *testing.T) {
	cases := []struct {
		name          string
		size, take    int
		release       int
		wantHeld      int
		thenTakeBlock bool // one more take must block
	}{
		{"empty", 4, 0, 0, 0, false},
		{"partly taken", 4, 3, 0, 3, false},
		{"full", 4, 4, 0, 4, true},
		{"full, two back", 4, 4, 2, 2, false},
		{"full, all back", 4, 4, 4, 0, false},
		{"one token", 1, 1, 0, 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWindow(tc.size)
			for i := 0; i < tc.take; i++ {
				if err := w.take(context.Background(), nil); err != nil {
					t.Fatal(err)
				}
			}
			w.release(tc.release)
			if got := w.held(); got != tc.wantHeld {
				t.Fatalf("held %d, want %d", got, tc.wantHeld)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			err := w.take(ctx, nil)
			if tc.thenTakeBlock != (err != nil) {
				t.Fatalf("take on a window holding %d of %d: %v", tc.wantHeld, tc.size, err)
			}
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Fatalf("take = %v, want context.Canceled", err)
			}
		})
	}
}

// TestWindowReleaseWakesEveryTaker: one release of three tokens lets all
// three blocked takers through (a release signals one, who passes it on).
func TestWindowReleaseWakesEveryTaker(t *testing.T) {
	w := newWindow(3)
	for i := 0; i < 3; i++ {
		if err := w.take(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- w.take(ctx, nil)
		}()
	}
	for {
		w.mu.Lock()
		n := w.waiters
		w.mu.Unlock()
		if n == 3 {
			break
		}
		time.Sleep(time.Millisecond) // polling for the takers to block
	}
	w.release(3)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a taker was not woken: %v", err)
		}
	}
	if got := w.held(); got != 3 {
		t.Fatalf("held %d, want 3", got)
	}
}

// TestWindowTakeEndsWithConn: a taker blocked on a full window returns
// errWindowClosed when the Conn closes.
func TestWindowTakeEndsWithConn(t *testing.T) {
	w := newWindow(1)
	if err := w.take(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- w.take(context.Background(), closed) }()
	close(closed)
	if err := <-done; !errors.Is(err, errWindowClosed) {
		t.Fatalf("take = %v, want errWindowClosed", err)
	}
}
