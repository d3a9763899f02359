// Package e2e holds end-to-end tests that build the real fibril binary and
// drive it over loopback like any client would: crash safety under SIGKILL
// and the command-line contract (--ready-json). It has no non-test code.
package e2e
