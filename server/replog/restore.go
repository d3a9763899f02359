package replog

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/fibrilmq/fibril/server/seglog"
)

// Restores from a peer: a raft snapshot is a descriptor (the applied
// mark), so a replica handed one past its local logs fetches the logs
// and the state files from another replica that applied at least as far
// (serve.go), through the group (cluster.Group.Fetch: the cluster link),
// as one stream, and builds them as generation g+1 of its local logs in
// dir/logs.<g+1> (applied.go): every record checked against its CRC and
// appended at its seq, the stream's checksum checked at its end, the
// logs fsynced, the state files staged in dir/logs.<g+1>/state. Only
// then does the mark that names generation g+1 replace the old one
// (temp -> fsync -> rename -> directory fsync): that rename is the
// switch. Until it, the old logs are untouched and the mark names them;
// a crash or a failed attempt leaves a directory Open removes. After it,
// the staged state files are moved into dir and the old generation is
// removed, steps Open finishes if a crash cut them short (settleGen).
//
// etcd sends its database beside the raft snapshot message, before raft
// sees the message; here the data is pulled after raft stored the
// descriptor (the entries after it keep arriving and are fsynced into
// the raft log meanwhile): raft's log stays the only source of order, a
// failed transfer is retried without raft, and a crash resumes it at
// open, from the snapshot raft stored.
//
// An attempt asks the leader first, then the other voters; a failed
// one is logged and retried after a backoff until it succeeds or the
// pair closes (the apply worker waits meanwhile: nothing after the
// snapshot is applied before it). One attempt is bounded by
// Config.RestoreTimeout, one restore runs per pair at a time (the apply
// worker's), and memory by a batch of records.

// genPrefix names the directories of local logs after generation 0.
const genPrefix = "logs."

// restoreBackoff bounds the wait between two rounds of attempts.
const (
	minRestoreBackoff = 50 * time.Millisecond
	maxRestoreBackoff = 5 * time.Second
)

// logDir is the directory of the log name ("data", "events") of
// generation gen in dir.
func logDir(dir string, gen uint64, name string) string {
	if gen == 0 {
		return filepath.Join(dir, name)
	}
	return filepath.Join(dir, genPrefix+strconv.FormatUint(gen, 10), name)
}

// settleGen finishes a switch to generation gen (its staged state files
// moved into dir) and removes the local logs of every other generation
// (an older one, or a newer one a failed restore left).
func settleGen(dir string, gen uint64) error {
	if gen > 0 {
		staged := filepath.Join(dir, genPrefix+strconv.FormatUint(gen, 10), "state")
		ents, err := os.ReadDir(staged)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("replog: %w", err)
		}
		for _, e := range ents {
			if err := os.Rename(filepath.Join(staged, e.Name()), filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("replog: install state file: %w", err)
			}
		}
		if len(ents) > 0 {
			if err := syncDir(dir); err != nil {
				return err
			}
		}
		if err := os.RemoveAll(staged); err != nil {
			return fmt.Errorf("replog: %w", err)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("replog: %w", err)
	}
	keep := genPrefix + strconv.FormatUint(gen, 10)
	removed := false
	for _, e := range ents {
		name := e.Name()
		if gen > 0 && (name == "data" || name == "events") || strings.HasPrefix(name, genPrefix) && name != keep {
			if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
				return fmt.Errorf("replog: remove old local logs: %w", err)
			}
			removed = true
		}
	}
	if removed {
		return syncDir(dir)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("replog: sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("replog: sync %s: %w", dir, err)
	}
	return nil
}

// holds reports whether the local logs already hold what m describes:
// every record, and the last state file.
func (p *Pair) holds(m mark) bool {
	_, dl := p.data.loc().Bounds()
	_, el := p.events.loc().Bounds()
	return dl+1 >= m.nextData && el+1 >= m.nextEv && m.stateAt <= p.applied
}

// restoreFromPeer fetches and installs the local logs for the snapshot
// m at index, retrying until it succeeds or the pair closes
// (errRestoreStopped).
func (p *Pair) restoreFromPeer(index uint64, m mark) error {
	select {
	case <-p.opened:
	case <-p.ctx.Done():
		return fmt.Errorf("%w: %s: snapshot %d", errRestoreStopped, p.dir, index)
	}
	wait := minRestoreBackoff
	for {
		for _, to := range p.sources() {
			err := p.fetchInstall(to, index, m)
			if err == nil || errors.Is(err, errAfterSwitch) {
				return err
			}
			if p.ctx.Err() != nil {
				return fmt.Errorf("%w: %s: snapshot %d: %v", errRestoreStopped, p.dir, index, err)
			}
			p.restoreFailures.Add(1)
			p.cfg.Logf("replog %s: restore of snapshot %d from replica %d: %v; retrying", p.dir, index, to, err)
		}
		select {
		case <-time.After(wait):
		case <-p.ctx.Done():
			return fmt.Errorf("%w: %s: snapshot %d", errRestoreStopped, p.dir, index)
		}
		wait = min(2*wait, maxRestoreBackoff)
	}
}

// sources lists the replicas to fetch from: the leader first, then the
// other voters.
func (p *Pair) sources() []uint64 {
	var out []uint64
	if lead := p.g.Leader(); lead != 0 && lead != p.id {
		out = append(out, lead)
	}
	voters := p.cfg.Group.Peers
	ctx, cancel := context.WithTimeout(p.ctx, time.Second)
	if st, err := p.g.Status(ctx); err == nil && len(st.Voters) > 0 {
		voters = st.Voters
	}
	cancel()
	for _, id := range voters {
		if id != p.id && (len(out) == 0 || id != out[0]) {
			out = append(out, id)
		}
	}
	return out
}

// crcReader checksums what is read through it.
type crcReader struct {
	r   *bufio.Reader
	crc hash.Hash32
}

func (c *crcReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.crc.Write([]byte{b})
	}
	return b, err
}

func (c *crcReader) full(b []byte) error {
	if _, err := io.ReadFull(c.r, b); err != nil {
		return err
	}
	c.crc.Write(b)
	return nil
}

func (c *crcReader) uvarint(what string, max uint64) (uint64, error) {
	x, err := binary.ReadUvarint(c)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", what, err)
	}
	if x > max {
		return 0, fmt.Errorf("%w: stream: %s %d, at most %d", ErrCorrupt, what, x, max)
	}
	return x, nil
}

// fetchInstall is one attempt: fetch from replica to, build the next
// generation, switch to it.
func (p *Pair) fetchInstall(to, index uint64, m mark) (err error) {
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.RestoreTimeout)
	defer cancel()
	gen := p.gen + 1
	gdir := filepath.Join(p.dir, genPrefix+strconv.FormatUint(gen, 10))
	if err := os.RemoveAll(gdir); err != nil {
		return fmt.Errorf("remove %s: %w", gdir, err)
	}
	defer func() {
		if err != nil && !errors.Is(err, errAfterSwitch) {
			os.RemoveAll(gdir)
		}
	}()
	if err := os.MkdirAll(filepath.Join(gdir, "state"), 0o755); err != nil {
		return fmt.Errorf("replog: %w", err)
	}
	rc, err := p.g.Fetch(ctx, to, encodeFetch(index))
	if err != nil {
		return err
	}
	defer rc.Close()
	cr := &crcReader{r: bufio.NewReaderSize(rc, 64<<10), crc: crc32.NewIEEE()}
	magic := make([]byte, len(streamMagic))
	if err := cr.full(magic); err != nil || string(magic) != streamMagic {
		return fmt.Errorf("%w: stream header (%v)", ErrCorrupt, err)
	}
	seen, err := cr.uvarint("applied index", 1<<63)
	if err != nil {
		return err
	}
	if seen < index {
		return fmt.Errorf("replica %d applied %d, before snapshot %d", to, seen, index)
	}
	logs := make([]*seglog.Log, 0, 2)
	defer func() {
		if err != nil && !errors.Is(err, errAfterSwitch) {
			for _, l := range logs {
				l.Close()
			}
		}
	}()
	for _, x := range []struct {
		name string
		need seglog.Seq
	}{{"data", m.nextData - 1}, {"events", m.nextEv - 1}} {
		l, err := p.receiveLog(cr, filepath.Join(gdir, x.name), x.need)
		if err != nil {
			return fmt.Errorf("%s log: %w", x.name, err)
		}
		logs = append(logs, l)
	}
	if err := p.receiveStates(cr, filepath.Join(gdir, "state")); err != nil {
		return err
	}
	sum := cr.crc.Sum32()
	var tail [4]byte
	if _, err := io.ReadFull(cr.r, tail[:]); err != nil {
		return fmt.Errorf("read stream checksum: %w", err)
	}
	if binary.LittleEndian.Uint32(tail[:]) != sum {
		return fmt.Errorf("%w: stream checksum mismatch", ErrCorrupt)
	}
	if err := syncDir(gdir); err != nil {
		return err
	}
	if err := syncDir(p.dir); err != nil {
		return err
	}
	return p.switchTo(gen, index, m, logs)
}

// receiveLog builds the log in dir from the stream's next log, and
// checks it reaches need; it returns the log open and fsynced.
func (p *Pair) receiveLog(cr *crcReader, dir string, need seglog.Seq) (*seglog.Log, error) {
	first, err := cr.uvarint("first seq", 1<<62)
	if err != nil {
		return nil, err
	}
	l, err := seglog.Open(dir, seglog.Options{Policy: seglog.PolicyCaller, SegmentSize: p.cfg.SegmentSize, Start: seglog.Seq(max(first, 1))})
	if err != nil {
		return nil, err
	}
	next := seglog.Seq(max(first, 1))
	maxData := uint64(p.cfg.Group.MaxEntryBytes)
	var ents []seglog.Entry
	held := 0 // bytes in ents: appended at batchBytes, whatever the batch
	add := func() error {
		if len(ents) == 0 {
			return nil
		}
		got, err := l.Append(ents)
		if err != nil {
			return err
		}
		if got != next {
			return fmt.Errorf("%w: %s gave seq %d, want %d", ErrCorrupt, dir, got, next)
		}
		next += seglog.Seq(len(ents))
		clear(ents)
		ents, held = ents[:0], 0
		return nil
	}
	for {
		n, err := cr.uvarint("batch", batchRecords)
		if err != nil {
			l.Close()
			return nil, err
		}
		if n == 0 {
			break
		}
		for i := uint64(0); i < n; i++ {
			seq := next + seglog.Seq(len(ents))
			var hdr [12]byte
			if err := cr.full(hdr[:]); err != nil {
				l.Close()
				return nil, fmt.Errorf("read record %d: %w", seq, err)
			}
			e := seglog.Entry{Time: int64(binary.LittleEndian.Uint64(hdr[:])), CRC: binary.LittleEndian.Uint32(hdr[8:])}
			ml, err := cr.uvarint("meta length", seglog.MaxMetaSize)
			if err == nil {
				e.Meta = make([]byte, ml)
				err = cr.full(e.Meta)
			}
			var dl uint64
			if err == nil {
				dl, err = cr.uvarint("data length", maxData)
			}
			if err == nil {
				e.Data = make([]byte, dl)
				err = cr.full(e.Data)
			}
			if err == nil && crc32.ChecksumIEEE(e.Data) != e.CRC {
				err = fmt.Errorf("%w: record %d: data checksum mismatch", ErrCorrupt, seq)
			}
			if err == nil {
				ents = append(ents, e)
				if held += len(e.Meta) + len(e.Data); held >= batchBytes {
					err = add()
				}
			}
			if err != nil {
				l.Close()
				return nil, err
			}
		}
		if err := add(); err != nil {
			l.Close()
			return nil, err
		}
	}
	if next-1 < need {
		l.Close()
		return nil, fmt.Errorf("the stream holds records to %d, the snapshot needs %d", next-1, need)
	}
	if _, err := l.Sync(); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// receiveStates stages the stream's state files in dir, each fsynced.
func (p *Pair) receiveStates(cr *crcReader, dir string) error {
	n, err := cr.uvarint("state file count", maxStateFiles)
	if err != nil {
		return err
	}
	for i := uint64(0); i < n; i++ {
		nl, err := cr.uvarint("state name length", 255)
		if err != nil {
			return err
		}
		name := make([]byte, nl)
		if err := cr.full(name); err != nil {
			return fmt.Errorf("read state name: %w", err)
		}
		if err := checkStateName(string(name)); err != nil {
			return fmt.Errorf("%w: stream: %v", ErrCorrupt, err)
		}
		size, err := cr.uvarint("state file size", uint64(p.cfg.Group.MaxEntryBytes))
		if err != nil {
			return err
		}
		b := make([]byte, size)
		if err := cr.full(b); err != nil {
			return fmt.Errorf("read state file %s: %w", name, err)
		}
		if err := writeFileAtomic(dir, string(name), b); err != nil {
			return err
		}
	}
	return nil
}

// switchTo makes generation gen's logs (open, fsynced) the local logs:
// the mark naming them is written, then the logs are swapped in, the
// state files moved into place and the old generation removed.
func (p *Pair) switchTo(gen, index uint64, m mark, logs []*seglog.Log) error {
	nm := mark{index: index, nextData: m.nextData, nextEv: m.nextEv, stateAt: m.stateAt, gen: gen}
	if err := writeFileAtomic(p.dir, appliedName, encodeMark(nm)); err != nil {
		return err // the old mark may be in place or the new one: the next open settles either
	}
	// Switched: from here on a failure stops the group (no retry builds
	// this generation again), and the next open finds it.
	p.cutMu.Lock()
	olds := [...]*seglog.Log{p.data.local.Swap(logs[0]), p.events.local.Swap(logs[1])}
	p.cutMu.Unlock()
	p.applied, p.stateAt, p.gen = index, m.stateAt, gen
	p.sinceMark, p.markBytes = 0, 0
	var errs []error
	for _, l := range olds {
		if err := l.Close(); err != nil {
			errs = append(errs, fmt.Errorf("replog: close %s: %w", l.Dir(), err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", errAfterSwitch, err)
	}
	if err := settleGen(p.dir, gen); err != nil {
		return fmt.Errorf("%w: %w", errAfterSwitch, err)
	}
	// Published last: what Durable and the fetch server report, once the
	// state files are in place too.
	p.mu.Lock()
	p.data.applyNext, p.events.applyNext = m.nextData, m.nextEv
	p.mu.Unlock()
	p.seen.Store(index)
	return nil
}

// errAfterSwitch marks a failure after the mark named the new
// generation: the restore is not tried again, the group stops.
var errAfterSwitch = errors.New("replog: after the switch to the restored logs")
