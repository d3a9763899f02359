// Package stocknats drives the official NATS Go client (nats.go, a test
// dependency in go.mod) against `fibril serve` and, as a control, against
// nats-server (`go install github.com/nats-io/nats-server/v2@v2.15.3`;
// .ci/run installs it, $NATS_SERVER_BIN names another): the NATS core
// features a NATS user relies on, each run against both servers with the
// same expectations, plus Fibril's own promises to stock clients (a flood
// of subjects stores nothing, a fast publisher is slowed, not cut). The
// nats.js, nats-py and `nats` CLI suites live in sdk-js/test,
// sdk-python/tests and bench/natscli.sh. It has no non-test code.
package stocknats
