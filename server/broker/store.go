package broker

import (
	"strings"

	"github.com/fibrilmq/fibril/server/seglog"
)

// Names of a partition's two logs inside its directory.
const (
	dataLogName   = "data"
	eventsLogName = "events"
)

// dlqSegmentSize caps the data segments of dead-letter topics: every group
// has one, most stay nearly empty, and segments are preallocated.
const dlqSegmentSize = 4 << 20

// openStore opens one of a partition's logs: through Options.OpenStore when
// set, else as a file-backed seglog sized for what it holds.
func (t *Topic) openStore(dir string, events bool, policy seglog.Policy) (seglog.Store, error) {
	o := &t.b.opts
	if o.OpenStore != nil {
		return o.OpenStore(dir, policy)
	}
	size := t.dataSegmentSize()
	if events {
		size = o.EventSegmentSize
	}
	return seglog.Open(dir, seglog.Options{Policy: policy, SegmentSize: size})
}

func (t *Topic) dataSegmentSize() int64 {
	size := t.b.opts.SegmentSize
	if strings.HasPrefix(string(t.name), "$DLQ.") && size > dlqSegmentSize {
		size = dlqSegmentSize
	}
	return size
}

// maxBody is the largest header+payload a record of this topic can hold.
func (t *Topic) maxBody() int64 { return t.dataSegmentSize() - recordSlack }
