package main

// fibril try-cluster: a cluster of 3 (or 5) nodes in one process, for
// trying a cluster on one machine (README "Running a cluster"): a CA
// and node certificates in <dir>/certs, node i's data in <dir>/n<i>,
// clients on 127.0.0.1:<port>..<port>+n-1, cluster links on
// 127.0.0.1:<port>+1000.. . Each node is the same server `fibril serve
// --cluster-*` runs; only the process is shared. Ctrl+C stops them all.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/fibrilmq/fibril/server"
	"github.com/fibrilmq/fibril/server/cluster"
	"github.com/fibrilmq/fibril/server/cluster/certgen"
	"github.com/fibrilmq/fibril/server/cluster/transport"
)

func cmdTryCluster(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("try-cluster", stderr)
	nodes := fs.Int("nodes", 3, "nodes in the cluster: 3 or 5")
	dir := fs.String("dir", "fibril-cluster", "directory for the certificates and each node's data")
	port := fs.Int("port", 4222, "client port of the first node; node i listens on port+i-1, its cluster link on port+1000+i-1 (0, or FIBRIL_LISTEN with port 0: free ports)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if l, ok := os.LookupEnv("FIBRIL_LISTEN"); ok && strings.HasSuffix(l, ":0") && !flagGiven(fs, "port") {
		*port = 0
	}
	if (*nodes != 3 && *nodes != 5) || *port < 0 || *port+1000+*nodes > 65535 || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "fibril try-cluster: --nodes is 3 or 5, --port leaves room for port+1000+nodes, no arguments")
		return 2
	}
	names := make([]string, *nodes)
	for i := range names {
		names[i] = fmt.Sprintf("n%d", i+1)
	}
	certs := filepath.Join(*dir, "certs")
	if err := os.MkdirAll(certs, 0o755); err != nil {
		fmt.Fprintf(stderr, "fibril try-cluster: %v\n", err)
		return 1
	}
	paths, err := certgen.WriteCluster(certs, 30*24*time.Hour, names...)
	if err != nil {
		fmt.Fprintf(stderr, "fibril try-cluster: %v\n", err)
		return 1
	}
	logger := newLogger(stderr, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		if _, ok := <-sigs; ok {
			cancel()
		}
	}()
	clients, links := make([]string, *nodes), make([]string, *nodes)
	for i := range names {
		clients[i], links[i] = fmt.Sprintf("127.0.0.1:%d", *port+i), fmt.Sprintf("127.0.0.1:%d", *port+1000+i)
		if *port == 0 {
			clients[i] = "127.0.0.1:0"
			if links[i], err = freePort(); err != nil {
				fmt.Fprintf(stderr, "fibril try-cluster: %v\n", err)
				return 1
			}
		}
	}
	var srvs []*server.Server
	done := make(chan error, *nodes)
	for i, n := range names {
		var peers []cluster.PeerConfig
		for j, o := range names {
			if o != n {
				peers = append(peers, cluster.PeerConfig{Name: o, Addr: links[j]})
			}
		}
		opts := server.DefaultOptions()
		opts.Listen = clients[i]
		opts.DataDir = filepath.Join(*dir, n)
		opts.ServerName = n
		opts.Logger = logger.With("node", n)
		opts.Cluster = &server.ClusterOptions{Name: n, Listen: links[i], Peers: peers,
			TLS: transport.TLSFiles(paths[n])}
		srv, err := server.New(opts)
		if err != nil {
			fmt.Fprintf(stderr, "fibril try-cluster: node %s: %s\n", n, errorText(err))
			cancel()
			return 2
		}
		srvs = append(srvs, srv)
		go func() { done <- srv.Run(ctx) }()
	}
	var urls []string
	for _, srv := range srvs {
		select {
		case err := <-done:
			cancel()
			fmt.Fprintf(stderr, "fibril try-cluster: %s\n", errorText(err))
			return 1
		case <-srv.Ready():
			urls = append(urls, "nats://"+srv.Addr().String())
		}
	}
	abs, _ := filepath.Abs(*dir)
	fmt.Fprintf(stdout, "fibril %s cluster of %d nodes listening on %s, data in %s\n", server.Version, *nodes, strings.Join(urls, ", "), abs)
	code := 0
	for range srvs {
		if err := <-done; err != nil {
			fmt.Fprintf(stderr, "fibril try-cluster: %s\n", errorText(err))
			code = 1
		}
	}
	return code
}

// freePort returns a loopback address whose port the kernel picked, freed
// for a node's cluster link to listen on.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// flagGiven reports whether name was set on the command line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}
