package faultfs

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"
)

// The control protocol: one command per line, one answer line per command,
// "+OK[ text]" or "-ERR text".
//
//	powercut             drop every unsynced write (stop the writers first)
//	remount              unmount and mount again (forget the kernel's caches)
//	fail-sync EIO|ENOSPC  fail fsyncs of files with that errno
//	fail-write EIO|ENOSPC fail writes, size changes and fallocates
//	heal                 end every injected failure
//	stats                +OK <counters as key=value>
const (
	maxControlLine  = 256
	maxControlConns = 16
)

// Serve answers control commands on ln's connections until ln is closed.
// Each connection is served in its own goroutine, one command at a time; a
// line longer than 256 bytes ends the connection, and a 17th connection at
// once is answered "-ERR too many control connections" and closed.
func (f *FS) Serve(ln net.Listener) error {
	slots := make(chan struct{}, maxControlConns)
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("faultfs: control: %w", err)
		}
		select {
		case slots <- struct{}{}:
			go func() {
				defer func() { <-slots }()
				f.serveConn(c)
			}()
		default:
			_ = c.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = fmt.Fprintf(c, "-ERR too many control connections (%d)\n", maxControlConns)
			_ = c.Close()
		}
	}
}

func (f *FS) serveConn(c net.Conn) {
	defer c.Close()
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, maxControlLine), maxControlLine)
	for sc.Scan() {
		_ = c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := fmt.Fprintf(c, "%s\n", f.Command(sc.Text())); err != nil {
			return
		}
	}
}

// Command runs one control command and returns its answer line.
func (f *FS) Command(line string) string {
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return "-ERR empty command"
	}
	errno := func() (syscall.Errno, error) {
		if len(fields) != 2 {
			return 0, fmt.Errorf("%s takes one errno (EIO or ENOSPC)", fields[0])
		}
		switch strings.ToUpper(fields[1]) {
		case "EIO":
			return syscall.EIO, nil
		case "ENOSPC":
			return syscall.ENOSPC, nil
		}
		return 0, fmt.Errorf("unknown errno %q (EIO or ENOSPC)", fields[1])
	}
	switch strings.ToLower(fields[0]) {
	case "powercut":
		if err := f.PowerCut(); err != nil {
			return "-ERR " + err.Error()
		}
		return "+OK"
	case "remount":
		if err := f.Remount(); err != nil {
			return "-ERR " + err.Error()
		}
		return "+OK"
	case "fail-sync":
		e, err := errno()
		if err != nil {
			return "-ERR " + err.Error()
		}
		f.FailSync(e)
		return "+OK"
	case "fail-write":
		e, err := errno()
		if err != nil {
			return "-ERR " + err.Error()
		}
		f.FailWrites(e)
		return "+OK"
	case "heal":
		f.Heal()
		return "+OK"
	case "stats":
		s := f.Stats()
		return fmt.Sprintf("+OK writes=%d syncs=%d failed_syncs=%d failed_writes=%d refused=%d power_cuts=%d restored=%d truncated=%d tracked=%d held=%d",
			s.Writes, s.Syncs, s.FailedSyncs, s.FailedWrites, s.Refused, s.PowerCuts, s.Restored, s.Truncated, s.Tracked, s.Held)
	}
	return fmt.Sprintf("-ERR unknown command %q", fields[0])
}
