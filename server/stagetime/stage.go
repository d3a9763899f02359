package stagetime

import (
	"sync/atomic"
	"time"
)

// Stage is one point of a chain, measured from the chain's origin.
type Stage uint8

// The stages, by chain. Publish (origin: the socket read that brought the
// PUB): Parsed .. ConfirmWritten. Delivery (origin: the append that stored
// the message): DeliveryWritten. Ack (origin: the socket read that brought
// the ACK): AckParsed, AckDurable.
const (
	Parsed          Stage = iota // the PUB was parsed and reached its handler
	Enqueued                     // checked and copied, it enters its partition's ring
	PickedUp                     // the partition actor took it into a round
	Appended                     // the round's data append returned
	FsyncStart                   // the data fsync that made it durable began
	FsyncEnd                     // that fsync returned
	Confirmed                    // the actor ran its completion (the confirm is due)
	ConfirmWritten               // its +OK went to the connection's output
	DeliveryWritten              // a delivery of a stored message went to a consumer's output
	AckParsed                    // an ACK was parsed and reached its handler
	AckDurable                   // the ACK's settle is durable (its +OK is due)
	NumStages
)

var stageNames = [NumStages]string{
	"parsed", "enqueued", "picked_up", "appended", "fsync_start", "fsync_end",
	"confirmed", "confirm_written", "delivery_written", "ack_parsed", "ack_durable",
}

// String is the stage's name in /metrics (the label "stage").
func (s Stage) String() string {
	if s < NumStages {
		return stageNames[s]
	}
	return "unknown"
}

// Chain names the chain a stage belongs to (its origin).
func (s Stage) Chain() string {
	switch {
	case s <= ConfirmWritten:
		return "publish"
	case s == DeliveryWritten:
		return "delivery"
	default:
		return "ack"
	}
}

// base is the origin of Now: set once when the package loads, never
// written again.
var base = time.Now()

// Now is the current time for stage origins: monotonic nanoseconds since
// the process started, never 0.
func Now() int64 { return Mono(time.Now()) }

// Mono converts t (read with its monotonic clock, as time.Now gives it)
// to Now's scale.
func Mono(t time.Time) int64 { return int64(t.Sub(base)) + 1 }

// Recorder is one Hist per stage. Its methods are safe for concurrent use
// and do nothing on a nil *Recorder.
type Recorder struct {
	h [NumStages]Hist
	// pubs and sets bound the publish and ack chains' samples
	pubs, sets *Gate
}

// DefaultGap is the least time between two samples of a chain, server
// wide: at most 2,000 a second, a few hundred microseconds of clock reads.
const DefaultGap = 500 * time.Microsecond

// NewRecorder returns an empty Recorder whose gates let a sample of each
// chain through every gap (0: every one).
func NewRecorder(gap time.Duration) *Recorder {
	return &Recorder{pubs: NewGate(gap), sets: NewGate(gap)}
}

// SamplePub returns origin when a publish received then may be a sample
// of the publish chain (its gate is open), else 0 (never for a nil
// Recorder).
func (r *Recorder) SamplePub(origin int64) int64 {
	if r == nil || !r.pubs.Open(origin) {
		return 0
	}
	return origin
}

// SampleSettle is SamplePub for the ack chain.
func (r *Recorder) SampleSettle(origin int64) int64 {
	if r == nil || !r.sets.Open(origin) {
		return 0
	}
	return origin
}

// Since records stage s of a chain whose origin is origin (a Now value),
// reading the clock; an origin of 0 (not sampled) records nothing.
func (r *Recorder) Since(s Stage, origin int64) {
	if r == nil || origin == 0 {
		return
	}
	r.At(s, origin, Now())
}

// At records stage s reached at now (a Now value) by a chain from origin;
// an origin of 0 records nothing.
func (r *Recorder) At(s Stage, origin, now int64) {
	if r == nil || origin == 0 || s >= NumStages {
		return
	}
	r.h[s].Observe(time.Duration(now - origin))
}

// Snapshot copies stage s's histogram (empty for a nil Recorder).
func (r *Recorder) Snapshot(s Stage) Snapshot {
	if r == nil || s >= NumStages {
		return Snapshot{}
	}
	return r.h[s].Snapshot()
}

// Observe records stage s as d after its chain's origin, for a chain
// whose origin is known only as a duration (a delivery's, from the
// stored message's time).
func (r *Recorder) Observe(s Stage, d time.Duration) {
	if r == nil || s >= NumStages {
		return
	}
	r.h[s].Observe(d)
}

// Gate lets samples through at most once per gap of their origins'
// times, whoever asks (a server-wide bound on the accounting's cost: a
// few clock reads per sample, however many connections and reads there
// are). The zero value lets every sample through. Safe for concurrent
// use; two callers at the same moment may both pass.
type Gate struct {
	gap  int64
	next atomic.Int64
}

// NewGate returns a Gate that lets one sample through per gap.
func NewGate(gap time.Duration) *Gate { return &Gate{gap: int64(gap)} }

// Open reports whether a sample whose origin is now (a Now value) may be
// taken, and if so closes the gate until now+gap. A nil Gate is shut.
func (g *Gate) Open(now int64) bool {
	if g == nil || now == 0 || now < g.next.Load() {
		return false
	}
	g.next.Store(now + g.gap)
	return true
}
