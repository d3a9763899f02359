#!/usr/bin/env bash
# bench/cluster.sh — replicated W1 (issue 26): a 3-node Fibril cluster
# against a 3-node NATS JetStream cluster with an R3 stream, in one run, on
# this machine, with the same tool (cmd/fibril-bench) and verification, and
# single-node Fibril W1 for the replicated/single ratio. Prints one table
# (medians of REPS interleaved runs) and writes it with every raw JSON
# result under $OUT.
#
#   bash bench/cluster.sh                 # 3 reps, 100k messages (about 3 min on 2 vCPUs; 5 reps 3.5 min)
#   bash bench/cluster.sh --quick         # 1 rep, small counts (about 1 min), a smoke test
#   bash bench/cluster.sh --reps 5 --msgs 200000 --out /tmp/clb
#
# W1: 1 KiB, 1 publisher with pipelined confirms (window 1,024) + 1 pull
# consumer acking; each rep runs, in this order, on fresh data dirs:
#   single      one `fibril serve` (fibril-bench starts it), durability group
#   r3leader    3 `fibril serve --cluster-*` processes (mutual TLS, certs
#               from `fibril certs`), every topic on all 3: a confirm means a
#               quorum fsynced it; the clients connect to partition 0's leader
#   r3follower  the same, clients on a follower (forwarded to the leader)
#   natsr3      3 nats-server processes (a route cluster), JetStream file
#               storage, R3 work-queue stream, default sync (every 2 min);
#               clients on the stream's and the consumer's leaders
#   natsr3sync  the same with jetstream { sync_interval: always }
# Every process this script starts is stopped by PID (SIGTERM, SIGKILL after
# 10 s); a trap does the same for whatever still runs when it exits. Every
# wait is bounded (30 s for a node to come up, 400 s for a run).
set -u
cd "$(dirname "$0")/.."

REPS=3; N=100000; NS=5000; QUICK=0; FOLLOWER=1; OUT=/tmp/fibril-cluster-bench
NATS_VERSION=v2.15.3
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1; REPS=1; N=20000; NS=1000 ;;
    --reps) REPS=$2; shift ;;
    --msgs) N=$2; shift ;;
    --sync-msgs) NS=$2; shift ;;
    --no-follower) FOLLOWER=0 ;;
    --out) OUT=$2; shift ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "cluster.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

export PATH="$PATH:/usr/local/go/bin:$HOME/go/bin"
mkdir -p "$OUT/bin" "$OUT/runs"
rm -rf "$OUT"/runs/* "$OUT/data"

PIDS=()   # every server process started here and not yet stopped
CHILD=
cleanup() {
  [ -n "$CHILD" ] && kill "$CHILD" 2>/dev/null
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$OUT/data"
}
trap cleanup EXIT INT TERM

if ! nats-server --version 2>/dev/null | grep -q "$NATS_VERSION"; then
  echo "== installing nats-server $NATS_VERSION (go install)"
  go install "github.com/nats-io/nats-server/v2@$NATS_VERSION" || { echo "cluster.sh: cannot install nats-server" >&2; exit 1; }
fi
NATS_BIN=$(command -v nats-server)
echo "== building fibril and fibril-bench"
go build -o "$OUT/bin/fibril" ./cmd/fibril && go build -o "$OUT/bin/fibril-bench" ./cmd/fibril-bench \
  || { echo "cluster.sh: build failed" >&2; exit 1; }
FIBRIL="$OUT/bin/fibril"; BENCH="$OUT/bin/fibril-bench"
"$FIBRIL" certs --dir "$OUT/certs" n1 n2 n3 >/dev/null || { echo "cluster.sh: fibril certs failed" >&2; exit 1; }
{
  echo "date: $(date -u +%FT%TZ)"
  echo "machine: $(nproc) vCPU, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r)"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "fibril: $("$FIBRIL" version) (git $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
  echo "nats-server: $("$NATS_BIN" --version)"
  echo "reps: $REPS  msgs: $N (sync_interval always: $NS)  quick: $QUICK"
} | tee "$OUT/env.txt"
# The disk alone, before and after (fibril-bench --disk-probe: 128 KiB
# blocks written and fdatasynced back to back where the data dirs are).
probe_disk() {
  "$BENCH" --disk-probe 5s --disk-probe-dir "$OUT" --json > "$OUT/runs/disk.$1.json" 2>/dev/null \
    && echo "disk $1: $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("%.0f fdatasyncs/s, p50 %.2f ms, p99 %.2f ms" % (r["fsyncs_per_sec"], r["p50_us"]/1e3, r["p99_us"]/1e3))' "$OUT/runs/disk.$1.json")" \
    || echo "disk $1: probe failed"
}
probe_disk before | tee -a "$OUT/env.txt"

# freeports K: K free loopback ports, one a line.
freeports() {
  python3 - "$1" <<'PY'
import socket, sys
ss = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in ss: s.bind(("127.0.0.1", 0))
for s in ss: print(s.getsockname()[1])
PY
}
# cputicks PID: the process's user+system clock ticks so far.
cputicks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }

# stop_all: SIGTERM to every started server, SIGKILL after 10 s.
stop_all() {
  local p i
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do
    for i in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  PIDS=()
  rm -rf "$OUT/data"
}

# start_fibril: 3 `fibril serve` nodes; sets URLS and HTTPS (comma lists).
start_fibril() {
  local ports=($(freeports 9)) i j peers line
  URLS=; HTTPS=
  for i in 1 2 3; do
    peers=
    for j in 1 2 3; do
      [ "$j" = "$i" ] || peers="$peers${peers:+,}n$j@127.0.0.1:${ports[$((2 + j))]}"
    done
    mkdir -p "$OUT/data/n$i"
    "$FIBRIL" serve --listen "127.0.0.1:${ports[$((i - 1))]}" --http "127.0.0.1:${ports[$((5 + i))]}" \
      --data "$OUT/data/n$i" --ready-json --log-level warn --auto-create='>' \
      --cluster-name "n$i" --cluster-listen "127.0.0.1:${ports[$((2 + i))]}" --cluster-peers "$peers" \
      --cluster-ca "$OUT/certs/ca.pem" --cluster-cert "$OUT/certs/n$i.pem" --cluster-key "$OUT/certs/n$i-key.pem" \
      > "$OUT/data/n$i.ready" 2> "$OUT/runs/fibril-n$i.log" &
    PIDS+=($!)
    URLS="$URLS${URLS:+,}nats://127.0.0.1:${ports[$((i - 1))]}"
    HTTPS="$HTTPS${HTTPS:+,}http://127.0.0.1:${ports[$((5 + i))]}"
  done
  for i in 1 2 3; do
    for j in $(seq 300); do grep -q '"addr"' "$OUT/data/n$i.ready" 2>/dev/null && break; sleep 0.1; done
    grep -q '"addr"' "$OUT/data/n$i.ready" || { echo "   fibril node n$i not ready in 30 s: $(tail -c 300 "$OUT/runs/fibril-n$i.log")"; return 1; }
  done
}

# start_nats SYNC: 3 nats-server nodes in one route cluster (SYNC=always:
# sync_interval always); sets URLS. Ready when every node's /healthz says
# JetStream is current.
start_nats() {
  local ports=($(freeports 9)) i j routes conf
  URLS=
  for i in 1 2 3; do
    routes=
    for j in 1 2 3; do
      [ "$j" = "$i" ] || routes="$routes${routes:+, }nats-route://127.0.0.1:${ports[$((2 + j))]}"
    done
    mkdir -p "$OUT/data/n$i"
    conf="$OUT/data/n$i.conf"
    {
      echo "server_name: n$i"
      echo "listen: 127.0.0.1:${ports[$((i - 1))]}"
      echo "http: 127.0.0.1:${ports[$((5 + i))]}"
      echo "jetstream {"
      echo "  store_dir: \"$OUT/data/n$i\""
      [ "$1" = always ] && echo "  sync_interval: always"
      echo "}"
      echo "cluster {"
      echo "  name: bench"
      echo "  listen: 127.0.0.1:${ports[$((2 + i))]}"
      echo "  routes: [$routes]"
      echo "}"
    } > "$conf"
    "$NATS_BIN" -c "$conf" > /dev/null 2> "$OUT/runs/nats-n$i.log" &
    PIDS+=($!)
    URLS="$URLS${URLS:+,}nats://127.0.0.1:${ports[$((i - 1))]}"
  done
  for i in 1 2 3; do
    for j in $(seq 300); do
      curl -sf "http://127.0.0.1:${ports[$((5 + i))]}/healthz" >/dev/null 2>&1 && break; sleep 0.1
    done
    curl -sf "http://127.0.0.1:${ports[$((5 + i))]}/healthz" >/dev/null 2>&1 \
      || { echo "   nats node n$i not healthy in 30 s: $(tail -c 300 "$OUT/runs/nats-n$i.log")"; return 1; }
  done
}

# bench ID REP VARIANT ARGS... : one run, JSON to runs/ID.VARIANT.REP.json;
# for the clusters also each node's CPU seconds over its life (cpu.txt).
FAILS=0
bench() {
  local id=$1 rep=$2 variant=$3; shift 3
  local f="$OUT/runs/$id.$variant.$rep"
  sync; sleep 1   # the run before deleted its data: let the disk settle
  case "$variant" in
    r3leader|r3follower) start_fibril || { FAILS=$((FAILS + 1)); stop_all; return; } ;;
    natsr3) start_nats default || { FAILS=$((FAILS + 1)); stop_all; return; } ;;
    natsr3sync) start_nats always || { FAILS=$((FAILS + 1)); stop_all; return; } ;;
  esac
  local sys=(--system fibril --fibril-bin "$FIBRIL")
  case "$variant" in
    r3leader) sys=(--url "$URLS" --http-urls "$HTTPS" --target leader) ;;
    r3follower) sys=(--url "$URLS" --http-urls "$HTTPS" --target follower) ;;
    natsr3|natsr3sync) sys=(--system nats --url "$URLS" --nats-replicas 3) ;;
  esac
  timeout 400 "$BENCH" "${sys[@]}" --json --progress 0 --timeout 300s "$@" > "$f.json" 2> "$f.err" &
  CHILD=$!
  wait "$CHILD"; local rc=$?
  CHILD=
  local p cpu=
  for p in "${PIDS[@]}"; do cpu="$cpu $(cputicks "$p")"; done
  echo "$(getconf CLK_TCK)$cpu" > "$f.cpu"
  stop_all
  if [ $rc -ne 0 ]; then
    FAILS=$((FAILS + 1))
    echo "   FAIL $id $variant rep $rep (exit $rc): $(tail -c 300 "$f.err")"
    mv "$f.json" "$f.failed.json" 2>/dev/null
  fi
  python3 - "$f" "$variant" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1] + ".json"))
except Exception:
    sys.exit(0)
c = r.get("cluster") or {}
cpu = open(sys.argv[1] + ".cpu").read().split()
tck, ticks = float(cpu[0]), [int(x) for x in cpu[1:]]
extra = ""
if c:
    extra = "  leader %s%s  PUBs/node %s%s  node CPU s %s" % (c["leader"].split(":")[1], " moved" if c.get("leader_moved") else "",
        c.get("in_msgs") or "-", "  ack retries %d" % r["ack_retries"] if r.get("ack_retries") else "",
        " ".join("%.1f" % (t / tck) for t in ticks))
print("   %-10s acked %8.0f/s  p50 %7.2f ms  p99 %7.2f ms  confirm p50 %6.2f ms  %s%s" % (
    sys.argv[2], r.get("acked_msgs_per_sec") or r["con_msgs_per_sec"], r["latency_us"]["p50"] / 1e3,
    r["latency_us"]["p99"] / 1e3, ((r.get("confirm_latency_us") or {}).get("p50") or 0) / 1e3,
    "ok" if r["verify"]["ok"] else "VERIFY FAILED", extra))
PY
}

T0=$(date +%s)
for rep in $(seq "$REPS"); do
  echo "== rep $rep/$REPS ($(( $(date +%s) - T0 )) s, load $(cut -d' ' -f1 /proc/loadavg))"
  W1=(--msgs "$N" --size 1024 --durability group)
  bench w1 "$rep" single "${W1[@]}"
  bench w1 "$rep" r3leader "${W1[@]}"
  [ "$FOLLOWER" = 1 ] && bench w1 "$rep" r3follower "${W1[@]}"
  bench w1 "$rep" natsr3 "${W1[@]}"
  bench w1 "$rep" natsr3sync --msgs "$NS" --size 1024
done
echo "== done in $(( $(date +%s) - T0 )) s; load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/env.txt"
probe_disk after | tee -a "$OUT/env.txt"

python3 - "$OUT" "$REPS" <<'PY' | tee "$OUT/summary.md"
import glob, json, statistics, sys
out, reps = sys.argv[1], int(sys.argv[2])
def runs(var):
    rs = []
    for f in sorted(glob.glob(f"{out}/runs/w1.{var}.*.json")):
        if ".failed." in f: continue
        try: rs.append(json.load(open(f)))
        except Exception: pass
    return rs
rate = lambda r: r.get("acked_msgs_per_sec") or r["con_msgs_per_sec"]
def med(var, key=rate):
    v = [x for x in (key(r) for r in runs(var)) if x is not None]
    return (statistics.median(v), min(v), max(v), len(v)) if v else None
def fmt(m, unit=""):
    if m is None: return "—"
    v, lo, hi, n = m
    if unit == "ms": return f"{v:,.2f} ms" + (f" ({lo:,.2f}–{hi:,.2f})" if n > 1 else "")
    return f"{v:,.0f}" + (f" ({lo:,.0f}–{hi:,.0f})" if n > 1 else "")
def ratio(a, b):
    return "—" if not a or not b or not b[0] else f"{a[0] / b[0]:.2f}×"
p50 = lambda r: r["latency_us"]["p50"] / 1e3
p99 = lambda r: r["latency_us"]["p99"] / 1e3
cp50 = lambda r: (r.get("confirm_latency_us") or {}).get("p50", 0) / 1e3 or None
names = [("single", "Fibril, one node"), ("r3leader", "Fibril, 3 nodes, clients on the leader"),
         ("r3follower", "Fibril, 3 nodes, clients on a follower (forwarded)"),
         ("natsr3", "JetStream R3, default sync"), ("natsr3sync", "JetStream R3, sync_interval: always")]
print(f"Replicated W1, medians of {reps} run(s) (min–max): 1 KiB, 1 publisher (confirms pipelined, window 1,024) + 1 consumer acking;")
print("end to end = first publish -> the server reports the group empty (every message delivered, acked, ack applied).\n")
idle = lambda r: (r.get("machine_cpu") or {}).get("idle_pct")
print("| system | msgs/s end to end | p50 end to end | p99 end to end | p50 publish -> confirm | machine CPU idle |")
print("|---|---:|---:|---:|---:|---:|")
for v, label in names:
    if runs(v):
        i = med(v, idle)
        print(f"| {label} | {fmt(med(v))} | {fmt(med(v, p50), 'ms')} | {fmt(med(v, p99), 'ms')} | {fmt(med(v, cp50), 'ms')} | "
              + ("—" if i is None else f"{i[0]:.1f} %") + " |")
s, l, fo, n, a = med("single"), med("r3leader"), med("r3follower"), med("natsr3"), med("natsr3sync")
print()
print(f"- Fibril R3 (leader) / JetStream R3 default sync: {ratio(l, n)} (target ≥ 2×): {'MET' if l and n and l[0] >= 2 * n[0] else 'NOT MET'}")
print(f"- Fibril R3 (leader) / JetStream R3 sync_interval always: {ratio(l, a)}")
print(f"- Fibril R3 (leader) / Fibril one node: {ratio(l, s)} (target ≥ 0.5×): {'MET' if l and s and l[0] >= 0.5 * s[0] else 'NOT MET'}")
if fo: print(f"- Fibril R3 through a follower / on the leader: {ratio(fo, l)}")
moved = sum(1 for v in ("r3leader", "r3follower", "natsr3", "natsr3sync") for r in runs(v) if (r.get("cluster") or {}).get("leader_moved"))
print(f"- runs whose leader moved during the run: {moved}")
# Where a replicated publish's time goes: the leader's stage accounting
# (fibril_stage_seconds, sampled publishes, cumulative from the PUB parsed)
# in the median r3leader run.
rs = sorted(runs("r3leader"), key=rate)
if rs and rs[len(rs) // 2].get("server_stages"):
    r = rs[len(rs) // 2]
    st = r["server_stages"]
    print(f"\nLeader's stages in the median Fibril R3 run ({rate(r):,.0f} msgs/s), µs from the chain's start, p50 / p99:")
    print("  " + "; ".join(f"{x.get('chain', '')}/{x['stage']} {x['p50_us']:,.0f} / {x['p99_us']:,.0f}" for x in st["stages"] if x["count"]))
    for k in ("gc_pause", "sched_latency"):
        if st.get(k): print(f"  {k}: p99 {st[k]['p99_us']:,.0f} µs")
    f = r.get("server_fsyncs")
    if f: print(f"  leader's fibril_fsync_seconds: {f.get('count', 0):,} fsyncs, {f.get('seconds', 0):.2f} s in them, "
                f"mean {f.get('seconds', 0) / max(f.get('count', 1), 1) * 1e3:.1f} ms")
cpu = {}
for v in ("single", "r3leader", "r3follower", "natsr3", "natsr3sync"):
    per = []
    for fj in glob.glob(f"{out}/runs/w1.{v}.*.json"):
        try:
            r, c = json.load(open(fj)), open(fj[:-5] + ".cpu").read().split()
        except Exception: continue
        # the clusters: each node's ticks (cpu file); one node: fibril-bench's server_cpu_s
        t = [int(x) / float(c[0]) for x in c[1:]] or [r.get("server_cpu_s", 0)]
        if sum(t) and r.get("published"): per.append(sum(t) / r["published"] * 1e6)
    if per: cpu[v] = statistics.median(per)
if cpu:
    print("\nServer CPU per message, all nodes, start to stop (µs): " + ", ".join(f"{k} {v:,.1f}" for k, v in cpu.items()))
PY
if [ "$FAILS" -gt 0 ]; then echo "cluster.sh: $FAILS run(s) failed (see $OUT/runs/*.err)" >&2; exit 1; fi
