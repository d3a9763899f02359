package seglog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

// Compression is the codec sealed segments are compressed with (see
// Options.Compression). The active segment is never compressed.
type Compression uint8

const (
	// CompressionNone (the default) keeps sealed segments plain: reads are
	// zero-copy from the memory map.
	CompressionNone Compression = iota
	// CompressionS2 compresses sealed segments with klauspost/compress/s2:
	// fast, about 3x on JSON-like payloads.
	CompressionS2
	// CompressionZstd compresses sealed segments with zstd (fastest level):
	// about 6x on JSON-like payloads, slower to decode.
	CompressionZstd
)

// String returns the codec's name as ParseCompression accepts it.
func (c Compression) String() string {
	switch c {
	case CompressionNone:
		return "none"
	case CompressionS2:
		return "s2"
	case CompressionZstd:
		return "zstd"
	}
	return fmt.Sprintf("Compression(%d)", uint8(c))
}

// ParseCompression maps "none" (or ""), "s2" or "zstd" to a Compression;
// anything else is an error wrapping ErrInvalidOptions.
func ParseCompression(s string) (Compression, error) {
	switch s {
	case "", "none":
		return CompressionNone, nil
	case "s2":
		return CompressionS2, nil
	case "zstd":
		return CompressionZstd, nil
	}
	return 0, fmt.Errorf("%w: unknown compression %q", ErrInvalidOptions, s)
}

// ext is the suffix a compressed segment file adds to its plain name.
func (c Compression) ext() string {
	switch c {
	case CompressionS2:
		return ".s2"
	case CompressionZstd:
		return ".zst"
	}
	return ""
}

// Compressed segment file layout (%020d.seg.s2 or %020d.seg.zst): a 48-byte
// header, then the codec's encoding of the plain segment's bytes [0, end)
// (its own header and records, so every record keeps its CRCs).
//
//	0  [8]byte magic "FBRLCSG1"
//	8  uint64  first sequence number (also the file name)
//	16 uint64  last sequence number held
//	24 uint64  plain length (the segment's end)
//	32 uint32  CRC-32 (IEEE) of the plain bytes
//	36 uint8   codec (Compression)
//	37 [3]byte reserved (0)
//	40 uint32  CRC-32 (IEEE) of bytes 0..40
//	44 [4]byte reserved (0)
const (
	compHeaderSize = 48
	compMagic      = "FBRLCSG1"
	// plainExt marks a sealed segment that compression would not shrink by
	// at least minSavingTenths/10: it stays plain and is not tried again. The
	// marker is a hint written without fsync; losing it costs a retry.
	plainExt = ".plain"
	// cacheSegments is how many decompressed segments reads keep.
	cacheSegments = 2
)

// minSavingTenths: a segment is compressed only if that saves at least this
// fraction of its bytes (numerator over 10).
const minSavingTenths = 1

type compHeader struct {
	first, last Seq
	rawLen      int64
	rawCRC      uint32
	codec       Compression
}

func encodeCompHeader(h compHeader) []byte {
	b := make([]byte, compHeaderSize)
	copy(b, compMagic)
	binary.LittleEndian.PutUint64(b[8:], uint64(h.first))
	binary.LittleEndian.PutUint64(b[16:], uint64(h.last))
	binary.LittleEndian.PutUint64(b[24:], uint64(h.rawLen))
	binary.LittleEndian.PutUint32(b[32:], h.rawCRC)
	b[36] = byte(h.codec)
	binary.LittleEndian.PutUint32(b[40:], crc32.ChecksumIEEE(b[:40]))
	return b
}

// decodeCompHeader checks and decodes a compressed segment's header.
func decodeCompHeader(b []byte, first Seq, codec Compression) (compHeader, string) {
	if len(b) < compHeaderSize || string(b[:8]) != compMagic {
		return compHeader{}, "bad compressed segment header"
	}
	if crc32.ChecksumIEEE(b[:40]) != binary.LittleEndian.Uint32(b[40:]) {
		return compHeader{}, "compressed segment header checksum mismatch"
	}
	h := compHeader{
		first:  Seq(binary.LittleEndian.Uint64(b[8:])),
		last:   Seq(binary.LittleEndian.Uint64(b[16:])),
		rawLen: int64(binary.LittleEndian.Uint64(b[24:])),
		rawCRC: binary.LittleEndian.Uint32(b[32:]),
		codec:  Compression(b[36]),
	}
	switch {
	case h.first != first || h.codec != codec:
		return h, "compressed segment header does not match its file name"
	case h.rawLen < segHeaderSize || h.rawLen > MaxSegmentSize || h.last+1 < h.first:
		return h, "compressed segment header out of range"
	}
	return h, ""
}

// parseCompName returns the first sequence number and codec a compressed
// segment file name holds.
func parseCompName(name string) (Seq, Compression, bool) {
	for _, c := range []Compression{CompressionS2, CompressionZstd} {
		if base, ok := strings.CutSuffix(name, segExt+c.ext()); ok && len(base) == 20 {
			n, err := strconv.ParseUint(base, 10, 64)
			if err != nil || n == 0 {
				return 0, 0, false
			}
			return Seq(n), c, true
		}
	}
	return 0, 0, false
}

func compPath(dir string, first Seq, c Compression) string {
	return filepath.Join(dir, segName(first)+c.ext())
}

func plainMarkerPath(dir string, first Seq) string {
	return filepath.Join(dir, segName(first)+plainExt)
}

// openCompressed opens a compressed sealed segment: only its header is read
// (the body is verified when a read first decompresses it).
func (l *Log) openCompressed(first Seq, codec Compression) (*segment, error) {
	path := compPath(l.dir, first, codec)
	f, err := l.fs.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("seglog: open segment: %w", err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("seglog: open segment: %w", err)
	}
	hb := make([]byte, compHeaderSize)
	if size >= compHeaderSize {
		if _, err := f.ReadAt(hb, 0); err != nil {
			return nil, fmt.Errorf("seglog: open segment %s: %w", path, err)
		}
	}
	h, bad := decodeCompHeader(hb, first, codec)
	if bad != "" {
		return nil, &CorruptError{Path: path, Seq: first, Reason: bad}
	}
	return &segment{path: path, first: first, codec: codec, size: size, end: h.rawLen, last: h.last, sparseIndex: sparseIndex{idxLast: h.last, lastIndexed: -1}}, nil
}

// segCache holds the last decompressed segments, for reads. Lock order:
// Log.mu (read or write) before segCache.mu.
type segCache struct {
	mu   sync.Mutex
	ents []*segment // views over decompressed bytes, most recent first
	src  []*segment // the compressed segment each view stands for
	zdec *zstd.Decoder
}

// view returns a segment whose data holds s's plain bytes: s itself when it
// is not compressed, else a decompressed, verified copy (cached). Called
// with l.mu held. Records read from a view point into heap memory.
func (l *Log) view(s *segment) (*segment, error) {
	if s.codec == CompressionNone {
		return s, nil
	}
	c := &l.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, src := range c.src {
		if src == s {
			v := c.ents[i]
			copy(c.ents[1:i+1], c.ents[:i])
			copy(c.src[1:i+1], c.src[:i])
			c.ents[0], c.src[0] = v, s
			return v, nil
		}
	}
	v, err := l.decompress(s)
	if err != nil {
		return nil, err
	}
	c.ents = append([]*segment{v}, c.ents...)
	c.src = append([]*segment{s}, c.src...)
	if len(c.ents) > cacheSegments {
		c.ents, c.src = c.ents[:cacheSegments], c.src[:cacheSegments]
	}
	return v, nil
}

// forget drops s from the cache (it was deleted). Called with l.mu held.
func (c *segCache) forget(s *segment) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, src := range c.src {
		if src == s {
			c.ents = append(c.ents[:i], c.ents[i+1:]...)
			c.src = append(c.src[:i], c.src[i+1:]...)
			return
		}
	}
}

// close releases the decoder. Called when the log is released.
func (c *segCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.zdec != nil {
		c.zdec.Close()
		c.zdec = nil
	}
	c.ents, c.src = nil, nil
}

// decompress reads s's file, decodes it, checks the plain length, the
// plain CRC and the segment header, and indexes its records (verifying
// their headers). Called with l.cache.mu held. Damage is a *CorruptError.
func (l *Log) decompress(s *segment) (*segment, error) {
	corrupt := func(reason string) (*segment, error) {
		return nil, &CorruptError{Path: s.path, Seq: s.first, Reason: reason}
	}
	b, err := readFile(l.fs, s.path)
	if err != nil {
		return nil, fmt.Errorf("seglog: read compressed segment: %w", err)
	}
	if b == nil {
		return nil, fmt.Errorf("seglog: read compressed segment %s: %w", s.path, os.ErrNotExist)
	}
	h, bad := decodeCompHeader(b, s.first, s.codec)
	if bad != "" {
		return corrupt(bad)
	}
	// s.last may have grown past h.last: records missing before the next
	// segment, skipped with SkipCorrupt, are a hole of s (never read here).
	if h.rawLen != s.end || h.last > s.last {
		return corrupt("compressed segment header changed since open")
	}
	body := b[compHeaderSize:]
	var raw []byte
	switch s.codec {
	case CompressionS2:
		n, derr := s2.DecodedLen(body)
		if derr != nil || int64(n) != h.rawLen {
			return corrupt("s2 body does not hold the length its header names")
		}
		raw, err = s2.Decode(make([]byte, n), body)
	case CompressionZstd:
		if l.cache.zdec == nil {
			l.cache.zdec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(MaxSegmentSize)+compHeaderSize))
			if err != nil {
				return nil, fmt.Errorf("seglog: zstd decoder: %w", err)
			}
		}
		raw, err = l.cache.zdec.DecodeAll(body, make([]byte, 0, h.rawLen))
	}
	if err != nil {
		return corrupt(fmt.Sprintf("%s body does not decode: %v", s.codec, err))
	}
	if int64(len(raw)) != h.rawLen || crc32.ChecksumIEEE(raw) != h.rawCRC {
		return corrupt("decompressed bytes fail their length or checksum")
	}
	if !checkSegHeader(raw, s.first) {
		return corrupt("bad segment header inside the compressed segment")
	}
	v := &segment{path: s.path, first: s.first, segMap: segMap{data: raw}, size: h.rawLen, end: h.rawLen, last: h.last, sparseIndex: noIndex()}
	off, seq := int64(segHeaderSize), s.first
	for off < h.rawLen {
		rh, st := checkRecordData(raw, off, false)
		if st != recOK || rh.seq != seq {
			return nil, &CorruptError{Path: s.path, Offset: off, Seq: seq, Reason: "inside compressed segment: " + st.String()}
		}
		if rh.side() {
			off += rh.size()
			continue
		}
		v.addIndex(seq, off, l.opts.IndexInterval, false)
		off += rh.size()
		seq++
	}
	if seq-1 != h.last {
		return corrupt("compressed segment holds fewer records than its header names")
	}
	return v, nil
}

// compressor is the background job that compresses sealed segments, one
// goroutine per log, started by Open when Options.Compression is set.
type compressor struct {
	notify chan struct{} // capacity 1: a segment was sealed
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
	zenc   *zstd.Encoder
	// mu is held while one segment is compressed; TruncateFront takes it
	// first so it never deletes a segment whose map is being read. Lock
	// order: compressor.mu, then Log.mu.
	mu sync.Mutex
	// err is the last compression failure (for tests and diagnostics).
	errMu sync.Mutex
	err   error
}

// startCompressor starts the background compression goroutine and asks it
// to look at the sealed segments Open found.
func (l *Log) startCompressor() {
	if l.opts.Compression == CompressionNone {
		return
	}
	c := &l.comp
	c.notify = make(chan struct{}, 1)
	c.stop = make(chan struct{})
	c.done = make(chan struct{})
	go l.compressLoop()
	l.kickCompressor()
}

// kickCompressor tells the compressor a segment was sealed (never blocks).
func (l *Log) kickCompressor() {
	if l.comp.notify == nil {
		return
	}
	select {
	case l.comp.notify <- struct{}{}:
	default:
	}
}

// stopCompressor stops the goroutine and waits for it: a segment being
// compressed is finished (or abandoned at a failure) first.
func (l *Log) stopCompressor() {
	c := &l.comp
	if c.stop == nil {
		return
	}
	c.once.Do(func() { close(c.stop) })
	<-c.done
}

func (l *Log) compressLoop() {
	c := &l.comp
	defer close(c.done)
	defer func() {
		if c.zenc != nil {
			c.zenc.Close()
		}
	}()
	for {
		select {
		case <-c.stop:
			return
		case <-c.notify:
		}
		for {
			select {
			case <-c.stop:
				return
			default:
			}
			s := l.nextToCompress()
			if s == nil {
				break
			}
			if err := l.compressSegment(s); err != nil {
				c.errMu.Lock()
				c.err = err
				c.errMu.Unlock()
				break // retried after the next roll
			}
		}
	}
}

// compressErr returns the last compression failure.
func (l *Log) compressErr() error {
	l.comp.errMu.Lock()
	defer l.comp.errMu.Unlock()
	return l.comp.err
}

// nextToCompress returns the oldest sealed plain segment not yet judged
// incompressible and free of skipped damage.
func (l *Log) nextToCompress() *segment {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed.Load() || len(l.segs) < 2 {
		return nil
	}
	for _, s := range l.segs.sealed() {
		if s.codec == CompressionNone && !s.noComp && len(s.skipped) == 0 && len(s.holes) == 0 && s.end > segHeaderSize {
			return s
		}
	}
	return nil
}

// errCompressDied is returned when the test hook simulates a crash.
var errCompressDied = errors.New("seglog: compression stopped by test hook")

// compressSegment replaces sealed segment s by its compressed form, crash
// safely: temp file, fsync, rename, directory fsync, and only then the
// plain file is removed (if both survive a crash, Open keeps the plain one).
// A segment that would not shrink by minSavingTenths/10 stays plain, marked so.
func (l *Log) compressSegment(s *segment) (err error) {
	c := &l.comp
	c.mu.Lock()
	defer c.mu.Unlock()
	l.mu.RLock()
	sealed := l.segs.holdsSealed(s)
	end, last := s.end, s.last
	l.mu.RUnlock()
	if !sealed || l.closed.Load() {
		return nil
	}
	die := func(step string) bool { return l.opts.compressHook != nil && l.opts.compressHook(step) }
	codec := l.opts.Compression
	var body []byte
	var rawCRC uint32
	func() {
		// TruncateFront (which would unmap s) waits for c.mu.
		defer unguard(&err, s.path, guard())
		raw := s.data[:end]
		rawCRC = crc32.ChecksumIEEE(raw)
		switch codec {
		case CompressionS2:
			if s2.MaxEncodedLen(len(raw)) < 0 {
				return
			}
			body = s2.Encode(nil, raw)
		case CompressionZstd:
			if c.zenc == nil {
				c.zenc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
				if err != nil {
					return
				}
			}
			body = c.zenc.EncodeAll(raw, make([]byte, 0, len(raw)/2))
		}
	}()
	if err != nil {
		return fmt.Errorf("seglog: compress %s: %w", s.path, err)
	}
	if body == nil || int64(len(body)+compHeaderSize) > end-end*minSavingTenths/10 {
		_ = writeFileAtomic(l.fs, l.dir, filepath.Base(plainMarkerPath(l.dir, s.first)), nil, false)
		l.mu.Lock()
		s.noComp = true
		l.mu.Unlock()
		return nil
	}
	file := append(encodeCompHeader(compHeader{first: s.first, last: last, rawLen: end, rawCRC: rawCRC, codec: codec}), body...)
	final := compPath(l.dir, s.first, codec)
	tmp := final + tmpExt
	fail := func(e error, paths ...string) error {
		for _, p := range paths {
			_ = l.fs.Remove(p)
		}
		return fmt.Errorf("seglog: compress %s: %w", s.path, e)
	}
	f, err := l.fs.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fail(err)
	}
	_, err = f.WriteAt(file, 0)
	if die("written") {
		f.Close()
		return errCompressDied
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail(err, tmp)
	}
	if die("synced") {
		return errCompressDied
	}
	if err := l.fs.Rename(tmp, final); err != nil {
		return fail(err, tmp)
	}
	if die("renamed") {
		return errCompressDied
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fail(err, final)
	}
	if die("dirsynced") {
		return errCompressDied
	}
	ns := &segment{path: final, first: s.first, codec: codec, size: int64(len(file)), end: end, last: last, sparseIndex: noIndex()}
	l.mu.Lock()
	l.segs.replace(s, ns)
	swapNo := l.grave.swap()
	l.mu.Unlock()
	// Renamed to trash, deleted gradually once its map is released (see
	// trash.go). Only then does it go to the graveyard, where TruncateFront
	// or ReleaseSwapped may release it (and read s.trash). Its map stays
	// until the next TruncateFront (with HoldSwapped: until ReleaseSwapped
	// passes this swap): records read from it earlier are borrowed until
	// then.
	var rmErr error
	if !l.toTrash(s) {
		if err := l.fs.Remove(s.path); err != nil {
			// Both files exist: Open keeps the plain one and drops this.
			rmErr = fmt.Errorf("seglog: compress %s: remove plain segment: %w", s.path, err)
		}
	}
	l.mu.Lock()
	if l.grave.buryReplaced(s, swapNo) {
		// ReleaseSwapped passed this swap while the file was moved
		l.releaseLater(l.grave.take(false))
	}
	l.mu.Unlock()
	if rmErr != nil {
		return rmErr
	}
	if die("removed") {
		return errCompressDied
	}
	_ = l.fs.Remove(idxPath(l.dir, s.first))
	return nil
}

// SwapCount returns how many segments the compressor has replaced so far.
// A reader that notes it before reading borrows only maps of later
// replacements (see ReleaseSwapped).
func (l *Log) SwapCount() uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.grave.swaps
}

// ReleaseSwapped tells a log opened with HoldSwapped that no record read
// from the plain map of the first upto replaced segments is still
// borrowed: every reader that read before those replacements is done.
// Their maps are unmapped and their files deleted in the background. An
// owner passes the lowest SwapCount its outstanding borrowers noted before
// reading (or the current one when none are outstanding).
func (l *Log) ReleaseSwapped(upto uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() || !l.grave.pass(upto) {
		return
	}
	l.releaseLater(l.grave.take(false))
}
