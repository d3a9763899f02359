package main

// fibril tui: the terminal UI (package tui) against a running server.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/fibrilmq/fibril/tui"
)

func cmdTUI(args []string, stdout, stderr io.Writer) int {
	return runTUI(args, os.Stdin, stdout, stderr)
}

// runTUI parses the flags and runs the UI on in/out until the user quits
// or SIGINT/SIGTERM. Exit codes as for every command.
func runTUI(args []string, in io.Reader, out, stderr io.Writer) int {
	fs := newFlagSet("tui", stderr)
	cf := addClientFlags(fs)
	interval := fs.Duration("interval", time.Second, "screen refresh interval")
	burst := fs.Int("burst", 100, "messages one press of p publishes (and c consumes)")
	alt := fs.Bool("alt-screen", true, "draw on the terminal's alternate screen")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "fibril tui: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err := tui.Run(ctx, tui.Options{
		URL: cf.url, Token: cf.token, User: cf.user, Pass: cf.pass,
		Interval: *interval, Burst: *burst, AltScreen: *alt, Timeout: cf.timeout,
		Input: in, Output: out,
	})
	switch {
	case errors.Is(err, tui.ErrInvalidOptions):
		fmt.Fprintf(stderr, "fibril tui: %s\n", errorText(err))
		return 2
	case err != nil:
		return fail(stderr, "tui", err)
	}
	return 0
}
