package server

// Forwarding to a partition held elsewhere (SPEC.md 10.1 replicas, 11.2):
// a topic whose replicas are fewer than the cluster's nodes has, on a
// node that holds no replica of a partition, no raft group for it, so
// this node cannot tell its leader. It guesses among the partition's
// holders (the catalog names them), sends there, and when the holder
// answers not_leader (it is a follower, or an election is under way)
// sends the same command to the next holder, at most once to each: a
// command is tried on at most replicas nodes and never sent to a node
// that holds no replica, so redirection cannot loop (a holder never
// forwards a forwarded command on: forwarding.go). The holder that
// answered is kept as the guess for the next command. An answer that
// does not come (the connection lost, the holder down) is never resent:
// its outcome is unknown, and the client's retry decides; the next
// command starts at the next holder.

import (
	"bytes"
	"encoding/json"
	"slices"
	"sync"
	"time"

	"github.com/fibrilmq/fibril/protocol"
	"github.com/fibrilmq/fibril/server/broker"
	"github.com/fibrilmq/fibril/server/clusternode"
	"github.com/fibrilmq/fibril/server/forward"
)

// maxLeaderGuesses bounds the guesses kept: at the bound the cache is
// emptied (each partition then starts again from its first holder).
const maxLeaderGuesses = 1 << 16

// leaderGuesses maps a raft group held elsewhere to the index, in its
// holders, of the node that last answered for it.
type leaderGuesses struct {
	mu sync.Mutex
	m  map[uint64]int
}

func (g *leaderGuesses) get(gid uint64) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.m[gid]
}

func (g *leaderGuesses) set(gid uint64, i int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.m == nil || len(g.m) >= maxLeaderGuesses {
		g.m = map[uint64]int{}
	}
	g.m[gid] = i
}

// heldElsewhere reports whether partition idx of t has no replica here
// (its commands go to its holders).
func heldElsewhere(t *broker.Topic, idx broker.Partition) bool { return !t.HeldHere(idx) }

// holderTarget is the forwarding target of holder i of partition idx, or
// a not_leader error when that node has not announced its address.
func (s *Server) holderTarget(t *broker.Topic, idx broker.Partition, holders []string, i int) (forward.Target, error) {
	name := holders[i%len(holders)]
	if tm := s.cluster.targets.Load(); tm != nil {
		for _, tg := range *tm {
			if tg.Node == name {
				return tg, nil
			}
		}
	}
	return forward.Target{}, protocol.NewError(protocol.CodeNotLeader,
		"topic "+string(t.Name())+": partition held by "+name+", which has not announced its address yet")
}

// guessHolder is forwardTo for a partition held elsewhere: the holder
// that last answered for it (the first, at first).
func (s *Server) guessHolder(t *broker.Topic, idx broker.Partition) (forward.Target, error) {
	holders := t.Holders(idx)
	gid := clusternode.GroupOf(t.ID(), int(idx))
	return s.holderTarget(t, idx, holders, s.cluster.guesses.get(gid))
}

// sendToPartition sends cmd (on the connection tag) to the node serving
// partition idx of t and hands done its answer. For a partition held
// elsewhere a not_leader answer sends it on to the next holder, each
// holder at most once (the file comment); the last answer is done's.
func (c *client) sendToPartition(t *broker.Topic, idx broker.Partition, tag string, cmd []byte, done forward.Done) {
	s := c.srv
	if !heldElsewhere(t, idx) {
		tg, err := s.forwardTo(t, idx)
		if err != nil {
			done(nil, nil, err)
			return
		}
		s.forwards.Send(tg, c.login.user, tag, cmd, done)
		return
	}
	holders := t.Holders(idx)
	gid := clusternode.GroupOf(t.ID(), int(idx))
	first := s.cluster.guesses.get(gid)
	cmd = slices.Clone(cmd)
	var try func(n int)
	try = func(n int) {
		i := (first + n) % len(holders)
		tg, err := s.holderTarget(t, idx, holders, i)
		if err != nil {
			if n+1 < len(holders) {
				try(n + 1)
				return
			}
			done(nil, nil, err)
			return
		}
		s.forwards.Send(tg, c.login.user, tag, cmd, func(line []byte, msgs []forward.Msg, err error) {
			if err == nil && n+1 < len(holders) && isNotLeader(line) {
				try(n + 1)
				return
			}
			switch {
			case err != nil:
				// Lost or busy: not resent (its outcome is unknown), but
				// the next command tries the next holder (this one may
				// be down).
				s.cluster.guesses.set(gid, i+1)
			case isNotLeader(line):
				s.cluster.guesses.set(gid, i+1)
			default:
				s.cluster.guesses.set(gid, i)
			}
			done(line, msgs, err)
		})
	}
	try(0)
}

// isNotLeader reports whether an answer line is -ERR not_leader.
func isNotLeader(line []byte) bool {
	if len(line) == 0 || line[0] != '-' {
		return false
	}
	pe := protocol.ParseErrText(line[min(len(line), 5):]) // "-ERR "
	return pe != nil && pe.Code == protocol.CodeNotLeader
}

// infoTimeout bounds the wait for a holder's TOPIC INFO.
const infoTimeout = 2 * time.Second

// fillElsewhere completes TOPIC INFO on a node that holds no replica of
// some of the topic's partitions: each such partition's entry (its
// offsets and counts) is the one a holder of it answers, asked once per
// holder node, and the topic's totals are summed again. A holder that
// does not answer within infoTimeout leaves its partitions' entries as
// this node has them (empty). Lane only: it blocks.
func (c *client) fillElsewhere(t *broker.Topic, info *protocol.TopicInfo) {
	if !c.mayForward() {
		return
	}
	ask := map[string][]int{} // holder node -> the partitions it answers for
	for i := range info.Partitions {
		if idx := broker.Partition(i); heldElsewhere(t, idx) {
			tg, err := c.srv.guessHolder(t, idx)
			if err == nil {
				ask[tg.Node] = append(ask[tg.Node], i)
			}
		}
	}
	if len(ask) == 0 {
		return
	}
	type reply struct {
		parts []int
		info  protocol.TopicInfo
		ok    bool
	}
	replies := make(chan reply, len(ask))
	for node, parts := range ask {
		tg, err := c.srv.guessHolder(t, broker.Partition(parts[0]))
		if err != nil || tg.Node != node {
			replies <- reply{}
			continue
		}
		c.srv.forwards.Send(tg, c.login.user, "", protocol.AppendTopicInfo(nil, string(t.Name())), func(line []byte, _ []forward.Msg, err error) {
			r := reply{parts: parts}
			if err == nil && bytes.HasPrefix(line, []byte("+OK ")) {
				r.ok = json.Unmarshal(line[4:], &r.info) == nil
			}
			replies <- r
		})
	}
	timeout := time.NewTimer(infoTimeout)
	defer timeout.Stop()
wait:
	for range ask {
		select {
		case r := <-replies:
			if !r.ok {
				continue
			}
			for _, i := range r.parts {
				if i < len(r.info.Partitions) && r.info.Partitions[i].Partition == uint32(i) {
					info.Partitions[i] = r.info.Partitions[i]
				}
			}
		case <-timeout.C:
			c.log.Debug("TOPIC INFO: a holder did not answer in time", "topic", t.Name())
			break wait
		}
	}
	info.Msgs, info.Bytes = 0, 0
	for _, p := range info.Partitions {
		info.Msgs += p.Msgs
		info.Bytes += p.Bytes
	}
}
