package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
)

// fetchPair is two linked transports; b answers fetches with serve.
func fetchPair(t *testing.T, serve func(from, group uint64, req []byte, w io.Writer) error, tune func(*Options)) (a, b *node) {
	t.Helper()
	creds := testCerts(t, "a", "b")
	a = start(t, 1, "a", creds["a"], tune)
	b = start(t, 2, "b", creds["b"], func(o *Options) {
		o.OnFetch = serve
		if tune != nil {
			tune(o)
		}
	})
	link(t, a, b)
	link(t, b, a)
	return a, b
}

// pattern is n bytes no two chunks of which are alike.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

// TestFetch: a fetch over its own mutual-TLS connection gets the
// server's stream whole, in many chunks, then io.EOF; the server sees
// the group, the request and the fetching peer; the raft link keeps
// working beside it.
func TestFetch(t *testing.T) {
	want := pattern(300_000)
	var from, group uint64
	var req []byte
	a, b := fetchPair(t, func(f, g uint64, r []byte, w io.Writer) error {
		from, group, req = f, g, append([]byte(nil), r...)
		for off := 0; off < len(want); off += 7000 {
			if _, err := w.Write(want[off:min(off+7000, len(want))]); err != nil {
				return err
			}
		}
		return nil
	}, func(o *Options) { o.ChunkSize = 32 << 10 })
	rc, err := a.Fetch(context.Background(), 2, 42, []byte("give"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes (%v), want %d", len(got), err, len(want))
	}
	if from != 1 || group != 42 || string(req) != "give" {
		t.Fatalf("server saw from %d, group %d, request %q", from, group, req)
	}
	if st := b.Stats(); st.FetchesServed != 1 || st.FetchErrors != 0 {
		t.Fatalf("server stats %+v", st)
	}
	a.Send(7, []*pb.Message{msg(1, 2, "beside")})
	waitFor(t, "a raft message beside the fetch", func() bool { return len(b.in.list()) == 1 })
}

// TestFetchRefusals: a chunk damaged after its CRC was taken fails the
// stream with ErrBadChunk; a server's error arrives as ErrFetchFailed
// with its text; past MaxFetches the server answers ErrFetchBusy; a
// stream over MaxFetchBytes fails.
func TestFetchRefusals(t *testing.T) {
	t.Run("bad chunk", func(t *testing.T) {
		a, b := fetchPair(t, func(_, _ uint64, _ []byte, w io.Writer) error {
			_, err := w.Write(pattern(100_000))
			return err
		}, func(o *Options) { o.ChunkSize = 16 << 10 })
		b.testChunk = func(i int, p []byte) []byte {
			if i != 2 {
				return p
			}
			c := append([]byte(nil), p...)
			c[100] ^= 1
			return c
		}
		rc, err := a.Fetch(context.Background(), 2, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		got, err := io.ReadAll(rc)
		if !errors.Is(err, ErrBadChunk) || len(got) != 2*16<<10 {
			t.Fatalf("read %d bytes, %v; want the two good chunks, then ErrBadChunk", len(got), err)
		}
	})
	t.Run("server error", func(t *testing.T) {
		a, _ := fetchPair(t, func(_, _ uint64, _ []byte, w io.Writer) error {
			w.Write([]byte("part"))
			return errors.New("the log moved")
		}, nil)
		rc, err := a.Fetch(context.Background(), 2, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		_, err = io.ReadAll(rc)
		if !errors.Is(err, ErrFetchFailed) || !bytes.Contains([]byte(err.Error()), []byte("the log moved")) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("busy", func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		creds := testCerts(t, "a", "b")
		a := start(t, 1, "a", creds["a"], nil) // makes up to 4 at once
		b := start(t, 2, "b", creds["b"], func(o *Options) {
			o.MaxFetches = 1
			o.OnFetch = func(_, _ uint64, _ []byte, w io.Writer) error {
				w.Write([]byte("x"))
				<-release
				return nil
			}
		})
		link(t, a, b)
		link(t, b, a)
		first, err := a.Fetch(context.Background(), 2, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer first.Close()
		waitFor(t, "the first fetch to be served", func() bool { return len(b.fetchIn) == 1 })
		second, err := a.Fetch(context.Background(), 2, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer second.Close()
		if _, err := io.ReadAll(second); !errors.Is(err, ErrFetchFailed) || !bytes.Contains([]byte(err.Error()), []byte("too many fetches")) {
			t.Fatalf("second fetch served at once: %v, want the server's busy answer", err)
		}
	})
	t.Run("too large", func(t *testing.T) {
		a, _ := fetchPair(t, func(_, _ uint64, _ []byte, w io.Writer) error {
			_, err := w.Write(pattern(50_000))
			return err
		}, func(o *Options) { o.MaxFetchBytes = 20_000; o.ChunkSize = 4096 })
		rc, err := a.Fetch(context.Background(), 2, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		got, err := io.ReadAll(rc)
		if err == nil || len(got) > 20_000 {
			t.Fatalf("read %d bytes, %v; want at most 20000 and an error", len(got), err)
		}
	})
	t.Run("no such peer", func(t *testing.T) {
		a, _ := fetchPair(t, nil, nil)
		if _, err := a.Fetch(context.Background(), 9, 1, nil); err == nil {
			t.Fatal("fetch from no peer succeeded")
		}
	})
}
