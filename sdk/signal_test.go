package fibril

import (
	"sync"
	"testing"
)

// TestSignal: a channel asked for before the signal fires is closed by
// fire; after fire, wait returns a closed channel without making one; and
// what was written before fire is visible to every waiter (run with -race).
func TestSignal(t *testing.T) {
	var s signal
	if s.isFired() {
		t.Fatal("fired before fire")
	}
	early := s.wait()
	var result int
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-s.wait()
			if result != 42 {
				t.Errorf("result %d after the signal, want 42", result)
			}
		}()
	}
	select {
	case <-early:
		t.Fatal("channel closed before fire")
	default:
	}
	result = 42
	s.fire()
	<-early
	wg.Wait()
	if !s.isFired() {
		t.Fatal("not fired after fire")
	}

	var late signal
	late.fire()
	if late.ch != nil {
		t.Fatal("fire made a channel nobody asked for")
	}
	select {
	case <-late.wait():
	default:
		t.Fatal("wait after fire returned an open channel")
	}
	if late.ch != nil {
		t.Fatal("wait after fire made a channel")
	}
}
