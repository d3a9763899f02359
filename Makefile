# Fibril build and test entry points. `make test` is the one command that runs
# every test (Go, Python, JavaScript, conformance); .ci/run calls it.
GO ?= go
FUZZTIME ?= 20s
PYTHON ?= python3

.PHONY: test test-go test-fuzz test-python test-js build vet conformance bench bench-full faults perm-matrix test-corruption test-adversarial
.PHONY: test-stock test-stock-js test-stock-py test-natscli test-stock-long bench-nats bench-cluster bench-delayed cluster-kill

test: vet test-go test-fuzz test-python test-js test-stock

build:
	$(GO) build ./...

vet:
	$(GO) vet ./...

test-go:
	$(GO) test -race -count=1 ./...

# Fuzzing, in two budgets. Every fuzz target's checked-in corpus runs as an
# ordinary test in test-go. test-fuzz then fuzzes each target for FUZZ_SHORT
# executions (a count: seconds each); `make fuzz` is the long budget,
# FUZZTIME per target. New interesting inputs are minimized for at most 2s
# (Go's default, 60s, used to eat a target's whole budget after its first
# find: 0 execs/s).
#
# A count needs no deadline, so the short run is safe on the machine's Go.
# A duration is not: go1.26's fuzz coordinator can report "context deadline
# exceeded" as a failure when -fuzztime ends while a worker is busy, with no
# failing input (a race in internal/fuzz, go.dev/issue/75804, fixed in
# go1.27; it failed CI once on FuzzCompressedSegment). So `make fuzz` runs on
# FUZZ_TOOLCHAIN, which the go command fetches from the Go module proxy
# (about 76 MB, once per machine, into the module cache);
# FUZZ_TOOLCHAIN=local uses the machine's Go.
FUZZ_SHORT ?= 300x
FUZZ_TOOLCHAIN ?= go1.27.3
.PHONY: fuzz fuzz-run
test-fuzz:
	@$(MAKE) --no-print-directory fuzz-run FUZZ_BUDGET=$(FUZZ_SHORT) FUZZ_GOTOOLCHAIN=local

fuzz:
	@$(MAKE) --no-print-directory fuzz-run FUZZ_BUDGET=$(FUZZTIME) FUZZ_GOTOOLCHAIN=$(FUZZ_TOOLCHAIN)

fuzz-run:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for t in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/func //'); do \
	    echo "fuzz $$pkg $$t ($(FUZZ_BUDGET), $(FUZZ_GOTOOLCHAIN))"; \
	    GOTOOLCHAIN=$(FUZZ_GOTOOLCHAIN) $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZ_BUDGET) -fuzzminimizetime 2s $$pkg; \
	  done; \
	done

# The Python SDK's tests run in a virtual environment of their own (VENV,
# ignored by git), created on first use: `make test` installs the SDK and its
# dev tools (pytest, mypy, from PyPI) there, never into the Python you run.
VENV ?= .venv
VENV_PY := $(abspath $(VENV))/bin/python
$(VENV_PY):
	$(PYTHON) -m venv $(VENV)

test-python: $(VENV_PY)
	$(MAKE) -C sdk-python test PYTHON=$(VENV_PY)

test-js:
	@if [ -f sdk-js/package.json ]; then $(MAKE) -C sdk-js test; else echo "sdk-js: not yet"; fi

# Release artifacts, all under dist/ (ignored): static fibril binaries for
# DIST_PLATFORMS stamped with VERSION, COMMIT and DATE (`fibril version`
# prints them; -ldflags -X main.version=...), the Python SDK's wheel and
# sdist (python -m build, in .venv), the JS SDK's npm tarball (npm pack)
# and SHA256SUMS over them. `make dist-check` (run by .ci/run) installs the
# wheel into a fresh venv and the tarball into a fresh npm project, and
# runs each SDK's example worker against the linux/amd64 binary.
VERSION ?= $(shell sed -n 's/^const Version = "\(.*\)"/\1/p' server/server.go)
COMMIT ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
DIST_PLATFORMS ?= linux/amd64 linux/arm64 darwin/arm64
DIST_LDFLAGS = -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT) -X main.date=$(DATE)

.PHONY: dist dist-check
dist: $(VENV_PY)
	rm -rf dist && mkdir -p dist
	@set -e; for p in $(DIST_PLATFORMS); do \
	  os=$${p%/*}; arch=$${p#*/}; out=dist/fibril-$(VERSION)-$$os-$$arch; \
	  echo "building $$out"; \
	  CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '$(DIST_LDFLAGS)' -o $$out ./cmd/fibril; \
	done
	$(VENV_PY) -m pip install --quiet --disable-pip-version-check build
	$(VENV_PY) -m build --outdir dist sdk-python
	cd sdk-js && $(NPM) ci --no-audit --no-fund --silent && $(NPM) run --silent build && $(NPM) pack --silent --pack-destination ../dist
	cd dist && sha256sum * > SHA256SUMS && cat SHA256SUMS

dist-check:
	bash .ci/dist-check

# The permission matrix's long form (server/permmatrix_random_test.go):
# PERM_SEEDS random matrices (users, rules, topics, targets) from PERM_SEED,
# each checked against the reference model; `make test` runs one. About 2 s
# a seed on 2 vCPUs.
PERM_SEEDS ?= 200
PERM_SEED ?= 1
perm-matrix:
	FIBRIL_PERM_SEEDS=$(PERM_SEEDS) FIBRIL_PERM_SEED=$(PERM_SEED) $(GO) test -count=1 -timeout 60m -run '^TestPermissionMatrixRandom$$' ./server/

# The official NATS clients against fibril serve and, as a control,
# nats-server (issue 24): nats.go is e2e/stocknats in test-go; nats.js
# (npm nats, a dev dependency of e2e/stock-js), nats-py (e2e/stock-py's
# requirements) and the nats CLI (e2e/natscli.sh) here. test-stock-long is
# the long form of the fast-publisher case (500k x 1 KiB).
test-stock: test-stock-js test-stock-py test-natscli

test-stock-js:
	cd e2e/stock-js && $(NPM) ci --no-audit --no-fund --silent && $(NPM) test

test-stock-py:
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -r e2e/stock-py/requirements.txt
	$(PYTHON) -m pytest -q -p no:cacheprovider e2e/stock-py

test-natscli:
	bash e2e/natscli.sh

test-stock-long:
	FIBRIL_LONG=1 $(GO) test -count=1 -timeout 30m -run 'TestFastPublisherSlowedNotCut|TestStockFastPublisherNotCut' ./server/ ./e2e/stocknats/

# The adversarial suite's long form (e2e/adversarial_test.go, a few minutes):
# `fibril serve` under 1,000 hostile pre-auth connections of each kind (idle,
# huge line, huge size, slowloris, wrong passwords) and under stalled
# consumers of each kind, measured against SPEC.md's bounds (a logged-in
# client's throughput, peak RSS, login time; memory, cut, redelivery). Its
# short form runs in `make test` (server/adversarial_test.go,
# outbound_test.go, fulldisk_test.go, authqueue_test.go). Uses 127.0.0.2-11
# as attacker addresses; mounts a tmpfs when root.
test-adversarial:
	FIBRIL_ADVERSARIAL=long $(GO) test -count=1 -v -timeout 20m -run 'Adversarial|FullDisk|Stalled|NATSAckAuto|AuthQueue|AuthTimeoutNot' ./e2e/ ./server/

# Benchmarks, never part of `make test`: Fibril and NATS JetStream side by
# side (bench/compare.sh; current figures in BENCHMARKS.md). `bench` is the smoke
# run (1 rep, small counts, about 1-2 min on 2 vCPUs); `bench-full` the full
# comparison (3 reps, 1M backlog, about 8-10 min). Both install nats-server
# with `go install` when missing and write under /tmp/fibril-compare.
bench:
	bash bench/compare.sh --quick

bench-full:
	bash bench/compare.sh

# Replicated W1 (issue 26): a 3-node Fibril cluster (3 `fibril serve`
# processes) against a 3-node JetStream cluster with an R3 stream (default
# sync and sync_interval: always) and single-node Fibril, interleaved, 3 reps
# of 100k x 1 KiB, about 3 min (bench/cluster.sh; CLUSTER_BENCH_FLAGS=--quick
# is a 1-rep smoke run of about 40 s). Writes under /tmp/fibril-cluster-bench.
CLUSTER_BENCH_FLAGS ?=
bench-cluster:
	bash bench/cluster.sh $(CLUSTER_BENCH_FLAGS)

# Delayed messages (issue 29): DELAYED_N messages (default 1M) due over
# DELAYED_SPAN (default 10m) through one `fibril serve`: fire-time error
# p50/p99/max, the server's memory per held-back message, and ordinary
# traffic beside them as a ratio to alone (bench/delayed; its short form,
# 3,000 over 2 s checking none early or missing, runs in test-go). About
# DELAYED_SPAN plus a minute.
DELAYED_N ?= 1000000
DELAYED_SPAN ?= 10m
bench-delayed:
	$(GO) run ./bench/delayed -n $(DELAYED_N) -span $(DELAYED_SPAN)

# nats bench core pub/sub, Fibril vs nats-server alternating (bench/natsbench.sh,
# 3 reps of 1M messages at 16 B and 1 KiB, then the multi-subject flood).
bench-nats:
	bash bench/natsbench.sh

# One conformance table, scenario x runner (wire, go-sdk, py-sdk, js-sdk), from
# a fresh checkout: builds the server once, installs the SDKs' dependencies the
# way their own makefiles do, runs the Python and JS runners (their test
# integrations, which start and restart servers themselves) writing JSON lines,
# then the Go runners with both files merged. Exits non-zero on any failure not
# listed in conformance/known_failures.json, or if a runner left scenarios out.
# The runners' own logs are in $(CONFORMANCE_OUT) (default: a temporary directory).
NPM ?= npm
CONFORMANCE_OUT ?=

conformance: $(VENV_PY)
	@set -e; out="$(CONFORMANCE_OUT)"; \
	if [ -z "$$out" ]; then out=$$(mktemp -d); trap 'rm -rf "$$out"' EXIT; fi; \
	mkdir -p "$$out"; rm -f "$$out/py.jsonl" "$$out/js.jsonl"; \
	echo "building the server"; $(GO) build -o "$$out/fibril" ./cmd/fibril; \
	$(MAKE) --no-print-directory -C sdk-python install PYTHON=$(VENV_PY); \
	(cd sdk-js && if [ -f package-lock.json ]; then $(NPM) ci --no-audit --no-fund --silent; else $(NPM) install --no-audit --no-fund --silent; fi && $(NPM) run --silent build); \
	echo "python runner (log: $$out/py.log)"; \
	(cd sdk-python && FIBRIL_BIN="$$out/fibril" FIBRIL_CONFORMANCE_JSONL="$$out/py.jsonl" \
	  $(VENV_PY) -m pytest -q -p no:cacheprovider tests/test_conformance.py) >"$$out/py.log" 2>&1 || true; \
	echo "js runner (log: $$out/js.log)"; \
	(cd sdk-js && FIBRIL_BIN="$$out/fibril" FIBRIL_CONFORMANCE_JSONL="$$out/js.jsonl" \
	  node --test test/conformance.test.mjs) >"$$out/js.log" 2>&1 || true; \
	touch "$$out/py.jsonl" "$$out/js.jsonl"; \
	$(GO) run ./cmd/fibril-conformance -bin "$$out/fibril" -merge "$$out/py.jsonl,$$out/js.jsonl" -complete -allow-known

# Fault runs, long form (FAULTS.md): RUNS runs of `fibril serve` under kills,
# pauses past the lease, clock steps and power cuts (FUSE, as root), each
# with a fault phase of DURATION, seeds SEED, SEED+1, ... (default: from the
# time); every history is judged by the checker and a failing one is kept in
# FAULTS_KEEP with its seed. FAULTS_FLAGS=-netns puts the node and the clients
# in network namespaces (FAULT_KINDS may then add isolate). NODES=3 or 5 runs
# a cluster, each node in a network namespace of its own and the clients in
# another (root), under every kind by default: the single-node ones, each also
# on the leader (kill-leader, pause-leader, powercut-leader), and the network
# ones (isolate the leader, split with the leader on the minority side,
# bridge, and netem delay, loss, duplicate where the kernel has sch_netem),
# e.g. `make faults NODES=3 RUNS=10 DURATION=60s SEED=1`. FAULT_KINDS
# (comma-separated) narrows the kinds. The short forms are TestFaultRunShort
# and TestClusterFaultRunShort (3 nodes, each network kind once) in make test.
DURATION ?= 60s
RUNS ?= 1
SEED ?= 0
NODES ?= 1
FAULT_KINDS ?=
FAULTS_KEEP ?= /tmp/fibril-faults-keep
FAULTS_FLAGS ?=
faults:
	$(GO) run ./cmd/fibril-faults -nodes $(NODES) -duration $(DURATION) -runs $(RUNS) -seed $(SEED) $(if $(FAULT_KINDS),-faults $(FAULT_KINDS)) -keep $(FAULTS_KEEP) $(FAULTS_FLAGS)

# The cluster leader-kill test's long form (internal/clusterkill, issue
# 26): three real `fibril serve` nodes on loopback, a publisher (1 KiB,
# confirms on) and an acking consumer, the leader of a partition killed
# with SIGKILL and restarted CYCLES times (PARTITIONS partitions, RATE
# publishes a second at most); the history is judged by internal/history
# and the resume times logged. About 3.5 s a cycle on 2 vCPUs. Its short
# form (5 cycles at 120 publishes a second) is part of test-go.
CYCLES ?= 200
PARTITIONS ?= 1
RATE ?= 400
cluster-kill:
	FIBRIL_CLUSTER_KILL_CYCLES=$(CYCLES) FIBRIL_CLUSTER_KILL_PARTITIONS=$(PARTITIONS) FIBRIL_CLUSTER_KILL_RATE=$(RATE) $(GO) test -count=1 -v -timeout 120m -run '^TestKillLeaderLosesNothing$$' ./internal/clusterkill/

# The corruption suite's long form (server/broker/corruption_test.go): a
# stopped broker's files damaged CORRUPTION_RUNS times at random (bit flips,
# zeroed 4 KiB blocks, truncations, deletions, garbage after the end, catalog
# key edits); each run refused-and-repaired exactly or started intact. Its
# short form (48 runs) is part of test-go.
CORRUPTION_RUNS ?= 600
CORRUPTION_SEED ?= 0
test-corruption:
	FIBRIL_CORRUPTION_RUNS=$(CORRUPTION_RUNS) FIBRIL_CORRUPTION_SEED=$(CORRUPTION_SEED) $(GO) test -count=1 -timeout 60m -run TestCorruptionSuite -v ./server/broker/
