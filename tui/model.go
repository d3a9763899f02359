package tui

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/fibrilmq/fibril/protocol"
	fibril "github.com/fibrilmq/fibril/sdk"
)

// historyLen is how many samples a sparkline keeps (one per refresh).
const historyLen = 40

// DemoGroup is the consumer group the c and t keys consume and ack as. It
// is the TUI's own: created on a topic on first use (with no dead-letter
// topic) and deleted when the TUI quits, so a real group's messages are
// never leased or acked by a key press.
const DemoGroup = "fibril-tui-demo"

// groupView is one group as shown: counts from the server plus derived ones.
type groupView struct {
	name     string
	ready    uint64
	inflight uint64
	acked    uint64 // derived, see the package Caveats
	dead     uint64 // dead-lettered by this group (GROUP INFO dead_lettered)
	dlq      string
	ordered  string // the group's ordering (GROUP INFO config.ordered): "", partition or key
}

// topicView is one topic as shown.
type topicView struct {
	name      string
	published uint64 // sum of the partitions' last seqs: only grows
	retained  uint64
	groups    []groupView
}

// snapshot is one refresh: every topic, read one after another.
type snapshot struct {
	at     time.Time
	topics []topicView
}

type (
	tickMsg     time.Time
	snapshotMsg struct {
		snap snapshot
		err  error
	}
	actionMsg struct {
		text string
		err  error
		// held replaces model.held when set (traffic mode).
		held *heldLeases
		// created names a topic the action created DemoGroup on.
		created string
	}
)

// heldLeases are deliveries traffic mode keeps in flight for one interval
// (acked on the next round) so the in-flight column has something to show.
type heldLeases struct {
	msgs []*fibril.Msg
}

// series is a rate history for a sparkline.
type series struct{ vals []float64 }

func (s *series) push(v float64) {
	s.vals = append(s.vals, v)
	if len(s.vals) > historyLen {
		s.vals = s.vals[len(s.vals)-historyLen:]
	}
}

func (s *series) last() float64 {
	if len(s.vals) == 0 {
		return 0
	}
	return s.vals[len(s.vals)-1]
}

// model is the bubbletea model.
type model struct {
	c        *client
	opts     Options
	snap     snapshot           // the latest
	base     snapshot           // the last one rates were measured against
	pubRate  map[string]*series // topic -> publishes/s
	ackRate  map[string]*series // topic/group -> acks/s
	selected int
	status   string
	err      error
	width    int
	height   int
	busy     bool
	traffic  bool       // t: publish, lease and ack every interval
	held     heldLeases // leased by traffic mode, acked next round
	created  []string   // topics DemoGroup was created on, deleted on quit
}

func newModel(c *client, opts Options) *model {
	return &model{c: c, opts: opts, pubRate: map[string]*series{}, ackRate: map[string]*series{}, width: 100}
}

// Init starts the first refresh.
func (m *model) Init() tea.Cmd { return m.refresh() }

func (m *model) tick() tea.Cmd {
	return tea.Tick(m.opts.Interval, func(t time.Time) tea.Msg { return tickMsg(t) })
}

// refresh reads every topic and group; it runs off the UI goroutine.
func (m *model) refresh() tea.Cmd {
	c := m.c
	return func() tea.Msg {
		snap, err := fetch(c)
		return snapshotMsg{snap: snap, err: err}
	}
}

func fetch(c *client) (snapshot, error) {
	snap := snapshot{at: time.Now()}
	names, err := c.topicList()
	if err != nil {
		return snap, fmt.Errorf("TOPIC LIST: %w", err)
	}
	for _, name := range names {
		in, err := c.topicInfo(name)
		if err != nil {
			var pe *protocol.Error
			if errors.As(err, &pe) {
				continue // deleted between LIST and INFO
			}
			return snap, fmt.Errorf("TOPIC INFO %s: %w", name, err)
		}
		tv := topicView{name: in.Name, retained: in.Msgs}
		for _, p := range in.Partitions {
			tv.published += p.LastSeq
		}
		for _, g := range in.Groups {
			gi, err := c.groupInfo(in.Name, g)
			if err != nil {
				var pe *protocol.Error
				if errors.As(err, &pe) {
					continue
				}
				return snap, fmt.Errorf("GROUP INFO %s %s: %w", in.Name, g, err)
			}
			tv.groups = append(tv.groups, groupView{name: gi.Name, ready: gi.Pending, inflight: gi.Inflight, dead: gi.DeadLettered, dlq: gi.Config.DeadLetter, ordered: string(gi.Config.Ordered)})
		}
		snap.topics = append(snap.topics, tv)
	}
	// Dead-letter topics go last: the working topics are what one watches.
	slices.SortStableFunc(snap.topics, func(a, b topicView) int {
		return cmp.Compare(isDLQ(a.name), isDLQ(b.name))
	})
	for i := range snap.topics {
		t := &snap.topics[i]
		for j := range t.groups {
			g := &t.groups[j]
			if settled := g.ready + g.inflight; settled < t.published {
				g.acked = t.published - settled
			}
			g.acked -= min(g.acked, g.dead)
		}
	}
	return snap, nil
}

// isDLQ reports a dead-letter topic; as an int so it sorts (0 before 1).
func isDLQ(name string) int {
	if strings.HasPrefix(name, protocol.DLQPrefix) {
		return 1
	}
	return 0
}

// Update handles keys, ticks and the results of wire calls.
func (m *model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case tea.KeyMsg:
		return m, m.key(msg.String())
	case tickMsg:
		if m.traffic && !m.busy {
			return m, tea.Batch(m.refresh(), m.action(m.trafficRound(m.held)))
		}
		return m, m.refresh()
	case snapshotMsg:
		m.err = msg.err
		if msg.err == nil {
			m.apply(msg.snap)
		}
		return m, m.tick()
	case actionMsg:
		m.busy = false
		if msg.created != "" {
			m.created = append(m.created, msg.created)
		}
		if msg.held != nil {
			m.held = *msg.held
		}
		if !m.traffic && len(m.held.msgs) > 0 {
			// Traffic was stopped while a round ran: ack what it leased.
			m.status = msg.text
			return m, m.release()
		}
		if msg.err != nil {
			m.status = "error: " + msg.err.Error()
		} else {
			m.status = msg.text
		}
		if m.traffic {
			return m, nil // the next tick refreshes
		}
		return m, m.refresh()
	}
	return m, nil
}

// apply records a snapshot and, once per interval, the rates since the
// previous rate sample.
func (m *model) apply(s snapshot) {
	m.snap = s
	// Rates are measured against the last sample at least ~one interval
	// old: a refresh right after a key press would otherwise divide a burst
	// by a few milliseconds and flatten every sparkline around it.
	if !m.base.at.IsZero() && s.at.Sub(m.base.at) < m.opts.Interval*9/10 {
		m.clampSelection()
		return
	}
	prev := m.base
	m.base = s
	dt := s.at.Sub(prev.at).Seconds()
	old := map[string]topicView{}
	for _, t := range prev.topics {
		old[t.name] = t
	}
	for _, t := range s.topics {
		ot, seen := old[t.name]
		rate := func(now, then uint64) float64 {
			if !seen || dt <= 0 || now < then {
				return 0
			}
			return float64(now-then) / dt
		}
		ps := m.pubRate[t.name]
		if ps == nil {
			ps = &series{}
			m.pubRate[t.name] = ps
		}
		ps.push(rate(t.published, ot.published))
		og := map[string]groupView{}
		for _, g := range ot.groups {
			og[g.name] = g
		}
		for _, g := range t.groups {
			key := t.name + "/" + g.name
			gs := m.ackRate[key]
			if gs == nil {
				gs = &series{}
				m.ackRate[key] = gs
			}
			gs.push(rate(g.acked, og[g.name].acked))
		}
	}
	m.clampSelection()
}

func (m *model) clampSelection() {
	if m.selected >= len(m.snap.topics) {
		m.selected = max(len(m.snap.topics)-1, 0)
	}
}

func (m *model) key(k string) tea.Cmd {
	switch k {
	case "q", "ctrl+c", "esc":
		return tea.Quit
	case "up", "k":
		m.selected = max(m.selected-1, 0)
	case "down", "j":
		m.selected = min(m.selected+1, max(len(m.snap.topics)-1, 0))
	case "p":
		c, subject, n := m.c, m.target(), m.opts.Burst
		// With no topic selected, p publishes to the demo subject, whose
		// topic it creates first (the server may not auto-create topics).
		create := subject == m.opts.DemoSubject && !m.hasTopic(subject)
		return m.action(func() actionMsg {
			if create {
				if err := c.topicCreate(subject); err != nil {
					return actionMsg{err: fmt.Errorf("create topic %s: %w", subject, err)}
				}
			}
			return wrap(publish(c, subject, n))
		})
	case "c":
		c, topic, n := m.c, m.target(), m.opts.Burst
		exists := m.hasDemoGroup(topic)
		return m.action(func() actionMsg { return consume(c, topic, exists, n) })
	case "t":
		m.traffic = !m.traffic
		if !m.traffic {
			// A round still running hands its leases over in its actionMsg,
			// and they are released then.
			return m.release()
		}
		m.status = "traffic on: every interval publishes, leases and acks as group " + DemoGroup
	}
	return nil
}

// release acks the deliveries traffic mode holds, unless an action runs
// (then the actionMsg that ends it calls release again).
func (m *model) release() tea.Cmd {
	c, held := m.c, m.held
	return m.action(func() actionMsg {
		err := c.ack(held.msgs)
		return actionMsg{text: fmt.Sprintf("traffic stopped; acked the %d held", len(held.msgs)), err: err, held: &heldLeases{}}
	})
}

func wrap(text string, err error) actionMsg { return actionMsg{text: text, err: err} }

// trafficRound acks what the last round leased, publishes a burst and
// leases four fifths of a burst, which it keeps in flight until the next
// round. It runs off the UI goroutine, so it works on copies.
func (m *model) trafficRound(prev heldLeases) func() actionMsg {
	c, topic, group := m.c, m.target(), DemoGroup
	exists := m.hasDemoGroup(topic)
	burst := m.opts.Burst
	return func() actionMsg {
		if err := c.ack(prev.msgs); err != nil {
			return actionMsg{err: fmt.Errorf("traffic: ack: %w", err), held: &heldLeases{}}
		}
		var created string
		if !exists {
			if err := c.demoGroupCreate(topic); err != nil {
				return actionMsg{err: fmt.Errorf("traffic: create group %s: %w", group, err), held: &heldLeases{}}
			}
			created = topic
		}
		n, err := c.publish(topic, burst, func(i int) []byte { return fmt.Appendf(nil, "fibril tui traffic %d", i) })
		if err != nil {
			return actionMsg{err: fmt.Errorf("traffic: publish: %w", err), held: &heldLeases{}}
		}
		msgs, err := c.poll(topic, group, max(burst*4/5, 1))
		if err != nil {
			return actionMsg{err: fmt.Errorf("traffic: poll: %w", err), held: &heldLeases{}, created: created}
		}
		return actionMsg{
			text:    fmt.Sprintf("traffic on %s/%s: published %d, acked %d, %d in flight", topic, group, n, len(prev.msgs), len(msgs)),
			held:    &heldLeases{msgs: msgs},
			created: created,
		}
	}
}

// removeDemoGroups deletes DemoGroup from the topics the TUI created it on
// (its leases end with it). Called once the program has stopped, so the
// model is no longer shared.
func (m *model) removeDemoGroups() error {
	var errs []error
	for _, topic := range m.created {
		if err := m.c.demoGroupDelete(topic); err != nil {
			errs = append(errs, fmt.Errorf("tui: delete group %s on %s: %w", DemoGroup, topic, err))
		}
	}
	return errors.Join(errs...)
}

// hasTopic reports whether the latest snapshot lists topic.
func (m *model) hasTopic(topic string) bool {
	return slices.ContainsFunc(m.snap.topics, func(t topicView) bool { return t.name == topic })
}

// hasDemoGroup reports whether topic has DemoGroup, as far as the TUI
// knows (the latest snapshot, or its own creations since).
func (m *model) hasDemoGroup(topic string) bool {
	if slices.Contains(m.created, topic) {
		return true
	}
	for _, t := range m.snap.topics {
		if t.name == topic {
			return slices.ContainsFunc(t.groups, func(g groupView) bool { return g.name == DemoGroup })
		}
	}
	return false
}

// action runs one wire action off the UI goroutine, one at a time.
func (m *model) action(f func() actionMsg) tea.Cmd {
	if m.busy {
		return nil
	}
	m.busy = true
	return func() tea.Msg { return f() }
}

// target is the selected topic's name, or the demo subject.
func (m *model) target() string {
	if m.selected < len(m.snap.topics) {
		if name := m.snap.topics[m.selected].name; isDLQ(name) == 0 {
			return name
		}
	}
	return m.opts.DemoSubject
}

// publish and consume run off the UI goroutine: they get what they need
// from the model as arguments and touch only the client.
func publish(c *client, subject string, n int) (string, error) {
	stamp := time.Now().UnixNano()
	stored, err := c.publish(subject, n, func(i int) []byte {
		return fmt.Appendf(nil, "fibril tui test message %d/%d @%d", i+1, n, stamp)
	})
	if err != nil {
		return "", fmt.Errorf("publish to %s: %d of %d stored: %w", subject, stored, n, err)
	}
	return fmt.Sprintf("published %d to %s", stored, subject), nil
}

// consume leases and acks up to n messages of topic as DemoGroup,
// creating it first unless exists.
func consume(c *client, topic string, exists bool, n int) actionMsg {
	var created string
	if !exists {
		if err := c.demoGroupCreate(topic); err != nil {
			return actionMsg{err: fmt.Errorf("create group %s on %s: %w", DemoGroup, topic, err)}
		}
		created = topic
	}
	got, err := c.consume(topic, DemoGroup, n)
	if err != nil {
		return actionMsg{err: fmt.Errorf("consume %s/%s: %w", topic, DemoGroup, err), created: created}
	}
	return actionMsg{text: fmt.Sprintf("consumed and acked %d from %s/%s (the TUI's own group)", got, topic, DemoGroup), created: created}
}
