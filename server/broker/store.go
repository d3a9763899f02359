package broker

import (
	"errors"
	"fmt"

	"github.com/fibrilmq/fibril/server/seglog"
)

// defaultOpenStore opens the file-backed segment log.
func defaultOpenStore(dir string, policy seglog.Policy) (seglog.Store, error) {
	return nil, fmt.Errorf("open %s: %w", dir, errors.New("file-backed seglog not available yet; set Options.OpenStore"))
}
