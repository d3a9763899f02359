package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sync/atomic"

	"github.com/fibrilmq/fibril/server/seglog"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"
)

// Errors a proposal can end with.
var (
	// ErrNotLeader: this replica is not the group's leader; propose on
	// the leader (Group.Leader names it, 0 when unknown). Nothing was
	// appended.
	ErrNotLeader = errors.New("cluster: not the leader")
	// ErrLeaderChanged: the leader or term changed while the proposal was
	// in flight. Its outcome is unknown: it may still be applied.
	ErrLeaderChanged = errors.New("cluster: leader changed, outcome unknown")
	// ErrClosed: the group was closed (or failed) before the proposal was
	// applied. Its outcome is unknown.
	ErrClosed = errors.New("cluster: group closed")
	// ErrConfChangeRefused: raft refused a membership change because
	// another one is not applied yet (a new leader counts its whole log as
	// possibly holding one until it applied it). Nothing was appended;
	// retry later.
	ErrConfChangeRefused = errors.New("cluster: conf change refused: another is pending")
	// ErrTooLarge: the proposal is over Config.MaxEntryBytes. Nothing was
	// appended.
	ErrTooLarge = errors.New("cluster: proposal too large")
	// ErrBusy: the leader holds Config.MaxUncommittedBytes of entries not
	// yet committed (a quorum is slow or gone), or is handing its
	// leadership over. Nothing was appended; retry later.
	ErrBusy = errors.New("cluster: too much uncommitted, retry later")
)

// Size limits: DefaultMaxEntryBytes is Config.MaxEntryBytes' default,
// maxEntryBytes its ceiling (an entry must fit a segment of the raft log
// with room to spare, and one append message must fit a transport frame).
const (
	DefaultMaxEntryBytes       = 2 << 20
	maxEntryBytes              = 3 << 20
	DefaultMaxUncommittedBytes = 64 << 20
	DefaultMaxPendingProposals = 4096
	raftSegmentSize            = 4 << 20
)

// StateMachine is what a replica group applies committed entries to. It
// is called from one goroutine at a time: Applied once at open (on the
// caller of OpenGroup), then, on the group's apply worker, Apply for
// every committed index in order, with no gap and no repeat, Snapshot
// and Restore.
type StateMachine interface {
	// Applied returns the index of the last entry whose effect the state
	// machine holds durably (0: it holds nothing, as an in-memory one
	// after a restart). At open the replica restores the latest raft
	// snapshot only when Applied is below it, then applies every entry
	// after max(Applied, snapshot index), never one at or below it. The
	// state machine must never report an index it has not applied.
	Applied() uint64
	// Apply applies the committed entry at index: data is the proposal's,
	// or empty for an entry without one (a new leader's empty entry, a
	// conf change), which only moves the applied index. A durable state
	// machine need not make each Apply durable at once; what it loses in
	// a crash it gets again after the index Applied then reports.
	Apply(index uint64, data []byte) error
	// Snapshot returns the state as of the last applied index.
	Snapshot() ([]byte, error)
	// Restore replaces the state with a snapshot taken at index, which is
	// past the last applied index (the state never goes back). It may
	// block (a state machine fetching its data from a peer: Group.Fetch);
	// nothing after the snapshot is applied until it returns, and an
	// error stops the group.
	Restore(index uint64, data []byte) error
}

// Transport carries raft messages between the replicas of a group. Send
// must not block the group: it queues or drops (raft retries lost
// messages). It must not keep msgs' slice, only the messages.
// ReportsSnapshots says whether the transport reports the outcome of
// each MsgSnap itself, through Group.ReportSnapshot once it is sent or
// failed (a snapshot may take a while); if not, the replica reports it
// sent as soon as Send returns.
type Transport interface {
	Send(msgs []*pb.Message)
	ReportsSnapshots() bool
}

// Config describes one replica of a group. Every replica of a group is
// created with the same Peers.
type Config struct {
	// ID is this replica's raft id, non-zero and unique in the group.
	ID uint64
	// Peers lists every replica's id, ID included (used once, to
	// bootstrap an empty directory).
	Peers []uint64
	// Dir is the replica's directory (its Storage).
	Dir string
	// FS is passed to the raft log (nil: the operating system's).
	FS seglog.FS
	// ElectionTicks and HeartbeatTicks are raft's timeouts in ticks
	// (defaults 10 and 1).
	ElectionTicks, HeartbeatTicks int
	// MaxEntryBytes bounds a proposal's data (default
	// DefaultMaxEntryBytes, at most 3 MiB); a larger one fails with
	// ErrTooLarge rather than jam the group's replication.
	MaxEntryBytes int
	// MaxUncommittedBytes bounds the entries a leader holds not yet
	// committed (default DefaultMaxUncommittedBytes); past it proposals
	// fail with ErrBusy.
	MaxUncommittedBytes uint64
	// ForwardProposals lets a follower propose: raft hands the entry to
	// the leader, and the proposal completes once the entry is applied
	// here as on the leader (the metadata group's, whose changes come
	// from any node). A forwarded entry the network loses completes only
	// when the leader or term next changes (ErrLeaderChanged), so a
	// caller bounds its wait with its ctx. Off by default: a partition's
	// proposals come from the serving leader only.
	ForwardProposals bool
	// MaxPendingProposals bounds the ProposeAsync proposals queued or in
	// flight (default DefaultMaxPendingProposals); past it ProposeAsync
	// fails with ErrBusy.
	MaxPendingProposals int
	// SnapshotEvery, when non-zero, snapshots the state machine and
	// compacts the log every that many applied entries.
	SnapshotEvery uint64
	// CompactBehindMatch keeps raft log compaction conservative: a
	// leader snapshots (and drops raft log entries) only up to the
	// lowest index the log of every replica it still reaches is known
	// to match, so that a lagging replica catches up from the log
	// rather than by a snapshot (for a state machine whose snapshot is a
	// descriptor of data restored by a costly fetch, as package
	// replog's). A replica behind the log's first index holds nothing
	// back. A follower, which does not know the others' progress,
	// compacts as SnapshotEvery says.
	CompactBehindMatch bool
	// OnLeader, if set, is called on the group's goroutine when the known
	// leader or the term changes (lead 0: unknown). It must not block.
	OnLeader func(lead, term uint64)
	// Fetch, if set, opens a stream from the replica to of this group:
	// what its state machine's server (Group.ServeFetch) answers to req.
	// A Node sets it to its cluster link (package transport). It is for
	// a state machine whose snapshots name data they do not carry
	// (package replog's), which fetches it through Group.Fetch.
	Fetch func(ctx context.Context, to uint64, req []byte) (io.ReadCloser, error)

	// ackOnLocalAppend is a test hook that breaks the contract: proposals
	// succeed once appended and fsynced here, before a quorum holds them.
	// The checker's own test uses it to show it catches such a build.
	ackOnLocalAppend bool
	// Join says the replica joins a group that already exists: an empty
	// directory is not bootstrapped with Peers, and the replica waits for
	// the leader to send it the group's state (it must have been added by
	// a conf change first).
	Join bool

	// manualElections is a test hook for replayable runs: raft draws its
	// election timeouts from crypto/rand, so the deterministic tests turn
	// timeouts (and CheckQuorum and PreVote, which rely on them) off and
	// call Campaign themselves when their seed says.
	manualElections bool
}

// Proposal is the pending result of a proposal. Done is closed once Err
// and Index are set: Err nil means the entry was committed on a quorum
// (fsynced there) and applied here at Index.
type Proposal struct {
	Done  chan struct{}
	Index uint64
	Err   error
	// cb, when set (ProposeAsync), is called on the group's loop with
	// Index and Err instead of Done being closed (Done is nil then).
	cb func(index uint64, err error)
}

func (p *Proposal) finish(index uint64, err error) {
	p.Index, p.Err = index, err
	if p.cb != nil {
		p.cb(index, err)
		return
	}
	close(p.Done)
}

// envelope is the header each proposal carries: the proposing replica's
// nonce (fresh at each open, so an entry of an earlier life never
// completes a new proposal) and the proposal's number.
const envelope = 16

// replica is one raft replica as a step machine: the caller (Group's
// loop, or a deterministic test) calls tick, step, propose, process and
// the completions of local jobs (appendDone, applyDone), never
// concurrently; the jobs themselves (persist, ap.run) run on the append
// and apply workers (apply.go), one job at a time each.
type replica struct {
	cfg     Config
	st      *Storage
	rn      *raft.RawNode
	tr      Transport
	cs      *pb.ConfState
	nonce   uint64
	next    uint64
	pending map[uint64]*Proposal
	lead    uint64
	term    uint64
	applied uint64 // the index the apply worker last reported applied
	// confCheck lists the conf changes proposed since the last Ready, to
	// be looked for in the next: raft replaces one it refuses by an empty
	// entry.
	confCheck []uint64
	reads     map[uint64]*Proposal // read index requests raft has not answered
	readWait  []readWait           // answered reads waiting for their index to apply
	role      raft.StateType
	campaigns uint64 // elections started: into pre-candidate, or candidate from follower

	// Local work (apply.go): jobs routed and not yet handed to a worker,
	// and the count of jobs routed and not yet done (at most
	// maxLocalJobs, give or take one Ready's two).
	appendq []*pb.Message
	applyq  []*applyJob
	jobs    int
	// flushing: a flush job (apply.go: queueFlush) is queued.
	flushing bool
	// savedHS is the hard state the append worker last saved (its own).
	savedHS *pb.HardState
	// ap is the apply worker's state (its own).
	ap *applier
}

func newReplica(cfg Config, sm StateMachine, tr Transport) (*replica, error) {
	if cfg.ID == 0 || len(cfg.Peers) == 0 {
		return nil, fmt.Errorf("cluster: replica needs an ID and peers")
	}
	if cfg.ElectionTicks == 0 {
		cfg.ElectionTicks = 10
	}
	if cfg.HeartbeatTicks == 0 {
		cfg.HeartbeatTicks = 1
	}
	if cfg.MaxEntryBytes == 0 {
		cfg.MaxEntryBytes = DefaultMaxEntryBytes
	}
	if cfg.MaxEntryBytes < 0 || cfg.MaxEntryBytes > maxEntryBytes {
		return nil, fmt.Errorf("cluster: MaxEntryBytes %d outside 1..%d", cfg.MaxEntryBytes, maxEntryBytes)
	}
	if cfg.MaxUncommittedBytes == 0 {
		cfg.MaxUncommittedBytes = DefaultMaxUncommittedBytes
	}
	st, err := OpenStorage(cfg.Dir, cfg.FS)
	if err != nil {
		return nil, err
	}
	if last, _ := st.LastIndex(); last == 0 && !cfg.Join {
		if err := st.Bootstrap(cfg.Peers); err != nil {
			st.Close()
			return nil, err
		}
	}
	snap, _ := st.Snapshot()
	_, cs, _ := st.InitialState()
	snapIdx := snap.GetMetadata().GetIndex()
	applied, restore, err := resume(st, sm, snap)
	if err != nil {
		st.Close()
		return nil, err
	}
	rc := &raft.Config{
		ID: cfg.ID, ElectionTick: cfg.ElectionTicks, HeartbeatTick: cfg.HeartbeatTicks,
		Storage: st, Applied: snapIdx, MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 256, MaxUncommittedEntriesSize: cfg.MaxUncommittedBytes,
		CheckQuorum: true, PreVote: true, DisableProposalForwarding: !cfg.ForwardProposals, StepDownOnRemoval: true, AsyncStorageWrites: true,
		Logger: quietLogger{},
	}
	if cfg.manualElections {
		rc.ElectionTick, rc.CheckQuorum, rc.PreVote = 1<<30, false, false
	}
	rn, err := raft.NewRawNode(rc)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("cluster: start raft node %d: %w", cfg.ID, err)
	}
	hs, _, _ := st.InitialState()
	var compactTo, acked atomic.Uint64
	compactTo.Store(math.MaxUint64)
	acked.Store(snapIdx)
	r := &replica{cfg: cfg, st: st, rn: rn, tr: tr, cs: cs, nonce: rand.Uint64(), savedHS: hs,
		pending: map[uint64]*Proposal{}, reads: map[uint64]*Proposal{}, applied: snapIdx,
		ap: &applier{st: st, sm: sm, every: cfg.SnapshotEvery, applied: snapIdx, snapIndex: snapIdx, skipTo: applied, compactTo: &compactTo, acked: &acked}}
	if restore {
		// The snapshot is restored by the apply worker, as its first job:
		// a state machine that fetches its data from a peer (package
		// replog's) must not hold up the open. Until it is done, nothing
		// counts as applied here (a read waits for it).
		r.applied = 0
		r.applyq = append(r.applyq, &applyJob{snap: snap})
		r.jobs++
	}
	return r, nil
}

// resume returns the index the state machine resumes applying after: its
// durable applied index when it is at or past the snapshot, else the
// snapshot's, with restore set: the caller queues the snapshot's restore
// before any entry. Raft still replays every committed entry
// after the snapshot, so that the conf changes among them rebuild its
// configuration; applySM skips the rest up to this index. Every entry up
// to the state machine's index was committed before it was applied, but
// the hard state recording that commit may not have been fsynced (raft
// does not ask for a sync when only the commit index moves), so the
// storage's commit index is raised to it; an index past the log's last
// means the two directories do not belong together.
func resume(st *Storage, sm StateMachine, snap *pb.Snapshot) (uint64, bool, error) {
	idx := snap.GetMetadata().GetIndex()
	applied := sm.Applied()
	if applied < idx {
		return idx, true, nil
	}
	if last, _ := st.LastIndex(); applied > last {
		return 0, false, fmt.Errorf("%w: %s: state machine applied %d, past the raft log's last index %d", ErrCorrupt, st.dir, applied, last)
	}
	st.commitAtLeast(applied)
	return applied, false, nil
}

func (r *replica) envelope(data []byte) []byte {
	env := make([]byte, envelope, envelope+len(data))
	binary.LittleEndian.PutUint64(env, r.nonce)
	binary.LittleEndian.PutUint64(env[8:], r.next)
	return append(env, data...)
}

// track registers the proposal just handed to raft.
func (r *replica) track() *Proposal {
	p := &Proposal{Done: make(chan struct{})}
	r.pending[r.next] = p
	r.next++
	return p
}

// propose hands data to raft; the proposal completes in a later process.
func (r *replica) propose(data []byte) (*Proposal, error) {
	if len(data) > r.cfg.MaxEntryBytes {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(data), r.cfg.MaxEntryBytes)
	}
	if err := r.rn.Propose(r.envelope(data)); err != nil {
		return nil, r.dropped(err)
	}
	return r.track(), nil
}

// proposeAsync hands raft buf, whose first envelope bytes are room for
// the envelope; the proposal ends by cb in a later process.
func (r *replica) proposeAsync(buf []byte, cb func(uint64, error)) error {
	binary.LittleEndian.PutUint64(buf, r.nonce)
	binary.LittleEndian.PutUint64(buf[8:], r.next)
	if err := r.rn.Propose(buf); err != nil {
		return r.dropped(err)
	}
	r.pending[r.next] = &Proposal{cb: cb}
	r.next++
	return nil
}

// dropped maps raft's refusal of a proposal to the caller's error.
func (r *replica) dropped(err error) error {
	if !errors.Is(err, raft.ErrProposalDropped) {
		return fmt.Errorf("cluster: propose: %w", err)
	}
	if r.rn.BasicStatus().RaftState == raft.StateLeader {
		return ErrBusy
	}
	return ErrNotLeader
}

// proposeConfChange hands a membership change to raft; it completes once
// applied here, or in the next process with ErrConfChangeRefused.
func (r *replica) proposeConfChange(cc *pb.ConfChangeV2) (*Proposal, error) {
	cc = proto.CloneOf(cc)
	cc.Context = r.envelope(nil)
	if err := r.rn.ProposeConfChange(cc); err != nil {
		return nil, r.dropped(err)
	}
	r.confCheck = append(r.confCheck, r.next)
	return r.track(), nil
}

// oursEnv returns the pending proposal an envelope completes, if any.
func (r *replica) oursEnv(env []byte) (uint64, *Proposal) {
	if len(env) < envelope || binary.LittleEndian.Uint64(env) != r.nonce {
		return 0, nil
	}
	id := binary.LittleEndian.Uint64(env[8:])
	return id, r.pending[id]
}

// ours returns the pending proposal a normal entry completes, if any.
func (r *replica) ours(e *pb.Entry) (uint64, *Proposal) {
	if e.GetType() != pb.EntryType_EntryNormal {
		return 0, nil
	}
	return r.oursEnv(e.Data)
}

// checkConf fails each conf change proposed since the last Ready that
// raft did not append (it appends an empty entry in its place).
func (r *replica) checkConf(rd raft.Ready) {
	if len(r.confCheck) == 0 {
		return
	}
	appended := map[uint64]bool{}
	for _, e := range rd.Entries {
		if e.GetType() == pb.EntryType_EntryConfChangeV2 {
			var cc pb.ConfChangeV2
			if proto.Unmarshal(e.Data, &cc) == nil {
				if id, p := r.oursEnv(cc.Context); p != nil {
					appended[id] = true
				}
			}
		}
	}
	for _, id := range r.confCheck {
		if p := r.pending[id]; p != nil && !appended[id] {
			delete(r.pending, id)
			p.finish(0, ErrConfChangeRefused)
		}
	}
	r.confCheck = r.confCheck[:0]
}

// failPending ends every pending proposal with err.
func (r *replica) failPending(err error) {
	for id, p := range r.pending {
		p.finish(0, err)
		delete(r.pending, id)
	}
	r.failReads(err)
}

// process takes every Ready raft has while fewer than maxLocalJobs
// local jobs are held: it sends the messages to other replicas at once
// and queues the append and apply jobs (appendq, applyq) for the
// workers, whose completions (appendDone, applyDone) feed raft back. An
// error leaves the replica unusable: close it and open it again from its
// directory.
func (r *replica) process() error {
	for r.jobs < maxLocalJobs && r.rn.HasReady() {
		rd := r.rn.Ready()
		r.noteLeader(rd)
		r.checkConf(rd)
		r.noteReads(rd)
		r.finishReads() // a read whose index is applied already
		var out []*pb.Message
		for _, m := range rd.Messages {
			switch m.GetTo() {
			case raft.LocalAppendThread:
				r.appendq = append(r.appendq, m)
				r.jobs++
			case raft.LocalApplyThread:
				if err := r.routeApply(m); err != nil {
					return err
				}
			default:
				out = append(out, m)
			}
		}
		r.send(out)
	}
	return nil
}

// send hands msgs to the transport.
func (r *replica) send(msgs []*pb.Message) {
	if len(msgs) == 0 {
		return
	}
	r.tr.Send(msgs)
	if r.tr.ReportsSnapshots() {
		return
	}
	for _, m := range msgs {
		if m.GetType() == pb.MessageType_MsgSnap {
			// Optimistic: a lost snapshot makes the follower reject the
			// next append, and raft sends it again.
			r.rn.ReportSnapshot(m.GetTo(), raft.SnapshotFinish)
		}
	}
}

// noteLeader fails pending proposals and tells OnLeader when the leader
// or the term changed.
func (r *replica) noteLeader(rd raft.Ready) {
	lead, term := r.lead, r.term
	if rd.SoftState != nil {
		lead = rd.SoftState.Lead
		if s := rd.SoftState.RaftState; s != r.role {
			if s == raft.StatePreCandidate || s == raft.StateCandidate && r.role != raft.StatePreCandidate {
				r.campaigns++
			}
			r.role = s
		}
	}
	if rd.HardState != nil && rd.HardState.GetTerm() != 0 {
		term = rd.HardState.GetTerm()
	}
	if lead == r.lead && term == r.term {
		return
	}
	r.lead, r.term = lead, term
	r.failPending(ErrLeaderChanged)
	if r.cfg.OnLeader != nil {
		r.cfg.OnLeader(lead, term)
	}
}

// noteMatch (loop, each tick) tells the apply worker how far it may
// compact under CompactBehindMatch: on a leader, the lowest match index
// of the replicas the log still reaches; elsewhere no bound. A replica
// already behind the log's first index (one added later, or one behind
// a follower's compaction before it led) needs a snapshot anyway and
// holds nothing back: the leader must go on taking snapshots, or none
// would ever hold a configuration that includes a replica added after
// the last one (raft refuses to restore such a snapshot).
func (r *replica) noteMatch() {
	if !r.cfg.CompactBehindMatch {
		return
	}
	to := uint64(math.MaxUint64)
	if r.rn.BasicStatus().RaftState == raft.StateLeader {
		first, err := r.st.FirstIndex()
		if err != nil {
			first = 0
		}
		r.rn.WithProgress(func(_ uint64, _ raft.ProgressType, pr tracker.Progress) {
			if pr.Match+1 >= first {
				to = min(to, pr.Match)
			}
		})
	}
	r.ap.compactTo.Store(to)
	if r.ap.due.Load() && r.applied <= to && !r.flushing && r.jobs < maxLocalJobs {
		r.flushing = true // the flush job takes the snapshot held back (apply.go)
		r.applyq = append(r.applyq, &applyJob{flush: true})
		r.jobs++
	}
}

// close stops the replica: sync=false drops it as a crash would.
func (r *replica) close(sync bool) error {
	r.failPending(ErrClosed)
	if !sync {
		r.st.Abandon()
		return nil
	}
	return r.st.Close()
}

// quietLogger drops raft's log lines; errors come back as values.
type quietLogger struct{}

func (quietLogger) Debug(...any)              {}
func (quietLogger) Debugf(string, ...any)     {}
func (quietLogger) Info(...any)               {}
func (quietLogger) Infof(string, ...any)      {}
func (quietLogger) Warning(...any)            {}
func (quietLogger) Warningf(string, ...any)   {}
func (quietLogger) Error(...any)              {}
func (quietLogger) Errorf(string, ...any)     {}
func (quietLogger) Fatal(v ...any)            { panic(fmt.Sprint(v...)) }
func (quietLogger) Fatalf(f string, v ...any) { panic(fmt.Sprintf(f, v...)) }
func (quietLogger) Panic(v ...any)            { panic(fmt.Sprint(v...)) }
func (quietLogger) Panicf(f string, v ...any) { panic(fmt.Sprintf(f, v...)) }
