# Fibril build and test entry points. `make test` is the one command that runs
# every test (Go, Python, JavaScript, conformance); .ci/run calls it.
GO ?= go
FUZZTIME ?= 20s

.PHONY: test test-go test-fuzz test-python test-js build vet

test: vet test-go test-fuzz test-python test-js

build:
	$(GO) build ./...

vet:
	$(GO) vet ./...

test-go:
	$(GO) test -race -count=1 ./...

# Each fuzz target runs for FUZZTIME on top of its checked-in corpus.
test-fuzz:
	@set -e; for pkg in $$($(GO) list ./...); do \
	  dir=$$($(GO) list -f '{{.Dir}}' $$pkg); \
	  for t in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$dir/*_test.go 2>/dev/null | sed 's/func //'); do \
	    echo "fuzz $$pkg $$t ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

test-python:
	@if [ -f sdk-python/pyproject.toml ]; then $(MAKE) -C sdk-python test; else echo "sdk-python: not yet"; fi

test-js:
	@if [ -f sdk-js/package.json ]; then $(MAKE) -C sdk-js test; else echo "sdk-js: not yet"; fi
