package seglog

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"unsafe"

	"golang.org/x/sys/unix"
)

// segMap is a segment's memory map: limit bytes of address space
// reserved once (PROT_NONE, no memory), and the file mapped into the start
// of that range as it grows, so the addresses of mapped records never
// change (borrowed Record slices stay valid) and nothing is ever mapped
// past the end of the file.
type segMap struct {
	data     []byte         // the mapped file, read-only (len: the bytes mapped, cap: the limit)
	base     unsafe.Pointer // the reservation
	resv     uintptr        // bytes reserved at base (the limit rounded up to pages)
	writable bool           // windows are mapped writable (writeViaMap)
}

// reserve reserves limit bytes of address space (data is then empty).
func (m *segMap) reserve(limit int64, path string) error {
	pg := uintptr(os.Getpagesize())
	resv := (uintptr(limit) + pg - 1) &^ (pg - 1)
	p, err := unix.MmapPtr(-1, 0, nil, resv, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return fmt.Errorf("reserve %d bytes for %s: %w", resv, path, err)
	}
	m.base, m.resv = p, resv
	m.data = unsafe.Slice((*byte)(p), limit)[:0]
	return nil
}

// window maps bytes [from, to) of the file fd at their place in the
// reservation (from is rounded down to a page; the bytes already mapped
// there are mapped again, to the same file pages). The caller publishes
// the new length of data.
func (m *segMap) window(fd uintptr, path string, from, to int64) error {
	from &^= int64(os.Getpagesize() - 1)
	if to <= from {
		return nil
	}
	prot := unix.PROT_READ
	if m.writable {
		prot |= unix.PROT_WRITE
	}
	if _, err := unix.MmapPtr(int(fd), from, unsafe.Add(m.base, from), uintptr(to-from), prot, unix.MAP_SHARED|unix.MAP_FIXED); err != nil {
		return fmt.Errorf("mmap %s [%d, %d): %w", path, from, to, err)
	}
	return nil
}

// unmap releases the reservation and everything mapped in it.
func (m *segMap) unmap() error {
	if m.base == nil {
		return nil
	}
	err := unix.MunmapPtr(m.base, m.resv)
	m.base, m.resv, m.data = nil, 0, nil
	return err
}

// mapFile reserves limit bytes of address space and maps the first size
// bytes of the file there. The file must be that long: the log never maps
// past the end of a file, so a read can fault only if someone else shrinks
// the file (and that fault becomes an error, see guard).
func (s *segment) mapFile(writable bool) error {
	s.writable = writable
	if s.limit == 0 {
		return nil
	}
	if err := s.reserve(s.limit, s.path); err != nil {
		return err
	}
	if err := s.mapWindow(0, s.size); err != nil {
		s.unmap()
		return err
	}
	s.data = s.data[:s.size]
	return nil
}

// mapWindow maps file bytes [from, to) (see segMap.window).
func (s *segment) mapWindow(from, to int64) error {
	return s.window(s.f.Fd(), s.path, from, to)
}

// release unmaps and closes the segment.
func (s *segment) release() error {
	err := s.unmap()
	if s.f != nil {
		if cerr := s.f.Close(); err == nil {
			err = cerr
		}
		s.f = nil
	}
	return err
}

// guard turns a memory fault on a mapped read (the file was shrunk behind
// our back) into an error instead of a crash. Use as
//
//	defer unguard(&err, path, guard())
//
// at the top of any function touching a map (a plain deferred call: no
// closure is allocated on the read path).
func guard() (old bool) { return debug.SetPanicOnFault(true) }

// unguard ends what guard started; it must be the deferred call itself
// (recover works only there).
func unguard(err *error, path string, old bool) {
	debug.SetPanicOnFault(old)
	if r := recover(); r != nil {
		var re interface{ Addr() uintptr }
		rerr, isErr := r.(error)
		if isErr && errors.As(rerr, &re) {
			*err = &CorruptError{Path: path, Reason: fmt.Sprintf("memory fault reading the map (file shrunk?): %v", r)}
			return
		}
		panic(r)
	}
}
