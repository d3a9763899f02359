#!/usr/bin/env bash
# bench/compare.sh — Fibril and NATS JetStream side by side, in one run, on
# this machine, with the same tool (cmd/fibril-bench), payload format and
# verification for both. Prints one table (medians of REPS runs) and writes
# it with every raw JSON result under $OUT.
#
#   bash bench/compare.sh                 # defaults: 3 reps, 1M backlog (about 8-10 min on 2 vCPUs)
#   bash bench/compare.sh --quick         # 1 rep, small counts (about 1-2 min), a smoke test
#   bash bench/compare.sh --reps 5 --backlog 200000 --out /tmp/cmp
#
# Servers: fibril-bench starts each server itself, for every single run, on a
# fresh temp dir on 127.0.0.1 (fibril: `fibril serve --listen 127.0.0.1:0
# --ready-json`; NATS: `nats-server -c conf` with JetStream file storage on a
# free loopback port, and a second set of runs with `sync_interval: always`),
# reads its VmHWM from /proc/<pid>/status and stops it by PID (SIGTERM, then
# SIGKILL after 10 s). The script adds a trap that kills, by PID, any
# fibril-bench it started that is still running when it exits.
#
# Every run must pass the tool's verification (all messages arrived, intact,
# none twice); a failing run is reported in the table as FAIL and the script
# exits 1 at the end.
set -u
cd "$(dirname "$0")/.."
ROOT=$(pwd)

REPS=3; BACKLOG=1000000; QUICK=0; OUT=/tmp/fibril-compare
NATS_VERSION=v2.15.3; NATS_FALLBACK=v2.15.2
NATSCLI_VERSION=v0.5.0   # the list of served versions says: skip v0.5.1
CROSS=1
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1; REPS=1; BACKLOG=100000 ;;
    --reps) REPS=$2; shift ;;
    --backlog) BACKLOG=$2; shift ;;
    --out) OUT=$2; shift ;;
    --no-crosscheck) CROSS=0 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "compare.sh: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
# scale: counts for the default-sync runs; the fsync-always NATS runs are
# about 50x slower, so they get their own small counts.
if [ "$QUICK" = 1 ]; then N=50000; NS=2000; NPLAIN=200000; NALWAYS_BACKLOG=2000
else N=200000; NS=10000; NPLAIN=1000000; NALWAYS_BACKLOG=10000; fi

export PATH="$PATH:/usr/local/go/bin:$HOME/go/bin"
mkdir -p "$OUT/bin" "$OUT/runs"
rm -f "$OUT"/runs/*.json "$OUT"/runs/*.err "$OUT"/runs/*.txt

CHILD=; NPID=
cleanup() {
  [ -n "$CHILD" ] && kill "$CHILD" 2>/dev/null
  [ -n "$NPID" ] && kill "$NPID" 2>/dev/null
}
trap cleanup EXIT INT TERM

# ---------------------------------------------------------------- tools
if ! nats-server --version 2>/dev/null | grep -q "$NATS_VERSION"; then
  echo "== installing nats-server $NATS_VERSION (go install)"
  go install "github.com/nats-io/nats-server/v2@$NATS_VERSION" \
    || go install "github.com/nats-io/nats-server/v2@$NATS_FALLBACK" \
    || { echo "compare.sh: cannot install nats-server" >&2; exit 1; }
fi
NATS_BIN=$(command -v nats-server)
if [ "$CROSS" = 1 ] && ! nats --version 2>/dev/null | grep -q "$NATSCLI_VERSION"; then
  echo "== installing natscli $NATSCLI_VERSION (go install), for the nats bench cross-check"
  go install "github.com/nats-io/natscli/nats@$NATSCLI_VERSION" || { echo "   natscli install failed: no cross-check"; CROSS=0; }
fi
echo "== building fibril and fibril-bench"
go build -o "$OUT/bin/fibril" ./cmd/fibril && go build -o "$OUT/bin/fibril-bench" ./cmd/fibril-bench \
  || { echo "compare.sh: build failed" >&2; exit 1; }
BENCH="$OUT/bin/fibril-bench"
{
  echo "date: $(date -u +%FT%TZ)"
  echo "machine: $(nproc) vCPU, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/Mem/{print $2}') GiB RAM, kernel $(uname -r)"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "fibril: $("$OUT/bin/fibril" version) (git $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
  echo "nats-server: $("$NATS_BIN" --version)"
  echo "go: $(go version)"
  echo "nats.go client: $(go list -m -f '{{.Version}}' github.com/nats-io/nats.go)"
  echo "reps: $REPS  backlog: $BACKLOG  quick: $QUICK"
} | tee "$OUT/env.txt"
# The disk of the moment, before and after the runs: a durable broker's
# latency tail is no better than its fsync's (fibril-bench --disk-probe: 128
# KiB blocks written and fdatasynced back to back, where the servers' data goes).
probe_disk() {
  "$BENCH" --disk-probe 5s --json > "$OUT/runs/disk.$1.json" 2> "$OUT/runs/disk.$1.err" \
    && echo "disk $1: $(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("fdatasync of %d KiB back to back: %.0f/s, p50 %.2f ms, p99 %.2f ms, max %.1f ms, %d over 50 ms in %.0f s" % (r["block_bytes"]>>10, r["fsyncs_per_sec"], r["p50_us"]/1e3, r["p99_us"]/1e3, r["max_us"]/1e3, r["over_50ms"], r["seconds"]))' "$OUT/runs/disk.$1.json")" \
    || echo "disk $1: probe failed ($(cat "$OUT/runs/disk.$1.err"))"
}
probe_disk before | tee -a "$OUT/env.txt"

# ---------------------------------------------------------------- runner
# bench ID REP VARIANT ARGS... : one run, JSON to runs/ID.VARIANT.REP.json
FAILS=0
bench() {
  local id=$1 rep=$2 variant=$3; shift 3
  local f="$OUT/runs/$id.$variant.$rep"
  local sys=(--system fibril --fibril-bin "$OUT/bin/fibril")
  case "$variant" in
    nats) sys=(--system nats --nats-bin "$NATS_BIN") ;;
    natsfsync) sys=(--system nats --nats-bin "$NATS_BIN" --nats-sync-always) ;;
  esac
  # Settle the disk first: the run before deleted its data directory (up to
  # a few GiB; the file system discards freed blocks), and its dirty pages
  # must not be written back during this run's fsyncs.
  sync; sleep 1
  timeout 400 "$BENCH" "${sys[@]}" --json --progress 0 --timeout 300s "$@" > "$f.json" 2> "$f.err" &
  CHILD=$!
  wait "$CHILD"; local rc=$?
  CHILD=
  if [ $rc -ne 0 ]; then
    FAILS=$((FAILS + 1))
    echo "   FAIL $id $variant rep $rep (exit $rc): $(tail -c 300 "$f.err")"
    mv "$f.json" "$f.failed.json" 2>/dev/null
  fi
  python3 - "$f.json" "$id" "$variant" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception:
    sys.exit(0)
print("   %-8s %-10s pub %9.0f/s  con %9.0f/s  acked %9.0f/s  p50 %8.2f ms  p99 %8.2f ms  rss %6.1f MiB  %s" % (
    sys.argv[2], sys.argv[3], r["pub_msgs_per_sec"], r["con_msgs_per_sec"], r.get("acked_msgs_per_sec", 0),
    r["latency_us"]["p50"] / 1e3, r["latency_us"]["p99"] / 1e3,
    max(r["server_rss_hwm_kib"], r.get("server_rss_hwm_backlog_kib", 0)) / 1024,
    "ok" if r["verify"]["ok"] else "VERIFY FAILED"))
PY
}

T0=$(date +%s)
for rep in $(seq "$REPS"); do
  echo "== rep $rep/$REPS ($(( $(date +%s) - T0 )) s)"
  # W1: 1 KiB, 1 pub + 1 consumer, confirms pipelined, fsync before confirm (group commit)
  bench w1 "$rep" fibril    --msgs "$N"  --size 1024 --durability group
  bench w1 "$rep" nats      --msgs "$N"  --size 1024
  bench w1 "$rep" natsfsync --msgs "$NS" --size 1024
  # W1 again with Fibril's Go SDK as the client (PublishAsync futures, a Fetcher with prefetch, AckAllAsync)
  bench w1sdk "$rep" fibril --client sdk --msgs "$N" --size 1024 --durability group
  # W2: 4 publishers + 4 consumers, 4 partitions
  bench w2 "$rep" fibril    --msgs "$N"  --size 1024 --pubs 4 --subs 4 --partitions 4 --durability group
  bench w2 "$rep" nats      --msgs "$N"  --size 1024 --pubs 4 --subs 4
  bench w2 "$rep" natsfsync --msgs "$NS" --size 1024 --pubs 4 --subs 4
  # W3: 16 B, group commit (Fibril) / default sync (NATS)
  bench w3 "$rep" fibril    --msgs "$((N * 2))" --size 16 --durability group
  bench w3 "$rep" nats      --msgs "$((N * 2))" --size 16
  # W3p: the plain subset at 16 B: core pub/sub, nothing stored
  bench w3p "$rep" fibril   --mode plain --msgs "$NPLAIN" --size 16
  bench w3p "$rep" nats     --mode plain --msgs "$NPLAIN" --size 16
  # W4: backlog drain: publish everything first, then consume
  bench w4 "$rep" fibril    --backlog --msgs "$BACKLOG" --size 1024 --durability group
  bench w4 "$rep" nats      --backlog --msgs "$BACKLOG" --size 1024
  bench w4 "$rep" natsfsync --backlog --msgs "$NALWAYS_BACKLOG" --size 1024
  # W5: plain NATS-style pub/sub, 1 KiB, vs NATS core
  bench w5 "$rep" fibril    --mode plain --msgs "$NPLAIN" --size 1024
  bench w5 "$rep" nats      --mode plain --msgs "$NPLAIN" --size 1024
done

# W1 latency at half of each system's median peak end-to-end rate, about 6 s
# each; the percentiles leave out the messages sent in the first second (a
# fresh stream's warm-up; fibril-bench --warmup), the whole run's are kept too
half() { python3 - "$OUT/runs" "$1" <<'PY'
import glob, json, statistics, sys
# the table's measure: end to end until every ack is applied, where known
rs = [json.load(open(f)) for f in glob.glob(f"{sys.argv[1]}/w1.{sys.argv[2]}.*.json")]
v = [r.get("acked_msgs_per_sec") or r["con_msgs_per_sec"] for r in rs]
print(int(statistics.median(v) / 2) if v else 0)
PY
}
for variant in fibril nats natsfsync; do
  rate=$(half "$variant")
  [ "$rate" -gt 0 ] || continue
  for rep in $(seq "$REPS"); do
    echo "== W1 at half peak: $variant $rate msgs/s, rep $rep"
    bench w1half "$rep" "$variant" --msgs "$((rate * 6))" --size 1024 --rate "$rate" --durability group --warmup 1s
  done
done
# Cross-check of the NATS driver: the anchors' own method (nats bench, natscli) on
# the same nats-server at the same moment: fetch (batch 500, explicit ack) waiting
# on an empty work-queue stream, async publisher (window 500) 1 s later,
# rate = N / (publisher start -> fetch exit). Compare with the W1 NATS row.
if [ "$CROSS" = 1 ]; then
  NPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  rm -rf "$OUT/natsx"; mkdir -p "$OUT/natsx"
  "$NATS_BIN" -js -a 127.0.0.1 -p "$NPORT" -sd "$OUT/natsx" > "$OUT/natsx.log" 2>&1 &
  NPID=$!
  for i in $(seq 100); do nats -s "nats://127.0.0.1:$NPORT" rtt >/dev/null 2>&1 && break; sleep 0.1; done
  U="nats://127.0.0.1:$NPORT"
  for rep in $(seq "$REPS"); do
    nats -s "$U" stream rm benchstream -f >/dev/null 2>&1
    nats -s "$U" stream add benchstream --subjects bench.js --storage file --retention work \
      --discard old --max-bytes 4GB --defaults >/dev/null
    timeout 300 nats -s "$U" bench js fetch --msgs "$N" --size 1024 --batch 500 --acks explicit --no-progress \
      > "$OUT/runs/xcheck.fetch.$rep.txt" 2>&1 & CP=$!
    sleep 1; t0=$(date +%s.%N)
    timeout 300 nats -s "$U" bench js pub async bench.js --msgs "$N" --size 1024 --batch 500 --no-progress \
      > "$OUT/runs/xcheck.pub.$rep.txt" 2>&1
    wait "$CP"; t1=$(date +%s.%N)
    awk -v n="$N" -v a="$t0" -v b="$t1" 'BEGIN{printf "%.0f\n", n/(b-a)}' > "$OUT/runs/xcheck.e2e.$rep.txt"
    echo "   xcheck   nats bench combined end to end: $(cat "$OUT/runs/xcheck.e2e.$rep.txt") msgs/s"
  done
  kill "$NPID"; wait "$NPID" 2>/dev/null; NPID=
  rm -rf "$OUT/natsx"
fi
echo "== done in $(( $(date +%s) - T0 )) s; load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/env.txt"
probe_disk after | tee -a "$OUT/env.txt"

# ---------------------------------------------------------------- table
python3 - "$OUT" "$REPS" <<'PY' | tee "$OUT/summary.md"
import glob, json, os, statistics, sys
out, reps = sys.argv[1], int(sys.argv[2])
def runs(wid, var):
    rs = []
    for f in sorted(glob.glob(f"{out}/runs/{wid}.{var}.*.json")):
        if ".failed." in f: continue
        try: rs.append(json.load(open(f)))
        except Exception: pass
    return rs
def fails(wid, var):
    return len(glob.glob(f"{out}/runs/{wid}.{var}.*.failed.json")) + \
        sum(1 for f in glob.glob(f"{out}/runs/{wid}.{var}.*.err") if os.path.getsize(f) and not os.path.exists(f[:-4] + ".json"))
def med(wid, var, key):
    rs = runs(wid, var)
    if not rs: return None
    vals = [v for v in (key(r) for r in rs) if v is not None]
    if not vals: return None
    return statistics.median(vals), min(vals), max(vals), len(vals)
def fmt(m, unit=""):
    if m is None: return "—"
    v, lo, hi, n = m
    if unit == "ms": return f"{v:,.2f} ms" + (f" ({lo:,.2f}–{hi:,.2f})" if n > 1 else "")
    if unit == "MiB": return f"{v:,.0f} MiB"
    if unit == "%": return f"{v:,.1f} %" + (f" ({lo:,.1f}–{hi:,.1f})" if n > 1 else "")
    return f"{v:,.0f}" + (f" ({lo:,.0f}–{hi:,.0f})" if n > 1 else "")
def ratio(a, b):
    if a is None or b is None or b[0] == 0: return "—"
    return f"{a[0] / b[0]:.2f}×"
con = lambda r: r.get("acked_msgs_per_sec") or r["con_msgs_per_sec"]
pub = lambda r: r["pub_msgs_per_sec"]
p99 = lambda r: r["latency_us"]["p99"] / 1e3
p99whole = lambda r: (r.get("latency_whole_run_us") or r["latency_us"])["p99"] / 1e3
cp = lambda q: lambda r: None if not r.get("confirm_latency_us") else r["confirm_latency_us"][q] / 1e3
rss = lambda r: max(r["server_rss_hwm_kib"], r.get("server_rss_hwm_backlog_kib", 0)) / 1024
rssb = lambda r: r.get("server_rss_hwm_backlog_kib", 0) / 1024
steal = lambda r: (r.get("machine_cpu") or {}).get("steal_pct", 0)
slow = lambda le: lambda r: ((r.get("server_fsyncs") or {}).get("over") or {}).get(le)
rows = [
  ("W1 1 KiB, 1 pub + 1 con, confirm pipelined, fsync before confirm: end to end msgs/s", "w1", con, "", True),
  ("W1 with Fibril's Go SDK as the client (NATS column: the same nats.go run as W1)", "w1sdk", con, "", False),
  ("W2 1 KiB, 4 pubs + 4 cons, 4 partitions: end to end msgs/s", "w2", con, "", True),
  ("W3 16 B, 1 pub + 1 con, group commit: end to end msgs/s", "w3", con, "", False),
  ("W3p 16 B plain pub/sub (Fibril plain subset vs NATS core): received msgs/s", "w3p", con, "", False),
  ("W4 backlog: publish msgs/s (confirmed)", "w4", pub, "", True),
  ("W4 backlog: drain msgs/s", "w4", con, "", True),
  ("W4 server peak RSS with the whole backlog stored", "w4", rssb, "MiB", True),
  ("W4 server peak RSS over the whole run (VmHWM)", "w4", rss, "MiB", True),
  ("W4 of which peak RssAnon (heap; sampled every 100 ms)", "w4", lambda r: r.get("server_rss_anon_peak_kib", 0) / 1024, "MiB", True),
  ("W5 1 KiB plain pub/sub vs NATS core: received msgs/s", "w5", con, "", False),
  ("W1 p99 end-to-end latency at full speed", "w1", p99, "ms", True),
  ("W1 p99 end-to-end latency at half the peak rate (each system at half its own peak), after the first second", "w1half", p99, "ms", True),
  ("W1 p99 end-to-end latency at half the peak rate, whole run (first second included)", "w1half", p99whole, "ms", True),
  ("W1 p50 publish -> confirm latency at half the peak rate, after the first second (NATS: the publish ack)", "w1half", cp("p50"), "ms", True),
  ("W1 p99 publish -> confirm latency at half the peak rate, after the first second (NATS: the publish ack)", "w1half", cp("p99"), "ms", True),
  ("W1 at half the peak rate: CPU steal over the run (time the hypervisor withheld the vCPUs)", "w1half", steal, "%", True),
  ("W1 at half the peak rate: Fibril's fsyncs over 6.4 ms during the run (its own fibril_fsync_seconds)", "w1half", slow("0.0064"), "", False),
  ("W1 at half the peak rate: Fibril's fsyncs over 51.2 ms during the run", "w1half", slow("0.0512"), "", False),
]
print(f"Medians of {reps} run(s) (min–max). Fibril: durability group (fsync before every confirm, shared by a group commit).")
print("Durable rows: end to end = first publish -> server reports the group empty (every message delivered, acked, ack applied); drain = consumers start -> same.")
print("NATS: JetStream file storage, work-queue stream, durable pull consumer, explicit ack; 'default' = sync_interval 2 min (no fsync per message), 'always' = sync_interval: always. W3p/W5: NATS core.\n")
print("| workload | Fibril | NATS default | Fibril/NATS | NATS sync always | Fibril/always |")
print("|---|---:|---:|---:|---:|---:|")
for title, wid, key, unit, always in rows:
    f, n = med(wid, "fibril", key), med("w1" if wid == "w1sdk" else wid, "nats", key)
    a = med(wid, "natsfsync", key) if always else None
    fl = "".join(f" **{v}: {fails(wid, v)} FAIL**" for v in ("fibril", "nats", "natsfsync") if fails(wid, v))
    print(f"| {title}{fl} | {fmt(f, unit)} | {fmt(n, unit)} | {ratio(f, n)} | {fmt(a, unit)} | {ratio(f, a)} |")
def val(wid, var, key):
    m = med(wid, var, key)
    return None if m is None else m[0]
def check(name, ok, detail):
    mark = "—" if ok is None else ("met" if ok else "**missed**")
    print(f"| {name} | {mark} | {detail} |")
print("\nTargets of issue 7 (medians of this run):\n")
print("| target | result | figures |")
print("|---|---|---|")
for wid, label in (("w1", "W1"), ("w2", "W2")):
    f, n, a = val(wid, "fibril", con), val(wid, "nats", con), val(wid, "natsfsync", con)
    check(f"{label}: ≥ 2× NATS JetStream default sync, fsync before every confirm",
          None if f is None or not n else f >= 2 * n, f"{f or 0:,.0f} vs {n or 0:,.0f} msgs/s = {(f or 0) / (n or 1):.2f}×")
    check(f"{label}: > 100× NATS JetStream sync_interval always",
          None if f is None or not a else f > 100 * a, f"{f or 0:,.0f} vs {a or 0:,.0f} msgs/s = {(f or 0) / (a or 1):.1f}×")
f, n = val("w3p", "fibril", con), val("w3p", "nats", con)
check("W3: ≥ NATS core on the plain subset (16 B)", None if f is None or not n else f >= n,
      f"{f or 0:,.0f} vs {n or 0:,.0f} msgs/s; durable 16 B with group commit: {val('w3', 'fibril', con) or 0:,.0f} msgs/s")
f, n = val("w5", "fibril", con), val("w5", "nats", con)
check("W5: plain pub/sub 1 KiB vs NATS core (no target given)", None, f"{f or 0:,.0f} vs {n or 0:,.0f} msgs/s = {(f or 0) / (n or 1):.2f}×")
l, lw = val("w1half", "fibril", p99), val("w1half", "fibril", p99whole)
check("p99 end-to-end latency < 5 ms at half the peak rate (W1), after the first second", None if l is None else l < 5,
      f"{l or 0:,.2f} ms (p50 {val('w1half', 'fibril', lambda r: r['latency_us']['p50'] / 1e3) or 0:,.2f} ms); "
      f"whole run, first second included: p99 {lw or 0:,.2f} ms ({'under' if (lw or 99) < 5 else 'over'} 5 ms); "
      f"NATS JetStream sync always at half its own peak: p99 {val('w1half', 'natsfsync', p99) or 0:,.2f} ms; "
      f"CPU steal during Fibril's run {val('w1half', 'fibril', steal) or 0:,.1f} %; "
      f"Fibril's fsyncs over 51.2 ms in that run: {val('w1half', 'fibril', slow('0.0512')) or 0:,.0f}")
r = val("w4", "fibril", rssb)
b = runs("w4", "fibril")
check(f"server RSS < 300 MB with {b[0]['published'] if b else 0:,} un-acked 1 KiB messages stored (W4)", None if r is None else r * 1.048576 < 300,
      f"VmHWM {r or 0:,.0f} MiB after the publish phase; {val('w4', 'fibril', rss) or 0:,.0f} MiB over the drain "
      f"(RssAnon peak {val('w4', 'fibril', lambda r: r.get('server_rss_anon_peak_kib', 0) / 1024) or 0:,.0f} MiB)")
x = []
for f in sorted(glob.glob(f"{out}/runs/xcheck.e2e.*.txt")):
    try: x.append(float(open(f).read()))
    except Exception: pass
disk = []
for when in ("before", "after"):
    try: disk.append((when, json.load(open(f"{out}/runs/disk.{when}.json"))))
    except Exception: pass
if disk:
    print("\nThe disk, probed alone before and after the runs (fibril-bench --disk-probe 5s: 128 KiB written and fdatasynced back to back): " +
          "; ".join(f"{w}: {r['fsyncs_per_sec']:,.0f} fsyncs/s, p50 {r['p50_us'] / 1e3:.2f} ms, p99 {r['p99_us'] / 1e3:.2f} ms, "
                    f"max {r['max_us'] / 1e3:,.1f} ms, {r['over_50ms']} over 50 ms" for w, r in disk) +
          ". A durable broker's tail is no better than its fsync's.")
if x:
    print(f"\nCross-check (natscli `nats bench`, the anchors' method, same nats-server version, default sync): "
          f"W1-shaped combined end to end {statistics.median(x):,.0f} msgs/s (min {min(x):,.0f}, max {max(x):,.0f}); "
          f"fibril-bench's NATS driver: {fmt(med('w1', 'nats', con))}.")
PY
if [ "$FAILS" -gt 0 ]; then echo "compare.sh: $FAILS run(s) failed (see $OUT/runs/*.err)" >&2; exit 1; fi
