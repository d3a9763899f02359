package broker

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fibrilmq/fibril/server/seglog"
)

// The scrub: a goroutine of the broker that reads every sealed segment of
// every log again, one segment at a time at Options.ScrubRate, pass after
// pass (Options.ScrubEvery apart), checking every record. Open checked
// everything; the scrub finds what a disk damages later, before a
// consumer or the next start meets it. Damage it finds is logged at ERROR
// and reported (ScrubStatus, /readyz, metrics); the group that reaches it
// stops there (damage.go). It reads through the logs' own locks (one
// segment at a time), never through a partition's actor.

// ScrubStatus is the scrub's progress.
type ScrubStatus struct {
	// Passes counts the complete passes over every log since Open.
	Passes uint64 `json:"passes"`
	// Bytes counts the bytes checked since Open.
	Bytes uint64 `json:"bytes"`
	// PassBytes is how far the current pass is, of PassTotal (the sealed
	// bytes when it began).
	PassBytes uint64 `json:"pass_bytes"`
	PassTotal uint64 `json:"pass_total"`
	// Damage lists what the scrub found damaged (the file, offset and
	// sequence), most recent last; it is kept until the broker closes.
	Damage []string `json:"damage,omitempty"`
}

// scrubber is the scrub's state.
type scrubber struct {
	stop, done                          chan struct{}
	passes, bytes, passBytes, passTotal atomic.Uint64
	mu                                  sync.Mutex // guards damage
	damage                              []string
}

// verifier is the part of a file log the scrub uses.
type verifier interface {
	VerifySegments(from seglog.Seq, max int) (seglog.Seq, int64, error)
	Segments() []seglog.SegmentInfo
}

// startScrub starts the scrub unless Options.ScrubRate is negative.
func (b *Broker) startScrub() {
	if b.opts.ScrubRate < 0 {
		return
	}
	b.scrub = &scrubber{stop: make(chan struct{}), done: make(chan struct{})}
	go b.scrub.run(b)
}

// stopScrub stops the scrub and waits for it (before the logs close).
func (b *Broker) stopScrub() {
	if b.scrub != nil {
		close(b.scrub.stop)
		<-b.scrub.done
	}
}

// ScrubStatus returns the scrub's progress (zero when it is off). It does
// not block.
func (b *Broker) ScrubStatus() ScrubStatus {
	s := b.scrub
	if s == nil {
		return ScrubStatus{}
	}
	s.mu.Lock()
	dmg := append([]string(nil), s.damage...)
	s.mu.Unlock()
	return ScrubStatus{Passes: s.passes.Load(), Bytes: s.bytes.Load(), PassBytes: s.passBytes.Load(), PassTotal: s.passTotal.Load(), Damage: dmg}
}

// maxScrubDamage bounds the damage the scrub keeps in its report.
const maxScrubDamage = 64

func (s *scrubber) run(b *Broker) {
	defer close(s.done)
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-s.stop:
			return false
		case <-t.C:
			return true
		}
	}
	// Open checked everything (unless QuickStart): the first pass waits
	// like the others.
	first := b.opts.QuickStart
	for first || wait(b.opts.ScrubEvery) {
		first = false
		var logs []verifier
		var total uint64
		for _, t := range b.Topics() {
			for _, p := range t.parts {
				for _, st := range p.scrubStores() {
					if v, ok := st.(verifier); ok {
						logs = append(logs, v)
						for _, si := range v.Segments() {
							if !si.Active {
								total += uint64(si.Bytes)
							}
						}
					}
				}
			}
		}
		s.passTotal.Store(total)
		s.passBytes.Store(0)
		for _, v := range logs {
			for from := seglog.Seq(1); from != 0; {
				next, n, err := v.VerifySegments(from, 1)
				s.bytes.Add(uint64(n))
				s.passBytes.Add(uint64(n))
				if err != nil {
					if errors.Is(err, seglog.ErrClosed) {
						break // its topic was deleted
					}
					s.report(b, err)
					if next == 0 {
						break
					}
				}
				from = next
				if !wait(time.Duration(n) * time.Second / time.Duration(b.opts.ScrubRate)) {
					return
				}
			}
		}
		s.passes.Add(1)
	}
}

// report records and logs damage the scrub found.
func (s *scrubber) report(b *Broker, err error) {
	msg := err.Error()
	s.mu.Lock()
	for _, d := range s.damage {
		if d == msg {
			s.mu.Unlock()
			return // found again by a later pass
		}
	}
	if len(s.damage) < maxScrubDamage {
		s.damage = append(s.damage, msg)
	}
	s.mu.Unlock()
	b.logf("ERROR scrub: %s; a group that reaches it stops there; stop the server and run fibril verify, then restore the file or run fibril repair", msg)
}
