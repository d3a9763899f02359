package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
)

// Kind names what an Op did.
type Kind string

// Kinds of ops.
const (
	// Publish: Value published to Topic; on ok, Pos is the confirmed
	// "partition:seq".
	Publish Kind = "publish"
	// Deliver: Value delivered from Topic to Group at Pos with Handle and
	// Attempt, under a lease of LeaseMs. Invoke and Complete are those of
	// the poll (or push wait) that brought it.
	Deliver Kind = "deliver"
	// Ack, Nack, Reject and Extend settle (or extend) the delivery named by
	// Handle; Extend's LeaseMs is the lease it asked for.
	Ack    Kind = "ack"
	Nack   Kind = "nack"
	Reject Kind = "reject"
	Extend Kind = "extend"
	// Close: client Proc's connection ended: closed by the client, or found
	// lost. Invoke is the earliest the server may have seen it end (for a
	// lost connection: its last answer), Complete when the client knew. The
	// server hands a connection's leased deliveries back when it closes.
	Close Kind = "close"
	// Fault: Fault happened to Node between Invoke and Complete. A clock
	// fault carries the node's clock offset after it in OffsetMs.
	Fault Kind = "fault"
	// Phase marks a point of the run: Value "start" opens it (with Seed and
	// DeadLetter), "drain" starts the final drain
	// (faults healed), "done" ends it. A history without "done" is
	// incomplete and cannot be judged for loss.
	Phase Kind = "phase"
)

// Outcome is what the client learnt about an op.
type Outcome string

// Outcomes.
const (
	OK   Outcome = "ok"   // answered yes
	Fail Outcome = "fail" // answered no: no effect
	Info Outcome = "info" // no answer: effect unknown
)

// Fault kinds the checker interprets. Others are counted and shown.
const (
	FaultRestart = "restart" // the node's process started anew (its leases are gone)
	FaultClock   = "clock"   // the node's clock offset became OffsetMs
)

// Phase values.
const (
	PhaseStart = "start"
	PhaseDrain = "drain"
	PhaseDone  = "done"
)

// Op is one line of a history.
type Op struct {
	Kind     Kind    `json:"op"`
	Proc     int     `json:"proc"`     // client process (producer, consumer) or -1 for the harness
	Invoke   int64   `json:"invoke"`   // unix ns when the client sent it
	Complete int64   `json:"complete"` // unix ns when the client saw the answer (or gave up)
	Outcome  Outcome `json:"outcome"`
	Topic    string  `json:"topic,omitempty"`
	Group    string  `json:"group,omitempty"`
	Value    string  `json:"value,omitempty"`
	Pos      string  `json:"pos,omitempty"`
	Handle   string  `json:"handle,omitempty"`
	Attempt  int     `json:"attempt,omitempty"`
	LeaseMs  int64   `json:"lease_ms,omitempty"`
	Node     string  `json:"node,omitempty"`
	Fault    string  `json:"fault,omitempty"`
	OffsetMs int64   `json:"offset_ms,omitempty"`
	Err      string  `json:"err,omitempty"`
	// Seed and DeadLetter belong to the "start" phase: the run's seed (to
	// replay it) and its dead-letter topic (the checker's default).
	Seed       uint64 `json:"seed,omitempty"`
	DeadLetter string `json:"dead_letter,omitempty"`
}

// Writer appends ops to a history file as JSON lines. It is safe for
// concurrent use; each Add is one line, buffered until Close or Flush.
type Writer struct {
	mu  sync.Mutex
	f   *os.File
	w   *bufio.Writer
	n   int
	err error
}

// Create opens path for a new history (truncating it).
func Create(path string) (*Writer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	return &Writer{f: f, w: bufio.NewWriterSize(f, 64<<10)}, nil
}

// Add appends op. The first write error is kept and returned by every later
// Add and by Close.
func (w *Writer) Add(op Op) error {
	b, err := json.Marshal(op)
	if err != nil {
		return fmt.Errorf("history: encoding op: %w", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	b = append(b, '\n')
	if _, err := w.w.Write(b); err != nil {
		w.err = fmt.Errorf("history: writing %s: %w", w.f.Name(), err)
	}
	w.n++
	return w.err
}

// Len returns how many ops were added.
func (w *Writer) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// Flush writes buffered ops to the file.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		if err := w.w.Flush(); err != nil {
			w.err = fmt.Errorf("history: flushing %s: %w", w.f.Name(), err)
		}
	}
	return w.err
}

// Close flushes and closes the file.
func (w *Writer) Close() error {
	err := w.Flush()
	if cerr := w.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("history: closing: %w", cerr)
	}
	return err
}

// MaxLine bounds one history line (a value, a handle and an error text fit
// many times over).
const MaxLine = 1 << 20

// Read decodes a history from r. A malformed line is an error naming it.
func Read(r io.Reader) ([]Op, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxLine)
	var ops []Op
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var op Op
		if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
			return nil, fmt.Errorf("history: line %d: %w", line, err)
		}
		ops = append(ops, op)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("history: reading: %w", err)
	}
	return ops, nil
}

// ReadFile reads the history in path.
func ReadFile(path string) ([]Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	ops, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ops, nil
}
