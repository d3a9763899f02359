package replog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fibrilmq/fibril/server/cluster"
	"github.com/fibrilmq/fibril/server/seglog"
)

// Errors of the replicated logs.
var (
	// ErrNotLeader: this replica does not serve the partition (it is a
	// follower, a leader that has not yet applied everything committed
	// before its term, or one whose serving epoch ended). Retriable on
	// the leader. An entry pending when its epoch ended has an unknown
	// outcome: it may still be committed and applied.
	ErrNotLeader = errors.New("replog: not the serving leader")
	// ErrBusy: the pending buffer (Config.MaxPendingBytes) or the
	// group's proposal bounds are full. Nothing was appended; retry.
	ErrBusy = errors.New("replog: too much pending, retry later")
	// ErrCorrupt: a replicated entry or the applied mark does not
	// decode, or a local log lacks records its mark or the raft log say
	// it holds. The replica refuses to go on (nothing is truncated).
	ErrCorrupt = errors.New("replog: corrupt")
	// errRestoreStopped: a restore from a peer was cut short by
	// CloseGroup. The group stops with it; nothing was installed.
	errRestoreStopped = errors.New("replog: restore from a peer stopped by close")
)

// Config describes one replica of a partition's replicated logs.
type Config struct {
	// Group is the raft replica's configuration (ID, Peers, timeouts,
	// limits; SnapshotEvery defaults to 4096 entries). Open sets Dir,
	// OnLeader and CompactBehindMatch. Its Fetch carries restores from
	// peers (a cluster.Node's groups have it); without one a replica
	// handed a snapshot past its logs retries, logging, until closed.
	Group cluster.Config
	// Transport carries the group's raft messages; its receiving end
	// hands them to Pair.Group().Step.
	Transport cluster.Transport
	// Tick is the raft tick (default 10ms).
	Tick time.Duration
	// MaxPendingBytes bounds the record bytes appended on the leader and
	// not yet applied here (default 64 MiB); past it Append fails with
	// ErrBusy.
	MaxPendingBytes int
	// SegmentSize is the local logs' segment size (default
	// seglog.DefaultSegmentSize).
	SegmentSize int64
	// RestoreTimeout bounds one attempt to fetch the local logs from a
	// peer for a snapshot past them (default 30 min); a failed attempt is
	// retried, from another peer first, until it succeeds or the pair
	// closes.
	RestoreTimeout time.Duration
	// MarkEvery writes the applied mark every that many applied entries
	// (default 256), and at least every 8 MiB applied.
	MarkEvery int
	// Logf reports background errors (default: dropped).
	Logf func(format string, args ...any)
	// OpenGroup, when set, opens the raft group instead of
	// cluster.OpenGroup over Transport and Tick (a cluster.Node's group,
	// which routes its messages: Node.AddGroupWith); CloseGroup then
	// closes it (Node.CloseGroup). Open hands it the Config it would use.
	OpenGroup  func(gc cluster.Config, sm cluster.StateMachine) (*cluster.Group, error)
	CloseGroup func(g *cluster.Group) error
}

const (
	defaultMaxPending = 64 << 20
	// defaultSnapshotEvery: the raft log is compacted (behind every
	// replica's match index, on the leader) every that many entries.
	defaultSnapshotEvery = 4096
	markBytes            = 8 << 20
	entrySlack           = 64 // header bytes an entry adds to its records
)

// Pair is one partition's replicated logs: the data log and the event
// log (Data, Events), both applied from one raft group. Methods are safe
// for concurrent use.
type Pair struct {
	dir    string
	cfg    Config
	id     uint64
	g      *cluster.Group
	data   *Log
	events *Log

	mu   sync.Mutex
	cond *sync.Cond // Sync and WriteState wait on it: completions and role changes
	lead uint64
	term uint64
	// serving: this replica leads and applied everything committed
	// before its term (its barrier is applied). epoch changes at every
	// change of serving; entries carry it, so the state machine knows
	// an entry of the current epoch from a stale one.
	serving  bool
	epoch    uint64
	ended    error  // why the last serving epoch ended
	proposed uint64 // entries proposed in this serving epoch
	settled  uint64 // of those, the ones ended (applied or failed)
	pending  int    // record bytes appended and not yet applied
	notify   func()
	open     int  // logs not yet closed
	closing  bool // Close began: serve nothing more
	retry    *time.Timer

	// Restores from a peer (restore.go): ctx ends at CloseGroup, opened
	// is closed once g is set; seen is the applied index for the fetch
	// server (serve.go), which serves one fetch at a time (sending).
	ctx     context.Context
	cancel  context.CancelFunc
	opened  chan struct{}
	seen    atomic.Uint64
	sending atomic.Bool
	// restoreFailures counts failed attempts to restore from a peer.
	restoreFailures atomic.Uint64
	// cutMu keeps the local logs' fronts in place while the fetch server
	// copies a batch of records out of them (seglog invalidates records
	// read from a segment TruncateFront removed): the apply worker holds
	// it to truncate. It is never taken with mu held, nor mu under it.
	cutMu sync.Mutex

	// The apply worker's own (Applied, Apply, Snapshot, Restore).
	gen       uint64 // the local logs' generation (applied.go)
	applied   uint64
	stateAt   uint64
	sinceMark int
	markBytes int
}

// Open opens (creating if needed) the replicated logs in dir: local
// seglogs dir/data and dir/events, the raft group in dir/raft, the
// applied mark dir/applied; state files WriteState replaces live in dir
// too. It fails if the local logs lack records the mark says they hold,
// or hold records without a mark (a directory that was not replicated).
func Open(dir string, cfg Config) (*Pair, error) {
	if cfg.Tick <= 0 {
		cfg.Tick = 10 * time.Millisecond
	}
	if cfg.MaxPendingBytes <= 0 {
		cfg.MaxPendingBytes = defaultMaxPending
	}
	if cfg.SegmentSize == 0 {
		cfg.SegmentSize = seglog.DefaultSegmentSize
	}
	if cfg.RestoreTimeout <= 0 {
		cfg.RestoreTimeout = 30 * time.Minute
	}
	if cfg.MarkEvery <= 0 {
		cfg.MarkEvery = 256
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Group.SnapshotEvery == 0 {
		cfg.Group.SnapshotEvery = defaultSnapshotEvery
	}
	if cfg.Group.MaxEntryBytes == 0 {
		cfg.Group.MaxEntryBytes = cluster.DefaultMaxEntryBytes
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("replog: %w", err)
	}
	m, marked, err := readMark(dir)
	if err != nil {
		return nil, err
	}
	if err := settleGen(dir, m.gen); err != nil {
		return nil, err
	}
	p := &Pair{dir: dir, cfg: cfg, id: cfg.Group.ID, open: 2, applied: m.index, stateAt: m.stateAt, gen: m.gen, opened: make(chan struct{})}
	p.seen.Store(m.index)
	p.cond = sync.NewCond(&p.mu)
	p.ctx, p.cancel = context.WithCancel(context.Background())
	opts := seglog.Options{Policy: seglog.PolicyCaller, SegmentSize: cfg.SegmentSize, Verify: true}
	for _, x := range []struct {
		l    **Log
		name string
		tag  byte
		next seglog.Seq
	}{{&p.data, "data", tagData, m.nextData}, {&p.events, "events", tagEvents, m.nextEv}} {
		ldir := logDir(dir, m.gen, x.name)
		local, err := seglog.Open(ldir, opts)
		if err != nil {
			p.closeLocal()
			return nil, fmt.Errorf("replog: %s log: %w", x.name, err)
		}
		_, last := local.Bounds()
		if !marked {
			if last != 0 {
				local.Close()
				p.closeLocal()
				return nil, fmt.Errorf("%w: %s holds records up to %d but %s has no applied mark: not a replicated log", ErrCorrupt,
					ldir, last, dir)
			}
			x.next = last + 1
		}
		if last+1 < x.next {
			local.Close()
			p.closeLocal()
			return nil, fmt.Errorf("%w: %s ends at %d, its applied mark says %d", ErrCorrupt, ldir, last, x.next-1)
		}
		*x.l = &Log{p: p, tag: x.tag, applyNext: x.next}
		(*x.l).local.Store(local)
	}
	gc := cfg.Group
	gc.Dir, gc.OnLeader, gc.CompactBehindMatch = filepath.Join(dir, "raft"), p.onLeader, true
	var g *cluster.Group
	if cfg.OpenGroup != nil {
		g, err = cfg.OpenGroup(gc, p)
	} else {
		g, err = cluster.OpenGroup(gc, p, cfg.Transport, cfg.Tick)
	}
	if err != nil {
		p.cancel()
		p.closeLocal()
		return nil, fmt.Errorf("replog: %s: %w", dir, err)
	}
	g.ServeFetch(p.serveFetch)
	p.mu.Lock()
	p.g = g
	close(p.opened) // a restore the apply worker began may use the group now
	if p.lead == p.id {
		p.proposeBarrierLocked()
	}
	p.mu.Unlock()
	return p, nil
}

// Group returns the partition's raft group (for the transport's
// receiving end and for status).
func (p *Pair) Group() *cluster.Group { return p.g }

// Err returns the error that stopped the group (a corrupt entry, a
// failed fsync), if any: the replica then serves and
// applies nothing until it is opened again.
func (p *Pair) Err() error { return p.g.Err() }

// Data returns the replicated data log.
func (p *Pair) Data() seglog.Store { return p.data }

// Events returns the replicated event log.
func (p *Pair) Events() seglog.Store { return p.events }

// Serving reports whether this replica serves the partition (it leads
// the group and applied everything committed before its term) and the
// epoch, which changes at every change of that: an owner that saw one
// epoch and finds another rebuilds or drops its state.
func (p *Pair) Serving() (bool, uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.serving, p.epoch
}

// Notify makes fn be called at every change of Serving. fn runs on the
// group's goroutine (or a closer's) and must not block.
func (p *Pair) Notify(fn func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.notify = fn
}

func (p *Pair) fire() {
	p.mu.Lock()
	fn := p.notify
	p.mu.Unlock()
	if fn != nil {
		fn()
	}
}

// onLeader (group loop) takes a change of the known leader or term: a
// serving epoch ends, and a replica that leads starts its barrier.
func (p *Pair) onLeader(lead, term uint64) {
	p.mu.Lock()
	p.lead, p.term = lead, term
	changed := p.stopServingLocked(fmt.Errorf("leader is now %d, term %d", lead, term))
	if lead == p.id && p.g != nil {
		p.proposeBarrierLocked()
	}
	p.mu.Unlock()
	if changed {
		p.fire()
	}
}

// stopServingLocked ends the serving epoch: the pending records are
// forgotten (their entries' outcome is unknown), and every waiter wakes
// to find the epoch changed.
func (p *Pair) stopServingLocked(why error) bool {
	if !p.serving {
		return false
	}
	p.ended = why
	p.serving = false
	p.epoch++
	p.pending = 0
	for _, l := range [...]*Log{p.data, p.events} {
		clear(l.pend)
		l.pend = l.pend[:0]
	}
	p.cond.Broadcast()
	return true
}

// proposeBarrierLocked proposes the entry whose application starts a
// serving epoch: every entry committed before it is applied by then, so
// the local logs are complete and new seqs follow them.
func (p *Pair) proposeBarrierLocked() {
	if p.closing {
		return
	}
	epoch, term := p.epoch, p.term
	err := p.g.ProposeAsync(header(nil, tagBarrier, p.id, epoch), func(_ uint64, err error) { p.barrierDone(epoch, term, err) })
	if err != nil {
		p.retryBarrierLocked(err)
	}
}

// retryBarrierLocked proposes the barrier again a few ticks later (the
// group was busy: a leadership transfer, a full queue).
func (p *Pair) retryBarrierLocked(err error) {
	if p.closing || p.retry != nil {
		return
	}
	if errors.Is(err, cluster.ErrClosed) {
		p.cfg.Logf("replog %s: the group stopped: %v", p.dir, p.g.Err())
		return // nothing will take it: the pair serves nothing more
	}
	p.cfg.Logf("replog %s: barrier: %v; retrying", p.dir, err)
	p.retry = time.AfterFunc(10*p.cfg.Tick, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.retry = nil
		if p.lead == p.id && !p.serving {
			p.proposeBarrierLocked()
		}
	})
}

// barrierDone (group loop) starts the serving epoch if nothing changed
// since the barrier was proposed.
func (p *Pair) barrierDone(epoch, term uint64, err error) {
	p.mu.Lock()
	if p.epoch != epoch || p.term != term || p.lead != p.id || p.serving || p.closing {
		p.mu.Unlock()
		return
	}
	if err != nil {
		p.retryBarrierLocked(err)
		p.mu.Unlock()
		return
	}
	p.serving = true
	p.epoch++
	p.proposed, p.settled, p.pending = 0, 0, 0
	for _, l := range [...]*Log{p.data, p.events} {
		l.next, l.cutAsked = l.applyNext, 0
		l.pend = l.pend[:0]
	}
	p.mu.Unlock()
	p.fire()
}

// failEpochLocked ends a serving epoch one of whose entries was lost
// (refused, or skipped at apply): later entries of it cannot be applied
// at their seqs, so nothing more of it may be confirmed. A new barrier
// starts the next epoch after what was applied.
func (p *Pair) failEpochLocked(why error) bool {
	if !p.stopServingLocked(why) {
		return false
	}
	if p.lead == p.id {
		p.proposeBarrierLocked()
	}
	return true
}

// proposeLocked proposes one entry of the serving epoch; its end counts
// toward Sync, and a failed data entry ends the epoch.
func (p *Pair) proposeLocked(buf []byte, data bool, done func(error)) error {
	epoch := p.epoch
	err := p.g.ProposeAsync(buf, func(_ uint64, err error) {
		p.mu.Lock()
		changed := false
		if p.epoch == epoch {
			p.settled++
			if err != nil && data {
				changed = p.failEpochLocked(fmt.Errorf("an entry was lost: %w", err))
			}
		}
		p.cond.Broadcast()
		p.mu.Unlock()
		if done != nil {
			done(err)
		}
		if changed {
			p.fire()
		}
	})
	if err != nil {
		switch {
		case errors.Is(err, cluster.ErrBusy):
			return fmt.Errorf("%w: %w", ErrBusy, err)
		case errors.Is(err, cluster.ErrClosed):
			return fmt.Errorf("%w: %w", ErrNotLeader, err)
		}
		return fmt.Errorf("replog: propose: %w", err)
	}
	p.proposed++
	return nil
}

// waitLocked waits until every entry proposed in the serving epoch
// before the call has ended, and reports ErrNotLeader if the epoch ended
// or is not serving.
func (p *Pair) waitLocked() error {
	if !p.serving {
		return fmt.Errorf("%w: %s", ErrNotLeader, p.dir)
	}
	epoch, target := p.epoch, p.proposed
	for p.settled < target && p.epoch == epoch {
		p.cond.Wait()
	}
	if p.epoch != epoch || !p.serving {
		return fmt.Errorf("%w: %s: %v; outcome of what was pending is unknown", ErrNotLeader, p.dir, p.ended)
	}
	return nil
}

// WriteState replaces the file name in the partition directory on every
// replica, atomically (temp -> fsync -> rename), in order with the logs'
// records: a replica applying it holds the logs as they were when it was
// written. It blocks until the entry is committed and applied here, and
// fails with ErrNotLeader off the serving leader (outcome unknown if the
// epoch ended while it waited), and with cluster.ErrTooLarge for data
// over the group's entry limit.
func (p *Pair) WriteState(name string, data []byte) error {
	if err := checkStateName(name); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.serving || p.closing {
		return fmt.Errorf("%w: %s", ErrNotLeader, p.dir)
	}
	buf := make([]byte, 0, 1+3*binary.MaxVarintLen64+len(name)+len(data))
	buf = header(buf, tagState, p.id, p.epoch)
	buf = appendUvarint(buf, uint64(len(name)))
	buf = append(append(buf, name...), data...)
	var res error
	ended := false
	if err := p.proposeLocked(buf, true, func(err error) {
		p.mu.Lock()
		res, ended = err, true
		p.cond.Broadcast()
		p.mu.Unlock()
	}); err != nil {
		return fmt.Errorf("replog: write state %s: %w", name, err)
	}
	epoch := p.epoch
	for !ended && p.epoch == epoch {
		p.cond.Wait()
	}
	if !ended {
		return fmt.Errorf("%w: %s: write state %s: outcome unknown", ErrNotLeader, p.dir, name)
	}
	if res != nil {
		return fmt.Errorf("replog: write state %s: %w", name, res)
	}
	return nil
}

// checkStateName refuses a name that is not a plain file name of its
// own (the logs, the raft directory and the mark are replog's).
func checkStateName(name string) error {
	switch {
	case name == "" || filepath.Base(name) != name || name == "." || name == "..":
	case name == appliedName || name == "data" || name == "events" || name == "raft" || strings.HasPrefix(name, genPrefix):
	default:
		return nil
	}
	return fmt.Errorf("replog: state name %q is not a file name of the partition's own", name)
}

// CloseGroup stops the raft group only (as a crash of this replica
// would, for its peers): the logs stay open for reads and serve
// nothing more.
func (p *Pair) CloseGroup() error {
	p.mu.Lock()
	p.closing = true
	changed := p.stopServingLocked(errors.New("the group stopped"))
	p.mu.Unlock()
	if changed {
		p.fire()
	}
	p.cancel() // a restore from a peer stops; the next open starts it again
	var err error
	if p.cfg.CloseGroup != nil {
		err = p.cfg.CloseGroup(p.g)
	} else {
		err = p.g.Close()
	}
	if errors.Is(err, errRestoreStopped) {
		err = nil // the mark was not moved: the next open restores again
	}
	return err
}

// logClosed closes the pair once both of its logs are closed: the
// group stops, the local logs are fsynced under a last mark, and closed.
func (p *Pair) logClosed() error {
	p.mu.Lock()
	p.open--
	last := p.open == 0
	p.mu.Unlock()
	if !last {
		return nil
	}
	err := p.CloseGroup()
	p.mu.Lock()
	if p.retry != nil {
		p.retry.Stop()
	}
	p.mu.Unlock()
	if err == nil {
		err = p.writeMark() // the apply worker has stopped
	}
	return errors.Join(err, p.closeLocal())
}

func (p *Pair) closeLocal() error {
	p.cutMu.Lock() // not while the fetch server copies records out
	defer p.cutMu.Unlock()
	var errs []error
	for _, l := range [...]*Log{p.data, p.events} {
		if l != nil {
			if err := l.loc().Close(); err != nil {
				errs = append(errs, fmt.Errorf("replog: close %s: %w", l.loc().Dir(), err))
			}
		}
	}
	return errors.Join(errs...)
}
