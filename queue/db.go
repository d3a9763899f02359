package queue

import (
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/fibrilmq/fibril/server/broker"
	"github.com/fibrilmq/fibril/server/seglog"
)

// Errors callers test with errors.Is. The engine's sentinels are the same
// values (broker.ErrClosed is ErrClosed), wrapped with context.
var (
	// ErrClosed: the DB is closed or closing.
	ErrClosed = broker.ErrClosed
	// ErrInvalid: a bad name, option or argument.
	ErrInvalid = broker.ErrInvalid
	// ErrFull: the queue holds Config.MaxPending messages (or
	// MaxPendingBytes) and Publish waited Config.BlockTimeout for room.
	ErrFull = broker.ErrTopicFull
	// ErrMismatch: Declare found the queue (or its group) already declared
	// with another configuration.
	ErrMismatch = errors.New("queue: declared with another configuration")
)

// Storage decides where a DB keeps its logs: each partition of a queue has
// two, its messages and its consumer events. The default (Options.Storage
// nil) is the segment log, files under the DB's directory. Memory keeps
// them in memory; boltstore keeps them in a bbolt file. A DB never closes
// its Storage: close it after the DB.
type Storage interface {
	// OpenLog opens, creating it if needed, the log called name (a
	// slash-separated path such as "topics/1/0/data", unique in the DB and
	// stable across opens) with the durability policy the queue asks for.
	// The log must honour seglog.Store's contract; the DB opens a name at
	// most once at a time.
	OpenLog(name string, policy seglog.Policy) (seglog.Store, error)
}

// Memory returns the Storage that keeps every log in memory
// (seglog.MemStore): nothing survives Close or the process, and every
// publish is confirmed as soon as it is stored, whatever the durability.
// Its records stay in memory until every group has settled them.
func Memory() Storage { return memory{} }

type memory struct{}

func (memory) OpenLog(string, seglog.Policy) (seglog.Store, error) { return seglog.NewMemStore(), nil }

// Options configures a DB. The zero value is ready to use; Open never
// changes the caller's value.
type Options struct {
	// Storage keeps the logs; nil means segment log files in the DB's
	// directory (the engine's own).
	Storage Storage
	// Logf receives the engine's background reports (a torn write cut at
	// recovery, a retention error). Default: the standard logger.
	Logf func(format string, args ...any)
	// Engine tunes the engine (segment size, queue size, snapshots, the
	// scrub); its OpenStore and Logf are replaced by Storage and Logf.
	Engine broker.Options
}

// DB is a directory of durable queues, served in-process by Fibril's
// engine. Its methods, and those of its queues, are safe for concurrent
// use.
type DB struct {
	b    *broker.Broker
	dir  string
	temp bool // OpenMemory's directory: removed by Close
	logf func(format string, args ...any)
}

// Open opens the queues kept in dir, creating the directory if needed, and
// recovers them: every confirmed message that was not acked is ready
// again, the in-flight ones included (leases do not survive). It fails
// with an error wrapping ErrInvalid for bad options, and refuses a
// directory whose stored data is damaged (broker.IsDamage reports it; the
// fibril verify and repair commands handle it) rather than serve it
// without the lost messages.
func Open(dir string, opts Options) (*DB, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: empty directory (OpenMemory keeps queues in memory)", ErrInvalid)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open queues %s: %w", dir, err)
	}
	eo := opts.Engine
	eo.OpenStore = nil
	if s := opts.Storage; s != nil {
		eo.OpenStore = func(logDir string, policy seglog.Policy) (seglog.Store, error) {
			name, err := filepath.Rel(abs, logDir)
			if err != nil {
				return nil, fmt.Errorf("log %s outside %s: %w", logDir, abs, err)
			}
			return s.OpenLog(filepath.ToSlash(name), policy)
		}
	}
	eo.Logf = opts.Logf
	if eo.Logf == nil {
		eo.Logf = func(format string, args ...any) { log.Printf("fibril queue: "+format, args...) }
	}
	b, err := broker.Open(abs, eo)
	if err != nil {
		return nil, fmt.Errorf("open queues %s: %w", dir, err)
	}
	return &DB{b: b, dir: abs, logf: eo.Logf}, nil
}

// OpenMemory opens a DB whose queues live in memory (Memory): for tests and
// for work that may be lost with the process. The engine still writes its
// small catalog and consumer-state snapshots as files, into a temporary
// directory that Close removes. opts.Storage must be nil.
func OpenMemory(opts Options) (*DB, error) {
	if opts.Storage != nil {
		return nil, fmt.Errorf("%w: OpenMemory with a Storage (use Open)", ErrInvalid)
	}
	dir, err := os.MkdirTemp("", "fibril-queue-mem-*")
	if err != nil {
		return nil, fmt.Errorf("open memory queues: %w", err)
	}
	opts.Storage = Memory()
	db, err := Open(dir, opts)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	db.temp = true
	return db, nil
}

// Close stops the queues: publishes and settles under way finish (each
// answered), blocked calls return ErrClosed, leases end (their messages are
// ready again at the next Open) and the logs are synced and closed. A
// second Close returns nil.
func (db *DB) Close() error {
	err := db.b.Close()
	if db.temp {
		if rerr := os.RemoveAll(db.dir); err == nil && rerr != nil {
			err = fmt.Errorf("close memory queues: %w", rerr)
		}
		db.temp = false
	}
	return err
}

// Dir returns the DB's directory (absolute).
func (db *DB) Dir() string { return db.dir }

// Engine returns the engine behind the DB, for what the typed API does not
// cover (topics with several subjects, fan-out to many groups, browsing,
// requeueing dead letters). Queues declared through the DB are its topics.
func (db *DB) Engine() *broker.Broker { return db.b }
