# backfill — run `make` to list the targets.

GO       ?= go
PKG      ?= ./...
TESTS    ?= .
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
LDFLAGS  := -X main.version=$(VERSION)
FUZZTIME ?= 20000x
BIN      := bin/backfill

.DEFAULT_GOAL := help
.PHONY: help build test testrace lint fmt-check tidy-check fuzz bench bench-e2e demo clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z0-9-]+:.*## / {printf "  %-11s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build bin/backfill
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/backfill

test: lint ## lint, then run every test (the README's test command)
	$(GO) test -count=1 -run '$(TESTS)' $(PKG)

testrace: ## run the tests with the race detector
	$(GO) test -race -count=1 -run '$(TESTS)' $(PKG)

lint: fmt-check tidy-check ## go vet, gofmt and go.mod checks
	$(GO) vet $(PKG)

fmt-check: ## fail if gofmt would change a file
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

tidy-check: ## fail if go.mod or go.sum are not tidy
	@cp go.mod /tmp/backfill-go.mod.bak; cp go.sum /tmp/backfill-go.sum.bak; \
	$(GO) mod tidy; \
	if ! cmp -s go.mod /tmp/backfill-go.mod.bak || ! cmp -s go.sum /tmp/backfill-go.sum.bak; then \
		cp /tmp/backfill-go.mod.bak go.mod; cp /tmp/backfill-go.sum.bak go.sum; \
		echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; fi

fuzz: ## run each fuzzer for FUZZTIME (default 20000x)
	@set -e; for pkg in $$($(GO) list ./...); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "== $$pkg $$f"; \
			$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

bench: ## micro benchmarks, 10 runs each, to bench.txt for benchstat
	$(GO) test -run '^$$' -bench '$(TESTS)' -benchmem -count=10 $$($(GO) list ./... | grep -v /bench$$) | tee bench.txt

bench-e2e: ## end-to-end benchmarks of the binary against their baselines
	$(GO) test -run '^$$' -bench '$(TESTS)' -benchtime 1x -timeout 60m ./bench/

demo: build ## the main job on the embedded default (see README)
	@echo "backfill run (canned buckets to Parquet) is not built yet."
	@echo "Until it lands, this demo shows the ID core:"
	$(BIN) ooid 2012-12-05/20121205T071421Z-MM-AS18399-http_invalid_request_line-no_report_id-0.1.0-probe.yaml 0 1 2
	$(BIN) decode 50bef44df29c69e2

clean: ## remove build outputs
	rm -rf bin bench.txt
