// Command fibril-faultfs mounts the fault-injecting FUSE file system of
// internal/faultfs: a passthrough of -backing at -mount that keeps track of
// unsynced writes, drops them on "powercut", and fails fsyncs or writes on
// command. It is controlled over a unix socket (-control), one command per
// line (see internal/faultfs control.go):
//
//	fibril-faultfs -backing /tmp/disk -mount /tmp/data -control /tmp/ffs.sock &
//	echo "fail-sync EIO" | socat - UNIX-CONNECT:/tmp/ffs.sock
//
// It prints one JSON line once mounted ({"mount":..., "control":...}) and
// unmounts on SIGINT or SIGTERM. Needs root and /dev/fuse.
//
// Exit codes: 0 unmounted cleanly, 1 runtime failure, 2 bad usage.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/fibrilmq/fibril/internal/faultfs"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, nil)) }

// run mounts and serves until a signal arrives on sigs (nil: SIGINT and
// SIGTERM).
func run(args []string, stdout, stderr io.Writer, sigs chan os.Signal) int {
	fs := flag.NewFlagSet("fibril-faultfs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	backing := fs.String("backing", "", "the directory whose files are served (required)")
	mount := fs.String("mount", "", "the mount point, an existing empty directory (required)")
	control := fs.String("control", "", "the unix socket for control commands (required)")
	maxUnsynced := fs.Int64("max-unsynced", 256<<20, "bytes of old data kept for unsynced writes")
	debug := fs.Bool("debug", false, "log every FUSE request")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *backing == "" || *mount == "" || *control == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: fibril-faultfs -backing dir -mount dir -control socket")
		return 2
	}
	if err := faultfs.Available(); err != nil {
		fmt.Fprintf(stderr, "fibril-faultfs: %v\n", err)
		return 1
	}
	_ = os.Remove(*control)
	ln, err := net.Listen("unix", *control)
	if err != nil {
		fmt.Fprintf(stderr, "fibril-faultfs: %v\n", err)
		return 1
	}
	defer ln.Close()
	f, err := faultfs.Mount(*backing, *mount, faultfs.Options{MaxUnsynced: *maxUnsynced, Debug: *debug})
	if err != nil {
		fmt.Fprintf(stderr, "fibril-faultfs: %v\n", err)
		return 1
	}
	go func() { _ = f.Serve(ln) }()
	if sigs == nil {
		sigs = make(chan os.Signal, 1)
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
		defer signal.Stop(sigs)
	}
	b, _ := json.Marshal(map[string]any{"mount": *mount, "control": *control, "pid": os.Getpid()})
	fmt.Fprintf(stdout, "%s\n", b)
	<-sigs
	if err := f.Unmount(); err != nil {
		fmt.Fprintf(stderr, "fibril-faultfs: %v\n", err)
		return 1
	}
	return 0
}
