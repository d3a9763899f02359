// Command fibril runs the Fibril broker (`fibril serve`, with the HTTP admin
// listener under --http) and offers a small client for trying it
// (`fibril pub|sub|poll|topics`) and a terminal UI (`fibril tui`).
//
// `fibril serve` maps flags, FIBRIL_* environment variables and an optional
// JSON config file onto server.Options, then runs the server until SIGINT or
// SIGTERM (a second signal forces exit). Precedence, lowest first: built-in
// defaults, config file, environment, flags. See `fibril serve -h`.
//
// `fibril verify` reads every file of a stopped server's data directory and
// exits 0 (nothing but notes), 10 (orphaned topic directory), 11 (consumer
// state damaged), 12 (messages damaged or missing) or 13 (catalog); 1 when
// it cannot read (a server has the directory open). `fibril repair`
// quarantines the damage and lists what each group loses (0 done, 1 failed).
//
// Exit codes of serve: 0 clean shutdown, 1 runtime failure, 2 bad usage or config,
// 3 refused to start because stored data is damaged or missing (the
// message names the file, offset and sequence; `fibril verify` and
// `fibril repair` are the way out, README "Damaged data").
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"reflect"
	"syscall"

	"github.com/fibrilmq/fibril/server"
	"github.com/fibrilmq/fibril/server/broker"
)

// exitRefused is the exit code of a start refused because stored data is
// damaged or missing.
const exitRefused = 3

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stdout, stderr)
	case "pub":
		return cmdPub(args[1:], stdout, stderr)
	case "sub":
		return cmdSub(args[1:], stdout, stderr)
	case "poll":
		return cmdPoll(args[1:], stdout, stderr)
	case "topics":
		return cmdTopics(args[1:], stdout, stderr)
	case "groups":
		return cmdGroups(args[1:], stdout, stderr)
	case "tui":
		return cmdTUI(args[1:], stdout, stderr)
	case "verify":
		return cmdVerify(args[1:], stdout, stderr)
	case "repair":
		return cmdRepair(args[1:], stdout, stderr)
	case "try-cluster":
		return cmdTryCluster(args[1:], stdout, stderr)
	case "certs":
		return cmdCerts(args[1:], stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, versionLine())
		return 0
	case "-h", "--help", "help":
		usage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "fibril: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

// serve runs the broker. Exit code per the package doc.
func serve(args []string, stdout, stderr io.Writer) int {
	opts, sc, err := serveOptions(args, os.LookupEnv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "fibril serve: %v\n", err)
		return 2
	}
	opts.Logger = newLogger(stderr, sc.logLevel)
	stopHooks, err := testHooks(&opts, os.LookupEnv)
	defer stopHooks()
	if err != nil {
		fmt.Fprintf(stderr, "fibril serve: %v\n", err)
		return 2
	}
	// server.New opens (and creates) the data folder; a taken port should
	// not leave an empty ./fibril-data behind, so the listeners are tried
	// first.
	if err := checkListeners(opts); err != nil {
		fmt.Fprintf(stderr, "fibril serve: %v\n", err)
		return 1
	}
	srv, err := server.New(opts)
	if err != nil {
		fmt.Fprintf(stderr, "fibril serve: %s\n", errorText(err))
		return 2
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		sig, ok := <-sigs
		if !ok {
			return
		}
		opts.Logger.Info("signal received: shutting down gracefully (send again to force)", "signal", sig.String())
		cancel()
		if sig, ok = <-sigs; ok {
			opts.Logger.Error("second signal: forcing exit", "signal", sig.String())
			os.Exit(1)
		}
	}()

	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	select {
	case err := <-done:
		if broker.IsDamage(err) {
			fmt.Fprintf(stderr, "fibril serve: refused to start: %v\n"+
				"fibril serve: nothing was changed; see what is damaged with `fibril verify --data %s`, then restore the files or run `fibril repair --data %s`\n",
				err, opts.DataDir, opts.DataDir)
			return exitRefused
		}
		fmt.Fprintf(stderr, "fibril serve: %s\n", errorText(err))
		return 1
	case <-srv.Ready():
	}
	announce(stdout, srv, opts, sc.readyJSON)
	if err := <-done; err != nil {
		fmt.Fprintf(stderr, "fibril serve: %s\n", errorText(err))
		return 1
	}
	return 0
}

// newLogger is the server's text logger on w. Attributes whose value is
// nil are left out, so that the start-up line names the TLS and HTTP
// listeners only when they are on (not "tls=<nil> http=<nil>").
func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level, ReplaceAttr: dropNil}))
}

// dropNil drops attributes whose value is a nil interface or pointer.
func dropNil(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() != slog.KindAny {
		return a
	}
	v := a.Value.Any()
	if v == nil {
		return slog.Attr{}
	}
	if rv := reflect.ValueOf(v); (rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface) && rv.IsNil() {
		return slog.Attr{}
	}
	return a
}

// announce prints where the server listens: one JSON line for harnesses
// with --ready-json, a sentence for people otherwise.
func announce(w io.Writer, srv *server.Server, opts server.Options, readyJSON bool) {
	data := opts.DataDir
	if abs, err := filepath.Abs(data); err == nil {
		data = abs
	}
	if readyJSON {
		line := map[string]any{"addr": srv.Addr().String(), "server_id": srv.ID(), "data_dir": data, "pid": os.Getpid()}
		if a := srv.TLSAddr(); a != nil {
			line["tls_addr"] = a.String()
		}
		if a := srv.HTTPAddr(); a != nil {
			line["http"] = "http://" + a.String()
		}
		if opts.NoBroker {
			line["data_dir"] = nil
		}
		b, _ := json.Marshal(line)
		fmt.Fprintf(w, "%s\n", b)
		return
	}
	fmt.Fprintf(w, "fibril %s listening on nats://%s", server.Version, srv.Addr())
	if a := srv.TLSAddr(); a != nil {
		fmt.Fprintf(w, " and tls://%s", a)
	}
	if a := srv.HTTPAddr(); a != nil {
		fmt.Fprintf(w, ", admin on http://%s", a)
	}
	if opts.NoBroker {
		fmt.Fprintf(w, ", durable engine off\n")
		return
	}
	fmt.Fprintf(w, ", data in %s\n", data)
}
