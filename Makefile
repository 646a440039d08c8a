# backfill — run `make` to list the targets.

GO       ?= go
# The packages whose tests take longest come first: they start as soon as
# they are built, and the others fill the other core meanwhile.
PKG      ?= ./pipeline/sink/pgcopy ./cmd/backfill ./cumulus/records ./cumulus/replay ./gen/corpus ./...
TESTS    ?= .
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
LDFLAGS  := -X main.version=$(VERSION)
FUZZTIME ?= 20000x
BIN      := bin/backfill

.DEFAULT_GOAL := help
.PHONY: help announce-build build image test test-faults deps test-deploy testrace ci reference lint fmt-check tidy-check fuzz bench bench-e2e bench-fullscale bench-incremental granule-diff uid-diff soak demo clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z0-9-]+:.*## / {printf "  %-11s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build bin/backfill
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/backfill

IMAGE_REPO ?= backfill
SOURCE_DATE := $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
REVISION    := $(shell git rev-parse HEAD 2>/dev/null)

image: ## build the container image without a Docker engine: bin/image (OCI layout), bin/backfill-image.tar
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/static/backfill ./cmd/backfill
	cd deploy/image && SOURCE_DATE_EPOCH=$(SOURCE_DATE) $(GO) run . --binary ../../bin/static/backfill \
		--version $(VERSION) --revision "$(REVISION)" --repository $(IMAGE_REPO) \
		--layout ../../bin/image --tarball ../../bin/backfill-image.tar

WITH_PG := scripts/with-postgres
# Modules of their own, so that the project's does not take their
# dependencies: the image builder, the Kubernetes manifests' checks, and
# the API server's Job code at the minimum Kubernetes version and the newest.
SUBMODULES := deploy/image deploy/kubernetes deploy/kubernetes/upstream/min deploy/kubernetes/upstream/newest

# The fault tests, by name: network faults, SIGKILLs, a server restarted or
# gone silent, pods of a cluster. They wait out timeouts by design, so they
# have a pass of their own, many at once.
FAULTS := Fault|Kill|Silence|Cluster|Soak

# go vet runs in make lint; without its DWARF, a test binary links sooner.
TESTFLAGS := -count=1 -vet=off -ldflags=-w

test: deps ## every test of the tool but the fault tests, PostgreSQL and the live oracles included (the README's test command)
	$(WITH_PG) $(GO) test $(TESTFLAGS) -timeout 20m -skip '$(FAULTS)' -run '$(TESTS)' $(PKG)

test-faults: deps ## the fault tests: network faults, SIGKILLs, servers restarted or silent, pods of a cluster (about 2 minutes)
	$(WITH_PG) $(GO) test $(TESTFLAGS) -timeout 20m -parallel 8 -run '$(FAULTS)' $(PKG)

deps: ## install what the tests need and this machine lacks (Debian packages, Cumulus v21's code; once)
	scripts/test-deps
	reference/cumulus-v21/setup

test-deploy: ## the modules under deploy/: the image builder, the manifests' checks, the Job controller at Kubernetes 1.29 and the newest
	@set -e; for m in $(SUBMODULES); do (cd $$m && $(GO) test -count=1 -timeout 30m -run '$(TESTS)' ./...); done

testrace: deps ## the tests again under the race detector (those that exec the binary are left to make test: the detector would see only their harness)
	$(WITH_PG) $(GO) test $(TESTFLAGS) -race -timeout 30m -run '$(TESTS)' $(PKG)

ci: test test-faults lint test-deploy testrace fuzz ## everything CI runs, in order (.ci/run)

reference: ## install Cumulus v21's own code, the oracle of the Cumulus tests (npm; once)
	reference/cumulus-v21/setup

# staticcheck and errcheck at these versions: the installed binaries when
# they are on the PATH (.ci/run installs them), else through go run.
STATICCHECK ?= $(if $(shell command -v staticcheck),staticcheck,$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2)
# errcheck over the code the binary runs; .errcheck-exclude says which
# calls it does not ask about, and why.
ERRCHECK    ?= $(if $(shell command -v errcheck),errcheck,$(GO) run github.com/kisielk/errcheck@v1.9.0)

lint: fmt-check tidy-check ## go vet, staticcheck, errcheck, gofmt and go.mod checks
	$(GO) vet $(PKG)
	$(STATICCHECK) $(PKG)
	$(ERRCHECK) -exclude .errcheck-exclude -ignoretests $(PKG)
	@set -e; for m in $(SUBMODULES); do (cd $$m && $(GO) vet ./...); done

fmt-check: ## fail if gofmt would change a file
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

tidy-check: ## fail if a go.mod or go.sum is not tidy
	@set -e; for m in . $(SUBMODULES); do ( cd $$m; \
	bak=$$(mktemp -d); trap 'rm -rf "$$bak"' EXIT; \
	cp go.mod go.sum "$$bak"/; \
	$(GO) mod tidy; \
	if ! cmp -s go.mod "$$bak"/go.mod || ! cmp -s go.sum "$$bak"/go.sum; then \
		cp "$$bak"/go.mod "$$bak"/go.sum .; \
		echo "$$m: go.mod/go.sum are not tidy: run go mod tidy there"; exit 1; fi ); done

# The fuzzers are found in the sources (a grep, where go test -list would
# build every package's tests to list them).
fuzz: ## run each fuzzer for FUZZTIME (default 20000x)
	@set -e; for f in $$(grep -l '^func Fuzz' $$(git ls-files '*_test.go' 2>/dev/null || find . -name '*_test.go') | grep -v '^deploy/'); do \
		d=./$$(dirname $$f); \
		for fn in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
			echo "== $$d $$fn"; \
			$(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) $$d; \
		done; \
	done

bench: ## micro benchmarks, 10 runs each, to bench.txt for benchstat
	$(GO) test -run '^$$' -bench '$(TESTS)' -benchmem -count=10 $$($(GO) list ./... | grep -v /bench$$) | tee bench.txt

bench-e2e: deps ## end-to-end benchmarks of the binary against their baselines
	$(WITH_PG) $(GO) test -run '^$$' -bench '$(TESTS)' -benchtime 1x -timeout 60m ./bench/

bench-fullscale: ## the whole corpus (147 M measurements) through every path, side by side: about 25 minutes (and 4 to 7 more to generate the indexes the first time) and 35 GB of disk (BENCH_DIR caches the 5.1 GiB of indexes; PARQUET_ONLY=1 stops after the floor and the Parquet runs)
	$(WITH_PG) $(GO) test -run '^$$' -bench '^BenchmarkFullScale$$' -benchtime 1x -timeout 3h -v ./bench/ -args -bench.fullscale $(if $(BENCH_DIR),-bench.dir=$(BENCH_DIR)) $(if $(PARQUET_ONLY),-bench.fullscale.parquet)

bench-incremental: ## one bucket into the full-scale Parquet output, beside the same bucket alone, and run --resume over the complete output: about 3 minutes (and 4 to 7 more to generate the indexes the first time; BENCH_DIR caches them)
	$(GO) test -run '^$$' -bench '^BenchmarkIncremental$$' -benchtime 5x -timeout 1h -v ./bench/ -args -bench.incremental $(if $(BENCH_DIR),-bench.dir=$(BENCH_DIR))

GRANULE_DIFF ?= 5000
GRANULE_DIFF_SEED ?= $(shell date +%s)

granule-diff: reference ## GRANULE_DIFF (default 5,000) generated messages written by Cumulus v21 and by backfill, compared row by row; GRANULE_DIFF_SEED to repeat a run
	$(WITH_PG) env BACKFILL_GRANULE_DIFF=$(GRANULE_DIFF) BACKFILL_GRANULE_DIFF_SEED=$(GRANULE_DIFF_SEED) \
		$(GO) test -count=1 -timeout 2h -run '^TestWrite_Generated$$' -v ./cumulus/records

UID_DIFF ?= 20000
UID_DIFF_SEED ?= $(shell date +%s)
UID_DIFF_CATS ?= json_framing,json_values,yaml_basic,yaml_falsy,yaml_refused,yaml_binary,yaml_errors,yaml_emitter

uid-diff: ## UID_DIFF (default 20,000) generated raw reports of UID_DIFF_CATS, their measurement_uids compared with OONI's own code's, row by row and uid by uid (ORACLE=path to the oracle script: it reads RAW/<bucket>/<basename> and prints textname, ndx, uid, hash); UID_DIFF_SEED to repeat a run
	@test -n "$(ORACLE)" || { echo "uid-diff: set ORACLE to the oracle script that runs OONI's code" >&2; exit 2; }
	$(GO) test -count=1 -timeout 2h -run '^TestDifferential$$' -v ./pipeline/ooniuid -args -uid.oracle=$(abspath $(ORACLE)) -uid.reports=$(UID_DIFF) -uid.seed=$(UID_DIFF_SEED) -uid.cats=$(UID_DIFF_CATS)

SOAK ?= 30m

soak: ## random network faults during repeated runs into PostgreSQL and S3 for SOAK (default 30m); not in CI
	$(WITH_PG) env BACKFILL_SOAK=$(SOAK) $(GO) test -count=1 -timeout 2h -run '^TestSoak_NetFaults$$' -v ./cmd/backfill

DEMO_DIR ?= demo

demo: announce-build build ## the main job on the embedded default: generate a corpus, backfill it to Parquet
	rm -rf $(DEMO_DIR)
	$(BIN) gen --out $(DEMO_DIR)/corpus --buckets 3 --reports 300 --max-measurements 20000 \
		--corrupt all=0.01
	$(BIN) run --in $(DEMO_DIR)/corpus --out $(DEMO_DIR)/out; \
		status=$$?; echo "exit status $$status (3: completed, with the rejects the summary counts by reason)"; \
		[ $$status -eq 0 ] || [ $$status -eq 3 ]
	@echo "Parquet in $(DEMO_DIR)/out/measurements, dead letters in $(DEMO_DIR)/out/dead-letters"

announce-build:
	@[ -x $(BIN) ] || echo "Building $(BIN): the first build downloads and compiles the dependencies, up to 2 minutes."

clean: ## remove build outputs
	rm -rf bin bench.txt demo
