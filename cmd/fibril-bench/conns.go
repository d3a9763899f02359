package main

import "sync"

// openConns tracks a driver's connections so close can end them all
// (workers may still be dialing while the run stops).
type openConns[C any] struct {
	mu   sync.Mutex
	open []C
}

func (o *openConns[C]) add(c C) {
	o.mu.Lock()
	o.open = append(o.open, c)
	o.mu.Unlock()
}

// closeAll calls closeFn on every tracked connection and forgets them.
func (o *openConns[C]) closeAll(closeFn func(C)) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, c := range o.open {
		closeFn(c)
	}
	o.open = nil
}
