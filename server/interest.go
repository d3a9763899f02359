package server

// Plain interest across a cluster (SPEC.md 11.2): NATS core pub/sub spans
// the nodes, as nats-server's routes do, with this protocol itself. For
// every plain subscription its clients hold (subject and queue group),
// a node subscribes on each other node over a forwarding connection
// marked plain-only (CONNECT fibril_plain, cluster identity): that node's
// own fan-out then delivers its publishes to the subscription like to
// any client's, and this node hands what arrives to its clients'
// subscriptions only (never to another node's: no message loops, no
// duplicates). A queue group spans the nodes the same way: the publishing
// node picks one member, a node's subscription among them, and that node
// picks one of its own. The subscriptions follow the clients' (a
// reconcile every interestEvery, at once on a change) and are made again
// when a connection to a node fails.

import (
	"strconv"
	"sync"
	"time"

	"github.com/fibrilmq/fibril/protocol"
	"github.com/fibrilmq/fibril/server/forward"
)

// interestEvery is how often interest is reconciled with the other nodes
// (a change also reconciles at once).
const interestEvery = 200 * time.Millisecond

// interestTag tags the plain-only connections interest travels on.
const interestTag = "interest"

// ikey is one plain subscription's shape: subject and queue group.
type ikey struct{ subject, queue string }

// interest is a node's plain subscriptions, as counted and as carried to
// each other node. Safe for concurrent use.
type interest struct {
	s     *Server
	mu    sync.Mutex
	refs  map[ikey]int    // client subscriptions of each shape here
	sids  map[ikey]string // the sid each shape has on the other nodes
	next  uint64
	peers map[string]map[ikey]bool // node -> shapes subscribed there
	kick  chan struct{}
	stop  chan struct{}
	once  sync.Once
}

func newInterest(s *Server) *interest {
	in := &interest{s: s, refs: map[ikey]int{}, sids: map[ikey]string{}, peers: map[string]map[ikey]bool{},
		kick: make(chan struct{}, 1), stop: make(chan struct{})}
	return in
}

// start runs the reconcile loop.
func (in *interest) start() { go in.run() }

func (in *interest) close() { in.once.Do(func() { close(in.stop) }) }

// carried reports whether sub's shape goes to the other nodes: a
// client's plain subscription, not another node's.
func carried(sub *subscription) bool { return sub.durable == nil && !sub.c.login.plainOnly }

// add counts a client's plain subscription.
func (in *interest) add(sub *subscription) {
	if !carried(sub) {
		return
	}
	k := ikey{sub.subject, sub.queue}
	in.mu.Lock()
	in.refs[k]++
	if in.sids[k] == "" {
		in.next++
		in.sids[k] = "i" + strconv.FormatUint(in.next, 10)
	}
	first := in.refs[k] == 1
	in.mu.Unlock()
	if first {
		in.poke()
	}
}

// remove uncounts one.
func (in *interest) remove(sub *subscription) {
	if !carried(sub) {
		return
	}
	k := ikey{sub.subject, sub.queue}
	in.mu.Lock()
	in.refs[k]--
	last := in.refs[k] <= 0
	if last {
		delete(in.refs, k)
	}
	in.mu.Unlock()
	if last {
		in.poke()
	}
}

func (in *interest) poke() {
	select {
	case in.kick <- struct{}{}:
	default:
	}
}

func (in *interest) run() {
	tick := time.NewTicker(interestEvery)
	defer tick.Stop()
	for {
		in.reconcile()
		select {
		case <-in.stop:
			return
		case <-in.kick:
		case <-tick.C:
		}
	}
}

// reconcile subscribes each other node to the shapes counted here and
// unsubscribes the shapes no longer counted.
func (in *interest) reconcile() {
	cs := in.s.cluster
	tm := cs.targets.Load()
	if tm == nil {
		return
	}
	self := cs.node.Raft().ID()
	for id, tg := range *tm {
		if id == self {
			continue
		}
		in.reconcileWith(tg)
	}
}

func (in *interest) reconcileWith(tg forward.Target) {
	type change struct {
		k   ikey
		sid string
	}
	var add, drop []change
	in.mu.Lock()
	have := in.peers[tg.Node]
	if have == nil || !in.s.forwards.Has(tg, "", interestTag, true) {
		have = map[ikey]bool{} // a new (or failed) connection holds nothing
		in.peers[tg.Node] = have
	}
	for k := range in.refs {
		if !have[k] {
			have[k] = true
			add = append(add, change{k, in.sids[k]})
		}
	}
	for k := range have {
		if in.refs[k] == 0 {
			delete(have, k)
			drop = append(drop, change{k, in.sids[k]})
		}
	}
	in.mu.Unlock()
	node := tg.Node
	failed := func(line []byte, _ []forward.Msg, err error) {
		if err == nil && len(line) > 0 && line[0] == '+' {
			return
		}
		in.mu.Lock()
		delete(in.peers, node) // subscribe everything again next time
		in.mu.Unlock()
	}
	for _, c := range add {
		cmd := protocol.AppendSub(nil, c.k.subject, c.k.queue, c.sid, 0)
		in.s.forwards.SubscribePlain(tg, "", interestTag, cmd, in.deliver, failed)
	}
	for _, c := range drop {
		in.s.forwards.SendPlain(tg, "", interestTag, protocol.AppendUnsub(nil, c.sid, 0), failed)
	}
}

// deliver hands a message another node published to this node's client
// subscriptions (never to another node's: carried).
func (in *interest) deliver(m forward.Msg) {
	pm := pubMsg{subject: m.Subject, reply: m.Reply, hdrLen: len(m.Header), body: append(append([]byte(nil), m.Header...), m.Data...)}
	r := in.s.subs.matchResult(pm.subject)
	var buf []byte
	send := func(s *subscription) bool {
		if !carried(s) {
			return false
		}
		to := s.c
		if limit := s.max.Load(); limit > 0 {
			n := s.delivered.Add(1)
			if n > limit {
				return false
			}
			if n == limit {
				defer to.removeSub(s)
			}
		}
		buf = appendMsg(buf[:0], &pm, s.sid, to.modes.crcOut.Load(), to.modes.headersOut.Load() || pm.hdrLen == 0)
		if !to.queueDelivery(buf) {
			return false
		}
		to.countOutMsgs(1)
		return true
	}
	for _, s := range r.plain {
		send(s)
	}
	for _, members := range r.queues {
		deliverOne(members, send)
	}
}
