package faultrun

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/internal/faultfs"
	fibril "github.com/fibrilmq/fibril/sdk"
)

// catOutcome is what a client knows of one catalog change: answered +OK,
// answered with an error (it did not happen), or no answer (the power went
// first: it may or may not have happened).
type catOutcome int

const (
	catConfirmed catOutcome = iota + 1
	catRefused
	catUnknown
)

// catLedger records every catalog change a client asked for, in order.
type catLedger struct {
	mu      sync.Mutex
	topics  map[string]catOutcome // create
	groups  map[string]catOutcome // create of group "g" on the topic
	deletes map[string]catOutcome // delete of the topic
	done    int                   // changes answered +OK
}

func newCatLedger() *catLedger {
	return &catLedger{topics: map[string]catOutcome{}, groups: map[string]catOutcome{}, deletes: map[string]catOutcome{}}
}

func outcomeOf(err error) catOutcome {
	if err == nil {
		return catConfirmed
	}
	var serr *fibril.Error
	if errors.As(err, &serr) {
		return catRefused
	}
	return catUnknown
}

func (l *catLedger) record(m map[string]catOutcome, name string, err error) catOutcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	o := outcomeOf(err)
	m[name] = o
	if o == catConfirmed {
		l.done++
	}
	return o
}

func (l *catLedger) confirmed() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done
}

// changeCatalog creates topics cat.<cycle>.<i> with a group each and
// deletes every fourth one it created, until the connection fails or ctx
// ends.
func changeCatalog(ctx context.Context, url string, cycle int, l *catLedger) {
	c, err := fibril.Connect(ctx, url, fibril.WithoutReconnect(), fibril.WithRequestTimeout(5*time.Second))
	if err != nil {
		return
	}
	defer c.Close()
	for i := 0; i < 10_000 && ctx.Err() == nil; i++ {
		name := fmt.Sprintf("cat.%d.%d", cycle, i)
		_, err := c.CreateTopic(ctx, name, fibril.TopicConfig{})
		if l.record(l.topics, name, err) != catConfirmed {
			if outcomeOf(err) == catUnknown {
				return
			}
			continue
		}
		_, err = c.CreateGroup(ctx, name, "g", fibril.GroupConfig{})
		if l.record(l.groups, name, err) == catUnknown {
			return
		}
		if i%4 == 3 {
			if l.record(l.deletes, name, c.DeleteTopic(ctx, name)) == catUnknown {
				return
			}
		}
	}
}

// TestCatalogJournalPowerCut cuts the power of a real `fibril serve`
// (faultfs under its data directory) while a client creates topics and
// groups and deletes topics, several times over the same directory, and
// checks the catalog after each restart: the node starts (the journal and
// catalog.json are never left unreadable), every create answered +OK is
// there with its group unless a delete of it was sent, every delete
// answered +OK is gone, and no topic appears that was never asked for.
// Journal records are fsynced before the answer, the fold into
// catalog.json happens at each Open, and a power cut can land in either.
func TestCatalogJournalPowerCut(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary under power cuts")
	}
	if err := faultfs.Available(); err != nil {
		t.Skipf("needs power cuts: %v", err)
	}
	seed := seedFor(t)
	rng := rand.New(rand.NewPCG(seed, 0))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	n, err := StartProcNode(ctx, "n1", fibrilBinary(t, ""), filepath.Join(t.TempDir(), "n1"), true)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	l := newCatLedger()
	const cycles = 4
	for cycle := range cycles {
		before := l.confirmed()
		target := before + 3 + rng.IntN(40)
		cctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); changeCatalog(cctx, n.URL(), cycle, l) }()
		for l.confirmed() < target && ctx.Err() == nil {
			time.Sleep(time.Millisecond)
		}
		if err := n.PowerCut(ctx); err != nil {
			t.Fatalf("seed %d cycle %d: power cut: %v", seed, cycle, err)
		}
		stop()
		wg.Wait()
		if err := n.Restart(ctx); err != nil {
			t.Fatalf("seed %d cycle %d: the node did not come back after a power cut: %v", seed, cycle, err)
		}
		checkCatalog(ctx, t, seed, cycle, n.URL(), l)
	}
	if l.confirmed() < cycles*3 {
		t.Fatalf("seed %d: only %d catalog changes confirmed", seed, l.confirmed())
	}
}

func checkCatalog(ctx context.Context, t *testing.T, seed uint64, cycle int, url string, l *catLedger) {
	t.Helper()
	c, err := fibril.Connect(ctx, url, fibril.WithoutReconnect(), fibril.WithRequestTimeout(10*time.Second))
	if err != nil {
		t.Fatalf("seed %d cycle %d: connect after restart: %v", seed, cycle, err)
	}
	defer c.Close()
	names, err := c.Topics(ctx)
	if err != nil {
		t.Fatalf("seed %d cycle %d: TOPIC LIST: %v", seed, cycle, err)
	}
	have := map[string]bool{}
	for _, name := range names {
		have[name] = true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for name := range have {
		base, dlq := strings.CutPrefix(name, "$DLQ.")
		if dlq { // a group's dead-letter topic: <topic>.<group>
			base = strings.TrimSuffix(base, ".g")
			if _, asked := l.groups[base]; asked {
				continue
			}
		}
		if _, asked := l.topics[name]; !asked {
			t.Errorf("seed %d cycle %d: topic %s was never created", seed, cycle, name)
		}
	}
	lost, kept := 0, 0
	for name, o := range l.topics {
		_, deleteSent := l.deletes[name]
		switch {
		case l.deletes[name] == catConfirmed && have[name]:
			t.Errorf("seed %d cycle %d: topic %s is back after its delete was confirmed", seed, cycle, name)
		case o == catConfirmed && !deleteSent && !have[name]:
			lost++
			t.Errorf("seed %d cycle %d: confirmed topic %s lost", seed, cycle, name)
		case o == catConfirmed && !deleteSent:
			kept++
			if l.groups[name] == catConfirmed {
				if _, err := c.Group(ctx, name, "g"); err != nil {
					t.Errorf("seed %d cycle %d: confirmed group g of %s: %v", seed, cycle, name, err)
				}
			}
		}
	}
	t.Logf("seed %d cycle %d: %d topics listed, %d confirmed kept, %d lost", seed, cycle, len(names), kept, lost)
}
