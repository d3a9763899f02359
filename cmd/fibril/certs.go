package main

// fibril certs: a cluster CA and a certificate per node (package
// certgen), for trying a cluster on one machine (README "Running a
// cluster"). A deployment may bring certificates from its own PKI.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/fibrilmq/fibril/server/cluster/certgen"
)

func cmdCerts(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("certs", stderr)
	dir := fs.String("dir", "fibril-certs", "directory to write ca.pem, <node>.pem and <node>-key.pem into")
	days := fs.Int("days", 365, "validity in days")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	names := fs.Args()
	if len(names) == 0 || *days < 1 {
		fmt.Fprintln(stderr, "fibril certs: name at least one node, and --days of 1 or more")
		return 2
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		fmt.Fprintf(stderr, "fibril certs: %v\n", err)
		return 1
	}
	paths, err := certgen.WriteCluster(*dir, time.Duration(*days)*24*time.Hour, names...)
	if err != nil {
		fmt.Fprintf(stderr, "fibril certs: %v\n", err)
		return 1
	}
	for _, n := range slices.Sorted(maps.Keys(paths)) {
		p := paths[n]
		fmt.Fprintf(stdout, "%s: --cluster-ca %s --cluster-cert %s --cluster-key %s\n", n, p.CA, p.Cert, p.Key)
	}
	return 0
}
