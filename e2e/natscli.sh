#!/usr/bin/env bash
# e2e/natscli.sh — the stock `nats` CLI (natscli v0.5.0) against `fibril
# serve` and, as a control, nats-server v2.15.3: pub/sub, request/reply,
# no responders, JetStream (`nats stream add/info/ls/rm`, `nats consumer
# add/next/info`; nats-server runs with -js as the control), and
# TLS-first (`nats --tlsfirst`) on Fibril's TLS listener. Each check runs
# against both servers and must behave the same. `make test-natscli` runs
# it; missing tools are installed with `go install` at those versions.
# Servers and subscribers it starts are stopped by PID when it exits.
set -u
cd "$(dirname "$0")/.."
export PATH="$PATH:$(go env GOPATH)/bin"
command -v nats >/dev/null || go install github.com/nats-io/natscli/nats@v0.5.0
command -v nats-server >/dev/null || go install github.com/nats-io/nats-server/v2@v2.15.3
TMP=$(mktemp -d /tmp/fibril-natscli.XXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$TMP"; }
trap cleanup EXIT
go build -o "$TMP/fibril" ./cmd/fibril || exit 1
pass=0; fail=0
check() { # check NAME COMMAND...: counts and reports
  local name=$1; shift
  if "$@" >"$TMP/out" 2>&1; then pass=$((pass + 1)); echo "ok   $name"
  else fail=$((fail + 1)); echo "FAIL $name"; sed 's/^/     /' "$TMP/out"; fi
}

start_fibril() {
  "$TMP/fibril" serve --listen 127.0.0.1:0 --data "$TMP/data-$RANDOM" --ready-json --log-level warn "$@" >"$TMP/ready" 2>"$TMP/fibril.log" &
  PIDS+=($!)
  for _ in $(seq 200); do grep -q '"addr"' "$TMP/ready" 2>/dev/null && break; sleep 0.05; done
}
start_fibril
FIBRIL="nats://$(sed -n 's/.*"addr":"\([^"]*\)".*/\1/p' "$TMP/ready")"
PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
nats-server -a 127.0.0.1 -p "$PORT" -js -sd "$TMP/js" >"$TMP/nats.log" 2>&1 &
PIDS+=($!)
NATSD="nats://127.0.0.1:$PORT"
for _ in $(seq 200); do nats -s "$NATSD" server check connection >/dev/null 2>&1 && break; sleep 0.05; done

pubsub() { # the subscriber gets what is published
  nats -s "$1" sub cli.x --count 1 --raw >"$TMP/sub.out" 2>&1 & local sp=$!
  PIDS+=("$sp")
  for _ in $(seq 100); do
    nats -s "$1" pub cli.x hello >/dev/null 2>&1
    if ! kill -0 "$sp" 2>/dev/null; then break; fi
    sleep 0.05
  done
  wait "$sp" && grep -qx hello "$TMP/sub.out"
}
reqreply() { # a reply comes back
  nats -s "$1" reply cli.svc pong >/dev/null 2>&1 & local rp=$!
  PIDS+=("$rp")
  local ok=1
  for _ in $(seq 100); do
    if nats -s "$1" req cli.svc ping --timeout 2s 2>&1 | grep -q pong; then ok=0; break; fi
    sleep 0.05
  done
  kill "$rp" 2>/dev/null
  return $ok
}
noresponders() { # "No responders" at once, not a timeout
  timeout 3 nats -s "$1" req cli.nobody x --timeout 30s 2>&1 | grep -q "No responders"
}
jetstream() { # a stream and a pull consumer through the CLI
  local s="timeout 10 nats -s $1"
  $s stream add CLI --subjects 'cli.js.>' --defaults >/dev/null &&
    $s stream ls -n 2>&1 | grep -qx CLI &&
    $s pub cli.js.x hi --jetstream 2>&1 | grep -q 'Stored in Stream: CLI Sequence: 1' &&
    $s stream info CLI 2>&1 | grep -q 'Messages: 1' &&
    $s consumer add CLI c1 --pull --defaults >/dev/null &&
    $s consumer next CLI c1 2>&1 | grep -q 'Acknowledged message' &&
    $s consumer info CLI c1 2>&1 | grep -q 'Name: c1' &&
    $s stream rm CLI -f >/dev/null &&
    ! $s stream ls -n 2>&1 | grep -qx CLI
}
for srv in "$FIBRIL fibril" "$NATSD nats-server"; do
  set -- $srv
  check "$2: pub/sub" pubsub "$1"
  check "$2: request/reply" reqreply "$1"
  check "$2: no responders at once" noresponders "$1"
  check "$2: JetStream streams and pull consumers" jetstream "$1"
done

# TLS first on Fibril's TLS listener (needs openssl for a test certificate).
if command -v openssl >/dev/null; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 -keyout "$TMP/key.pem" -out "$TMP/cert.pem" >/dev/null 2>&1
  start_fibril --tls-listen 127.0.0.1:0 --tls-cert "$TMP/cert.pem" --tls-key "$TMP/key.pem" --tls-handshake-first
  TLSADDR=$(sed -n 's/.*"tls_addr":"\([^"]*\)".*/\1/p' "$TMP/ready")
  tlsfirst() { nats -s "tls://$TLSADDR" --tlsca "$TMP/cert.pem" --tlsfirst pub cli.tls x >/dev/null 2>&1 &&
    nats -s "tls://$TLSADDR" --tlsca "$TMP/cert.pem" pub cli.tls x >/dev/null 2>&1; }
  check "fibril: --tlsfirst and classic TLS on the TLS listener" tlsfirst
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
