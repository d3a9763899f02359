package tui

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/fibrilmq/fibril/protocol"
)

// ErrInvalidOptions is wrapped by every error Run returns for bad Options.
var ErrInvalidOptions = errors.New("tui: invalid options")

// Options configures Run.
type Options struct {
	// URL is the server: "host:port" or "nats://[user:pass@|token@]host:port".
	URL string
	// Token, User and Pass authenticate (they override credentials in URL).
	Token, User, Pass string
	// Interval is how often the screen refreshes; default 1s.
	Interval time.Duration
	// Burst is how many messages one press of p publishes (and c consumes);
	// default 100.
	Burst int
	// DemoSubject is where p publishes when no topic is selected; default
	// "fibril.demo" (p creates its topic when missing).
	DemoSubject string
	// Input and Output are the terminal; default stdin and stdout.
	Input  io.Reader
	Output io.Writer
	// AltScreen draws on the terminal's alternate screen (restored on exit).
	AltScreen bool
	// Timeout bounds dialing and each wire call; default 10s.
	Timeout time.Duration
}

func (o *Options) fill() error {
	if o.URL == "" {
		return fmt.Errorf("%w: URL is empty", ErrInvalidOptions)
	}
	if o.Interval == 0 {
		o.Interval = time.Second
	}
	if o.Interval < 50*time.Millisecond {
		return fmt.Errorf("%w: Interval %s is below 50ms", ErrInvalidOptions, o.Interval)
	}
	if o.Burst == 0 {
		o.Burst = 100
	}
	if o.Burst < 0 || o.Burst > 100000 {
		return fmt.Errorf("%w: Burst %d is outside 1..100000", ErrInvalidOptions, o.Burst)
	}
	if o.DemoSubject == "" {
		o.DemoSubject = "fibril.demo"
	}
	if err := protocol.CheckSubject([]byte(o.DemoSubject), false); err != nil {
		return fmt.Errorf("%w: DemoSubject: %w", ErrInvalidOptions, err)
	}
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	return nil
}

// Run connects to the server and runs the terminal UI until the user quits
// (q, Esc, Ctrl+C) or ctx ends; both return nil. It fails at once with an
// error wrapping ErrInvalidOptions or the dial/CONNECT error. opts is not
// modified.
func Run(ctx context.Context, opts Options) error {
	if err := opts.fill(); err != nil {
		return err
	}
	c, err := dial(ctx, opts)
	if err != nil {
		return err
	}
	defer c.close()
	popts := []tea.ProgramOption{tea.WithContext(ctx)}
	if opts.Input != nil {
		popts = append(popts, tea.WithInput(opts.Input))
	}
	if opts.Output != nil {
		popts = append(popts, tea.WithOutput(opts.Output))
	}
	if opts.AltScreen {
		popts = append(popts, tea.WithAltScreen())
	}
	m := newModel(c, opts)
	_, err = tea.NewProgram(m, popts...).Run()
	if err != nil && !(errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil) {
		return fmt.Errorf("tui: %w", err)
	}
	return m.removeDemoGroups()
}
