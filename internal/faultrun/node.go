package faultrun

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/fibrilmq/fibril/conformance/fibrilproc"
	"github.com/fibrilmq/fibril/internal/faultfs"
	"github.com/fibrilmq/fibril/internal/netns"
	"github.com/fibrilmq/fibril/internal/offsetclock"
)

// Node is one broker and the faults that can be done to it. Methods are
// called from one goroutine at a time (the run's fault schedule).
type Node interface {
	// Name identifies the node in histories.
	Name() string
	// URL is where clients connect (fibril://host:port).
	URL() string
	// Kill sends SIGKILL and waits until the process is gone.
	Kill(ctx context.Context) error
	// Restart starts the process again on the same address and data.
	Restart(ctx context.Context) error
	// Pause stops the process (SIGSTOP); Resume continues it (SIGCONT).
	Pause() error
	Resume() error
	// SetClock makes the node's clock run offset ahead of real time
	// (negative: behind). The node has seen it when SetClock returns.
	SetClock(offset time.Duration) error
	// CanIsolate reports whether Isolate is possible (a node in its own
	// network namespace).
	CanIsolate() bool
	// Isolate cuts the node's network link; Rejoin restores it.
	Isolate() error
	Rejoin() error
	// CanPowerCut reports whether PowerCut is possible here.
	CanPowerCut() bool
	// PowerCut kills the process and drops every write it had not
	// fsynced; Restart brings it back.
	PowerCut(ctx context.Context) error
	// FailDisk makes the node's fsyncs fail with syncErr and its writes
	// with writeErr (0: succeed); FailDisk(0, 0) heals. Needs CanPowerCut.
	FailDisk(syncErr, writeErr syscall.Errno) error
	// Logs returns what the current process wrote on stderr (kept with a
	// failing run's history).
	Logs() string
	// Close kills the process and releases everything (mounts included).
	Close() error
}

// ProcNode is a local `fibril serve` process whose data directory is, when
// power cuts are possible, a faultfs mount.
type ProcNode struct {
	name, bin, dir string
	clockFile      string
	url            string      // fixed: restarts reuse the address
	fs             *faultfs.FS // nil without power cuts
	ns             *netns.Node // nil on the machine's own network

	srv *fibrilproc.Server
}

// clockSettle is how long SetClock waits for the node to read its offset
// file (it polls every 20 ms).
const clockSettle = 100 * time.Millisecond

// StartProcNode starts bin under dir (created; it holds the data, the
// backing directory of the mount and the clock file). With powerCut it
// mounts faultfs under the data directory first.
func StartProcNode(ctx context.Context, name, bin, dir string, powerCut bool) (*ProcNode, error) {
	return StartProcNodeIn(ctx, name, bin, dir, powerCut, nil)
}

// StartProcNodeIn is StartProcNode with the process in network namespace
// ns (nil: the machine's own), listening on ns's address.
func StartProcNodeIn(ctx context.Context, name, bin, dir string, powerCut bool, ns *netns.Node) (*ProcNode, error) {
	listen := ""
	if ns != nil {
		listen = ns.IP + ":0"
	}
	return startProcNode(ctx, name, bin, dir, powerCut, ns, listen, nil)
}

// startProcNode starts the node listening on listen ("": 127.0.0.1, any
// port) with the extra `fibril serve` flags args.
func startProcNode(ctx context.Context, name, bin, dir string, powerCut bool, ns *netns.Node, listen string, args []string) (*ProcNode, error) {
	n := &ProcNode{name: name, bin: bin, dir: dir, clockFile: filepath.Join(dir, "clock-offset"), ns: ns}
	data := filepath.Join(dir, "data")
	for _, d := range []string{dir, data} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("faultrun: %s: %w", name, err)
		}
	}
	if powerCut {
		backing := filepath.Join(dir, "disk")
		if err := os.MkdirAll(backing, 0o755); err != nil {
			return nil, fmt.Errorf("faultrun: %s: %w", name, err)
		}
		f, err := faultfs.Mount(backing, data, faultfs.Options{})
		if err != nil {
			return nil, fmt.Errorf("faultrun: %s: %w", name, err)
		}
		n.fs = f
	}
	if err := offsetclock.Write(n.clockFile, 0); err != nil {
		n.Close()
		return nil, err
	}
	srv := &fibrilproc.Server{Bin: bin, DataDir: data, Args: args, Listen: listen,
		Env: []string{"FIBRIL_TEST_CLOCK_OFFSET_FILE=" + n.clockFile}}
	if ns != nil {
		// nsenter enters the network namespace only: `ip netns exec`
		// also makes a mount namespace, holding a copy of every FUSE
		// mount of the moment, so a cluster node kept its peers' faultfs
		// mounts alive and a power cut's remount hung in Unmount.
		srv.Prefix = []string{"nsenter", "--net=/run/netns/" + ns.NS, "--"}
	}
	if err := fibrilproc.StartServer(ctx, srv); err != nil {
		n.Close()
		return nil, fmt.Errorf("faultrun: %s: %w", name, err)
	}
	n.srv, n.url = srv, "fibril://"+srv.Addr
	return n, nil
}

// Name implements Node.
func (n *ProcNode) Name() string { return n.name }

// URL implements Node; the address stays the same across restarts.
func (n *ProcNode) URL() string { return n.url }

// Kill implements Node (SIGKILL, waiting until the process is gone).
func (n *ProcNode) Kill(ctx context.Context) error { return n.srv.Stop(true) }

// Restart implements Node: the same address, data and clock file.
func (n *ProcNode) Restart(ctx context.Context) error {
	if err := n.srv.Restart(ctx, true); err != nil {
		return fmt.Errorf("faultrun: restarting %s: %w (log: %s)", n.name, err, n.srv.Logs())
	}
	return nil
}

// Pause implements Node (SIGSTOP).
func (n *ProcNode) Pause() error { return n.srv.Signal(syscall.SIGSTOP) }

// Resume implements Node (SIGCONT).
func (n *ProcNode) Resume() error { return n.srv.Signal(syscall.SIGCONT) }

// SetClock implements Node: it rewrites the offset file and waits until
// the node has read it.
func (n *ProcNode) SetClock(offset time.Duration) error {
	if err := offsetclock.Write(n.clockFile, offset); err != nil {
		return err
	}
	time.Sleep(clockSettle)
	return nil
}

// CanPowerCut implements Node: the data directory is a faultfs mount.
func (n *ProcNode) CanPowerCut() bool { return n.fs != nil }

// CanIsolate implements Node: the process has a namespace of its own.
func (n *ProcNode) CanIsolate() bool { return n.ns != nil }

// Isolate implements Node (its veth down).
func (n *ProcNode) Isolate() error {
	if n.ns == nil {
		return fmt.Errorf("faultrun: %s is not in a network namespace", n.name)
	}
	return n.ns.Isolate()
}

// Rejoin implements Node (its veth up).
func (n *ProcNode) Rejoin() error {
	if n.ns == nil {
		return fmt.Errorf("faultrun: %s is not in a network namespace", n.name)
	}
	return n.ns.Rejoin()
}

// PowerCut implements Node: SIGKILL, the unsynced writes dropped, and a
// fresh mount so the kernel forgets the dropped pages.
func (n *ProcNode) PowerCut(ctx context.Context) error {
	if n.fs == nil {
		return fmt.Errorf("faultrun: %s has no fault file system", n.name)
	}
	if err := n.srv.Stop(true); err != nil {
		return err
	}
	if err := n.fs.PowerCut(); err != nil {
		return err
	}
	return n.fs.Remount()
}

// FailDisk implements Node through faultfs.
func (n *ProcNode) FailDisk(syncErr, writeErr syscall.Errno) error {
	if n.fs == nil {
		return fmt.Errorf("faultrun: %s has no fault file system", n.name)
	}
	n.fs.FailSync(syncErr)
	n.fs.FailWrites(writeErr)
	return nil
}

// Logs returns the current process's stderr.
func (n *ProcNode) Logs() string { return n.srv.Logs() }

// Close implements Node: the process killed, the file system unmounted.
func (n *ProcNode) Close() error {
	var err error
	if n.srv != nil {
		_ = n.srv.Signal(syscall.SIGCONT) // a paused process dies of SIGKILL too, but be plain
		err = n.srv.Stop(true)
	}
	if n.fs != nil {
		if uerr := n.fs.Unmount(); err == nil {
			err = uerr
		}
	}
	return err
}
