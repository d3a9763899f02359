package main

import (
	"fmt"
	"io"
)

func cmdPub(_ []string, _, stderr io.Writer) int    { fmt.Fprintln(stderr, "not yet"); return 2 }
func cmdSub(_ []string, _, stderr io.Writer) int    { fmt.Fprintln(stderr, "not yet"); return 2 }
func cmdPoll(_ []string, _, stderr io.Writer) int   { fmt.Fprintln(stderr, "not yet"); return 2 }
func cmdTopics(_ []string, _, stderr io.Writer) int { fmt.Fprintln(stderr, "not yet"); return 2 }
