package cluster

import (
	"context"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// Group is one replica of a raft group, driven by three goroutines: the
// loop owns the raft.RawNode and the proposals (it ticks, steps received
// messages, takes proposals, sends, and feeds the workers' completions
// back to raft in order); the append worker writes and fsyncs the raft
// Storage; the apply worker owns the StateMachine (apply.go). A slow
// fsync so delays only what waits for it, never heartbeats. Methods are
// safe for concurrent use.
type Group struct {
	r        *replica
	propc    chan propReq
	async    asyncQueue // ProposeAsync's proposals (propose_async.go)
	recvc    chan *pb.Message
	statc    chan chan Status
	unrc     chan uint64 // peers reported unreachable
	xferc    chan uint64 // leadership transfers asked for
	stopc    chan struct{}
	donec    chan struct{}
	lead     atomic.Uint64
	drops    atomic.Uint64 // messages Step dropped for a full inbox
	tick     time.Duration
	once     sync.Once
	closeErr error      // the storage's close, set once inside once
	mu       sync.Mutex // guards err, leadCh, snaps and server
	err      error
	leadCh   chan struct{} // closed (and replaced) when the known leader changes
	// snaps holds the snapshot outcomes reported and not yet handed to
	// raft, the latest per replica (so it is bounded by the group's
	// size and a report is never lost); snapc (capacity 1) wakes the loop.
	snaps  map[uint64]bool
	snapc  chan struct{}
	onLead func(lead, term uint64)
	fetch  func(ctx context.Context, to uint64, req []byte) (io.ReadCloser, error)
	server FetchServer // under mu (fetch.go)
	// The local workers (apply.go): each gets its jobs in order on a
	// channel and hands each back done on another. Every channel holds
	// maxLocalJobs+2, more than the jobs a replica holds (process stops
	// at maxLocalJobs, one Ready adds at most two), so no send on them
	// blocks.
	appendc  chan *pb.Message
	appended chan appendResult
	applyc   chan *applyJob
	appliedc chan *applyJob
	workers  sync.WaitGroup
}

type appendResult struct {
	m   *pb.Message
	err error
}

type propReq struct {
	data  []byte
	cc    *pb.ConfChangeV2 // a membership change instead of data
	read  bool             // a read index request instead of data
	reply chan propReply
}

type propReply struct {
	p   *Proposal
	err error
}

// OpenGroup opens the replica cfg describes (bootstrapping an empty
// directory with cfg.Peers unless cfg.Join), resumes sm after its
// applied index or restores the latest snapshot into it, and starts its
// goroutine, ticking every tick (raft's timeouts are counted in
// ticks). It fails if the storage cannot be opened.
func OpenGroup(cfg Config, sm StateMachine, tr Transport, tick time.Duration) (*Group, error) {
	g := &Group{propc: make(chan propReq), async: newAsyncQueue(cfg.MaxPendingProposals), recvc: make(chan *pb.Message, 1024), statc: make(chan chan Status), unrc: make(chan uint64, 64),
		xferc: make(chan uint64), leadCh: make(chan struct{}), snaps: map[uint64]bool{}, snapc: make(chan struct{}, 1), stopc: make(chan struct{}), donec: make(chan struct{}), tick: tick, onLead: cfg.OnLeader, fetch: cfg.Fetch,
		appendc: make(chan *pb.Message, maxLocalJobs+2), appended: make(chan appendResult, maxLocalJobs+2),
		applyc: make(chan *applyJob, maxLocalJobs+2), appliedc: make(chan *applyJob, maxLocalJobs+2)}
	cfg.OnLeader = func(lead, term uint64) {
		g.lead.Store(lead)
		g.mu.Lock()
		close(g.leadCh)
		g.leadCh = make(chan struct{})
		g.mu.Unlock()
		if g.onLead != nil {
			g.onLead(lead, term)
		}
	}
	r, err := newReplica(cfg, sm, tr)
	if err != nil {
		return nil, err
	}
	g.r = r
	g.workers.Add(2)
	go g.appendWorker()
	go g.applyWorker()
	go g.run()
	return g, nil
}

// Leader returns the leader's id as this replica last knew it (0: none).
func (g *Group) Leader() uint64 { return g.lead.Load() }

// Step hands a message received from the transport to the group. It
// never blocks: when the inbox is full the message is dropped (raft
// retries).
func (g *Group) Step(m *pb.Message) {
	select {
	case g.recvc <- m:
	default:
		g.drops.Add(1)
	}
}

// TransferLeadership asks the leader to hand its leadership to the
// replica to (raft brings it up to date, then has it campaign at once)
// and blocks until this replica knows to as the leader. It returns
// ErrClosed if the group stops first, or ctx's error: raft gives up a
// transfer that takes longer than an election timeout, and the leader
// then stays.
func (g *Group) TransferLeadership(ctx context.Context, to uint64) error {
	asked := false
	for {
		g.mu.Lock()
		changed := g.leadCh
		g.mu.Unlock()
		if g.Leader() == to {
			return nil
		}
		if !asked {
			select {
			case g.xferc <- to:
				asked = true
			case <-g.donec:
				return ErrClosed
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		select {
		case <-changed:
		case <-g.donec:
			return ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ReadIndex blocks until this replica has applied every entry committed
// before the call (raft's ReadIndex: the leader confirms with a quorum
// that it still leads), and returns the index it waited for: a read of
// the state machine after it is linearizable. It works on a follower too
// (raft asks the leader). It fails with ErrLeaderChanged or ErrClosed,
// or ctx's error, which is all a replica cut off from the leader or the
// quorum gets.
func (g *Group) ReadIndex(ctx context.Context) (uint64, error) {
	return g.propose(ctx, propReq{read: true, reply: make(chan propReply, 1)})
}

// ReportUnreachable tells raft that the replica id could not be reached,
// so that the leader stops streaming appends to it and probes instead.
// It never blocks: a report that finds the queue full is dropped (the
// next failure reports again).
func (g *Group) ReportUnreachable(id uint64) {
	select {
	case g.unrc <- id:
	default:
	}
}

// ReportSnapshot tells raft how sending a snapshot to the replica id
// ended (ok: sent; else failed, and raft probes it and sends another
// later). The group's Transport calls it when ReportsSnapshots says so.
// It never blocks and is never lost: the latest report per replica waits
// for the group's loop.
func (g *Group) ReportSnapshot(id uint64, ok bool) {
	g.mu.Lock()
	g.snaps[id] = ok
	g.mu.Unlock()
	select {
	case g.snapc <- struct{}{}:
	default:
	}
}

// Propose proposes data and blocks until it is committed on a quorum
// (fsynced there) and applied here, returning its index; or until ctx
// ends. It returns at once, nothing appended, ErrNotLeader on a
// follower, ErrTooLarge for data over Config.MaxEntryBytes and ErrBusy
// past Config.MaxUncommittedBytes; ErrLeaderChanged or ErrClosed
// (outcome unknown) when the leader changed or the group stopped first,
// and ctx's error (outcome unknown) on a timeout. data is copied.
func (g *Group) Propose(ctx context.Context, data []byte) (uint64, error) {
	return g.propose(ctx, propReq{data: data, reply: make(chan propReply, 1)})
}

// ProposeConfChange proposes a membership change (a replica joining with
// Config.Join must be added first, then started) and blocks until it is
// committed and applied here, returning its index. It fails as Propose
// does, and with ErrConfChangeRefused (nothing appended, retry later)
// while another change is not applied yet.
func (g *Group) ProposeConfChange(ctx context.Context, cc *pb.ConfChangeV2) (uint64, error) {
	return g.propose(ctx, propReq{cc: cc, reply: make(chan propReply, 1)})
}

func (g *Group) propose(ctx context.Context, req propReq) (uint64, error) {
	select {
	case g.propc <- req:
	case <-g.donec:
		return 0, ErrClosed
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	rep := <-req.reply
	if rep.err != nil {
		return 0, rep.err
	}
	select {
	case <-rep.p.Done:
		return rep.p.Index, rep.p.Err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// Status is a replica's view of its group, for metrics and dashboards.
type Status struct {
	// ID is this replica's; Leader the leader's (0: unknown); Role is
	// "leader", "follower", "candidate" or "pre-candidate".
	ID, Leader uint64
	Role       string
	// Term, Commit and Applied are raft's term, commit index and the
	// index applied here; Last is the last index in this replica's log.
	Term, Commit, Applied, Last uint64
	// Campaigns counts the elections this replica started since it
	// opened; Dropped the received messages dropped for a full inbox.
	Campaigns, Dropped uint64
	// Progress maps each replica to the leader's way of sending to it:
	// "probe", "replicate" or "snapshot"; only the leader has it.
	Progress map[uint64]string
	// Match maps each replica to the index its log is known to match
	// the leader's (the leader's own included); only the leader has it.
	// A follower's lag is the leader's Last minus its match.
	Match map[uint64]uint64
	// Voters lists the voting replicas of the configuration this
	// replica knows, itself included.
	Voters []uint64
}

var roleNames = map[raft.StateType]string{raft.StateFollower: "follower", raft.StateCandidate: "candidate",
	raft.StateLeader: "leader", raft.StatePreCandidate: "pre-candidate"}

// Status returns the replica's status, asked of its goroutine (so it
// waits for the goroutine's current step); ErrClosed once the group
// stopped, or ctx's error.
func (g *Group) Status(ctx context.Context) (Status, error) {
	reply := make(chan Status, 1)
	select {
	case g.statc <- reply:
		return <-reply, nil
	case <-g.donec:
		return Status{}, ErrClosed
	case <-ctx.Done():
		return Status{}, ctx.Err()
	}
}

func (g *Group) status() Status {
	st := g.r.rn.Status()
	last, _ := g.r.st.LastIndex()
	s := Status{ID: st.ID, Leader: st.Lead, Role: roleNames[st.RaftState], Term: st.HardState.GetTerm(), Commit: st.HardState.GetCommit(),
		Applied: g.r.applied, Last: last, Campaigns: g.r.campaigns, Dropped: g.drops.Load()}
	for id := range st.Config.Voters.IDs() {
		s.Voters = append(s.Voters, id)
	}
	slices.Sort(s.Voters)
	if len(st.Progress) > 0 {
		s.Match = make(map[uint64]uint64, len(st.Progress))
		s.Progress = make(map[uint64]string, len(st.Progress))
		for id, pr := range st.Progress {
			s.Match[id] = pr.Match
			s.Progress[id] = strings.ToLower(strings.TrimPrefix(pr.State.String(), "State"))
		}
	}
	return s
}

// Err returns the error that stopped the group, if any.
func (g *Group) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// Close stops the goroutine and closes the storage (synced). Pending
// proposals end with ErrClosed.
// Concurrent and repeated calls are safe: the storage is closed once,
// and every call returns that outcome.
func (g *Group) Close() error {
	g.once.Do(func() {
		close(g.stopc)
		<-g.donec
		g.workers.Wait()
		g.closeErr = g.r.close(true)
	})
	if g.closeErr != nil {
		return g.closeErr
	}
	return g.Err()
}

// batchMax bounds the proposals and messages the loop takes in before it
// processes a Ready, so that one fsync covers many while a Ready stays
// small.
const batchMax = 256

func (g *Group) run() {
	defer g.async.drain() // after donec: no ProposeAsync queues behind the drain
	defer close(g.donec)
	t := time.NewTicker(g.tick)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			g.r.rn.Tick()
			g.r.noteMatch()
		case m := <-g.recvc:
			_ = g.r.rn.Step(m) // a stale or foreign message is raft's to ignore
		case req := <-g.propc:
			g.handle(req)
		case req := <-g.async.c:
			g.handleAsync(req)
		case reply := <-g.statc:
			reply <- g.status()
		case id := <-g.unrc:
			g.r.rn.ReportUnreachable(id)
		case to := <-g.xferc:
			g.r.rn.TransferLeader(to)
		case <-g.snapc:
			g.mu.Lock()
			snaps := g.snaps
			g.snaps = map[uint64]bool{}
			g.mu.Unlock()
			for id, ok := range snaps {
				st := raft.SnapshotFinish
				if !ok {
					st = raft.SnapshotFailure
				}
				g.r.rn.ReportSnapshot(id, st)
			}
		case res := <-g.appended:
			if err := g.r.appendDone(res.m, res.err); err != nil {
				g.fail(err)
				return
			}
		case j := <-g.appliedc:
			if err := g.r.applyDone(j); err != nil {
				g.fail(err)
				return
			}
		case <-g.stopc:
			return
		}
		// Take in what else is waiting, up to batchMax, so that one Ready
		// (one fsync) covers it all.
	drain:
		for i := 0; i < batchMax; i++ {
			select {
			case m := <-g.recvc:
				_ = g.r.rn.Step(m)
			case req := <-g.propc:
				g.handle(req)
			case req := <-g.async.c:
				g.handleAsync(req)
			default:
				break drain
			}
		}
		if err := g.r.process(); err != nil {
			g.fail(err)
			return
		}
		g.dispatch()
	}
}

// fail records the error that stops the group.
func (g *Group) fail(err error) {
	g.mu.Lock()
	g.err = err
	g.mu.Unlock()
	g.r.failPending(ErrClosed)
}

// dispatch hands the jobs process queued to the workers (never blocks:
// see appendc).
func (g *Group) dispatch() {
	for _, m := range g.r.appendq {
		g.appendc <- m
	}
	clear(g.r.appendq)
	g.r.appendq = g.r.appendq[:0]
	for _, j := range g.r.applyq {
		g.applyc <- j
	}
	clear(g.r.applyq)
	g.r.applyq = g.r.applyq[:0]
}

// appendWorker persists append jobs in order, every one waiting in one
// batch with one fsync, until the loop ends. After a failed batch it
// takes no other: the loop stops at its error.
func (g *Group) appendWorker() {
	defer g.workers.Done()
	for {
		select {
		case m := <-g.appendc:
			batch := []*pb.Message{m}
		more:
			for len(batch) < maxLocalJobs {
				select {
				case m := <-g.appendc:
					batch = append(batch, m)
				default:
					break more
				}
			}
			err := g.r.persist(batch)
			for _, m := range batch {
				g.appended <- appendResult{m, err}
			}
			if err != nil {
				return
			}
		case <-g.donec:
			return
		}
	}
}

// applyWorker applies apply jobs in order until the loop ends, stopping
// after a failed one.
func (g *Group) applyWorker() {
	defer g.workers.Done()
	for {
		select {
		case j := <-g.applyc:
			j.err = g.r.ap.run(j)
			g.appliedc <- j
			if j.err != nil {
				return
			}
		case <-g.donec:
			return
		}
	}
}

func (g *Group) handle(req propReq) {
	var p *Proposal
	var err error
	switch {
	case req.read:
		p = g.r.readIndex()
	case req.cc != nil:
		p, err = g.r.proposeConfChange(req.cc)
	default:
		p, err = g.r.propose(req.data)
	}
	req.reply <- propReply{p, err}
}
