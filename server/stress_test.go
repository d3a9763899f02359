package server

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestDurableConcurrentPublishConsume runs publishers and consumers on
// several connections at once (pipelined, confirms in flight, polls and
// acks interleaved) and checks that every confirmed message is consumed
// and nothing else is.
func TestDurableConcurrentPublishConsume(t *testing.T) {
	s := startDurable(t, nil)
	admin := fibrilConn(t, s, "")
	admin.send("TOPIC CREATE st {\"partitions\":3}\r\nGROUP CREATE st g\r\n")
	admin.expect(`^\+OK `)
	admin.expect(`^\+OK `)
	const pubs, per = 4, 300
	var wg sync.WaitGroup
	for p := range pubs {
		w := fibrilConn(t, s, `,"crc":true`)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var sb strings.Builder
			for i := range per {
				body := fmt.Sprintf("p%d-%d", p, i)
				fmt.Fprintf(&sb, "PUB st %d -\r\n%s\r\n", len(body), body)
			}
			w.send(sb.String())
			for i := range per {
				l, err := w.line()
				if err != nil || !strings.HasPrefix(l, "+OK ") || l == "+OK -" {
					t.Errorf("publisher %d confirm %d: %q %v", p, i, l, err)
					return
				}
			}
		}()
	}
	seen := make(map[string]int)
	var mu sync.Mutex
	done := make(chan struct{})
	var cwg sync.WaitGroup
	for range 3 {
		c := fibrilConn(t, s, "")
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			for {
				c.send("POLL st g 50 100\r\n")
				var handles []string
				for {
					l, err := c.line()
					if err != nil {
						t.Errorf("poll: %v", err)
						return
					}
					if strings.HasPrefix(l, "+OK") {
						break
					}
					b, _ := c.line()
					mu.Lock()
					seen[b]++
					mu.Unlock()
					handles = append(handles, handleRe.FindString(l))
				}
				if len(handles) > 0 {
					c.send("ACK " + strings.Join(handles, " ") + "\r\n")
					if l, err := c.line(); err != nil || l != "+OK" {
						t.Errorf("ack: %q %v", l, err)
						return
					}
					continue
				}
				select {
				case <-done:
					return
				default:
				}
			}
		}()
	}
	wg.Wait()
	waitFor(t, 20*time.Second, "all messages consumed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) >= pubs*per
	})
	close(done)
	cwg.Wait()
	for p := range pubs {
		for i := range per {
			if seen[fmt.Sprintf("p%d-%d", p, i)] == 0 {
				t.Fatalf("p%d-%d never consumed", p, i)
			}
		}
	}
	if len(seen) != pubs*per {
		t.Fatalf("consumed %d distinct bodies, want %d (something invented)", len(seen), pubs*per)
	}
}
