package broker

import (
	"path/filepath"

	"github.com/fibrilmq/fibril/server/seglog"
)

// Names of a partition's two logs inside its directory.
const (
	dataLogName   = "data"
	eventsLogName = "events"
)

// fileStoreOpener returns the default StoreOpener: the file-backed seglog,
// with segSize segments for data and eventSegSize for the event log (events
// are small and truncated after every snapshot, so their segments are too).
func fileStoreOpener(segSize, eventSegSize int64) StoreOpener {
	return func(dir string, policy seglog.Policy) (seglog.Store, error) {
		size := segSize
		if filepath.Base(dir) == eventsLogName {
			size = eventSegSize
		}
		return seglog.Open(dir, seglog.Options{Policy: policy, SegmentSize: size})
	}
}
