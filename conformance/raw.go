package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// rawConn is a byte-level TCP connection for raw steps and the wire driver.
// It keeps what it has read but not yet consumed in buf, so a read that
// times out part way through a frame loses nothing.
type rawConn struct {
	nc  net.Conn
	buf []byte
	eof error // sticky read error
}

// errTimeout is returned when nothing complete arrived before the deadline.
var errTimeout = errors.New("timed out waiting for the server")

func dialRaw(ctx context.Context, addr string) (*rawConn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return &rawConn{nc: nc}, nil
}

func (r *rawConn) close() error { return r.nc.Close() }

func (r *rawConn) write(b []byte) error {
	_ = r.nc.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := r.nc.Write(b)
	return err
}

// fill reads more bytes, until deadline.
func (r *rawConn) fill(deadline time.Time) error {
	if r.eof != nil {
		return r.eof
	}
	_ = r.nc.SetReadDeadline(deadline)
	var tmp [64 << 10]byte
	n, err := r.nc.Read(tmp[:])
	r.buf = append(r.buf, tmp[:n]...)
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			if n > 0 {
				return nil
			}
			return errTimeout
		}
		r.eof = err
		if n > 0 {
			return nil
		}
		return err
	}
	return nil
}

// line returns the next line without its CRLF (or bare LF).
func (r *rawConn) line(deadline time.Time) (string, error) {
	for {
		if i := bytes.IndexByte(r.buf, '\n'); i >= 0 {
			l := bytes.TrimSuffix(r.buf[:i], []byte("\r"))
			s := string(l)
			r.buf = r.buf[i+1:]
			return s, nil
		}
		if err := r.fill(deadline); err != nil {
			return "", err
		}
	}
}

// bytesN returns the next n bytes followed by CRLF (the CRLF is consumed).
func (r *rawConn) bytesN(n int, deadline time.Time) ([]byte, error) {
	for len(r.buf) < n+2 {
		if err := r.fill(deadline); err != nil {
			return nil, err
		}
	}
	if r.buf[n] != '\r' || r.buf[n+1] != '\n' {
		return nil, fmt.Errorf("payload of %d bytes not followed by CRLF", n)
	}
	b := bytes.Clone(r.buf[:n])
	r.buf = r.buf[n+2:]
	return b, nil
}

// hasData reports whether unconsumed bytes are buffered.
func (r *rawConn) hasData() bool { return len(r.buf) > 0 }

// waitClosed reports whether the server closes the connection before the
// deadline (bytes still arriving are read and dropped).
func (r *rawConn) waitClosed(deadline time.Time) error {
	for {
		r.buf = r.buf[:0]
		err := r.fill(deadline)
		switch {
		case err == nil:
			continue
		case errors.Is(err, errTimeout):
			return errors.New("connection still open")
		default:
			return nil
		}
	}
}
