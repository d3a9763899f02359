package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fibrilmq/fibril/internal/faultrun"
	"github.com/fibrilmq/fibril/internal/history"
)

func TestFibrilFaultsUsage(t *testing.T) {
	for _, args := range [][]string{
		{"-runs", "0"},
		{"-duration", "0s"},
		{"-faults", "kill,meteor"},
		{"extra"},
		{"-nodes", "2"},
		{"-nodes", "3", "-netns"},
	} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, errb.String())
		}
	}
}

func TestFibrilFaultsRow(t *testing.T) {
	r := history.Check(nil, history.Config{}) // no "done" phase: incomplete, so invalid
	rep := &faultrun.Report{Result: r, Injected: []string{"kill", "powercut", "kill"}}
	got := row(3, 42, time.Minute, rep)
	for _, want := range []string{"| 3 | 42 | 1m0s | kill 2, powercut 1 |", "**INVALID**"} {
		if !strings.Contains(got, want) {
			t.Fatalf("row %q lacks %q", got, want)
		}
	}
	if n := strings.Count(got, "|"); n != 8+len(history.Categories())+1 {
		t.Fatalf("row has %d cells separators: %q", n, got)
	}
}
