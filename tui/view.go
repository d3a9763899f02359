package tui

import (
	"fmt"
	"strings"
	"time"
)

// sparkBlocks are the eight bar heights of a sparkline.
var sparkBlocks = []rune("▁▂▃▄▅▆▇█")

// sparkline draws vals scaled to their maximum, width cells wide (older
// samples fall off the left; missing ones are blank).
func sparkline(vals []float64, width int) string {
	if len(vals) > width {
		vals = vals[len(vals)-width:]
	}
	top := 0.0
	for _, v := range vals {
		top = max(top, v)
	}
	var b strings.Builder
	b.WriteString(strings.Repeat(" ", width-len(vals)))
	for _, v := range vals {
		i := 0
		if top > 0 {
			i = int(v / top * float64(len(sparkBlocks)-1))
		}
		b.WriteRune(sparkBlocks[min(max(i, 0), len(sparkBlocks)-1)])
	}
	return b.String()
}

// View renders the screen. Every number has its label next to it so a
// reader (or a test reading the terminal) need not count columns.
func (m *model) View() string {
	var b strings.Builder
	line := func(format string, args ...any) {
		s := fmt.Sprintf(format, args...)
		if m.width > 0 && len([]rune(s)) > m.width {
			s = string([]rune(s)[:m.width])
		}
		b.WriteString(s)
		b.WriteByte('\n')
	}
	info := m.c.conn.Info()
	name := info.ServerName
	if name == "" {
		name = info.ServerID
	}
	version := info.FibrilVersion // INFO's version is the NATS one stock clients read
	if version == "" {
		version = info.Version
	}
	updated := "never"
	if !m.snap.at.IsZero() {
		updated = m.snap.at.Format(time.TimeOnly)
	}
	line("Fibril %s · %s · server %s · updated %s", version, m.opts.URL, name, updated)
	traffic := "off"
	if m.traffic {
		traffic = "ON"
	}
	line("[p] publish %d  [c] consume+ack %d  [t] traffic (%s)  [↑/↓] select topic  [q] quit", m.opts.Burst, m.opts.Burst, traffic)
	line("c and t consume as group %s, the TUI's own (deleted on quit): other groups' messages are never acked", DemoGroup)
	line("")
	if len(m.snap.topics) == 0 {
		line("  no topics yet: press p to publish %d messages to %q", m.opts.Burst, m.opts.DemoSubject)
	}
	for i, t := range m.snap.topics {
		cursor := "  "
		if i == m.selected {
			cursor = "> "
		}
		ps := m.pubRate[t.name]
		var vals []float64
		rate := 0.0
		if ps != nil {
			vals, rate = ps.vals, ps.last()
		}
		line("%s%-26s published %-9d %8.1f/s  retained %-8d %s", cursor, t.name, t.published, rate, t.retained, sparkline(vals, 24))
		for _, g := range t.groups {
			as := m.ackRate[t.name+"/"+g.name]
			var avals []float64
			arate := 0.0
			if as != nil {
				avals, arate = as.vals, as.last()
			}
			name := g.name
			if g.ordered != "" {
				name += " [ordered by " + g.ordered + "]"
			}
			line("    └ %-20s ready %-8d in flight %-6d acked %-9d dead %-6d %8.1f/s %s",
				name, g.ready, g.inflight, g.acked, g.dead, arate, sparkline(avals, 16))
		}
	}
	line("")
	switch {
	case m.err != nil:
		line("error: %v (retrying)", m.err)
	case m.status != "":
		line("%s", m.status)
	}
	return b.String()
}
