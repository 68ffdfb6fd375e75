# kvbreaker. `make test` is the one command CI (.ci/run) and the README use:
# lint, then every test with -race — unit tests, the conformance suite on
# memory, and the real-server matrix (embedded etcd, dynalite, Miniflare) —
# summarised per backend by internal/matrix.
#
#   make test                  everything
#   make test BACKEND=etcd     one column: memory, etcd, dynamodb, cloudflarekv, containers
#   make containers            the container mode (Docker; see DEVELOPERS.md)
#   make demo                  a simulated fleet, the README's first command
#   make bench                 round trips per decision, contention, and benchmarks vs gobreaker
#   make fuzz                  fuzz the record and host-key decoders
SHELL       := /bin/bash
.SHELLFLAGS := -o pipefail -c
GO      ?= go
RACE    ?= -race
# Most packages wait on real servers and real time rather than compute, so
# more test binaries than cores run at once keep the cores busy.
TESTP   ?= 4
BACKEND ?=
ifeq ($(BACKEND),)
PKGS    ?= ./...
else ifeq ($(BACKEND),containers)
PKGS    ?= ./internal/containers/...
else
PKGS    ?= ./backends/$(BACKEND)/...
endif
MATRIX   = $(if $(filter-out containers,$(BACKEND)),-backend $(BACKEND))

.PHONY: test lint unit demo fuzz containers bench

test: lint unit

lint:
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...
	$(GO) tool staticcheck ./...

unit:
	$(GO) test $(RACE) -p $(TESTP) -count=1 -timeout 30m -json $(PKGS) | $(GO) run ./internal/matrix $(MATRIX)

demo:
	$(GO) run ./cmd/kvbreaker simulate

fuzz:
	$(GO) test ./core -run '^$$' -fuzz FuzzDecodeRecord -fuzztime 30s
	$(GO) test ./core -run '^$$' -fuzz FuzzHostKey -fuzztime 30s

containers:
	bash scripts/containers.sh

BENCHCOUNT ?= 6
BENCHOUT   ?= $(or $(TMPDIR),/tmp)/kvbreaker-bench.txt
bench:
	$(GO) test ./bench -run 'TestRoundTrips|TestAllowLatencyRatio|TestContention|TestRecordSizeAndLeases' -v -count=1
	$(GO) test ./bench ./bench/hostmix -run '^$$' -bench . -benchmem -count $(BENCHCOUNT) | tee $(BENCHOUT)
	$(GO) tool benchstat $(BENCHOUT)
	$(GO) tool benchstat -col .name -filter '.name:(RealGet OR RealAllow)' $(BENCHOUT)
