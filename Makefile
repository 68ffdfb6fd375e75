# kvbreaker. `make test` is the one command CI (.ci/run) and the README use:
# lint, then every test of every module in go.work with -race (unit tests, the
# conformance suite on memory, and the real-server matrix: etcd, dynalite,
# Miniflare, Redis, PostgreSQL, MariaDB, SQLite, NATS) summarised per backend by tools/matrix, then
# the published-path check (tools/published: a tagged temporary clone served
# from a file-system module proxy, go get of each module, go install of the
# command, and the consumer-graph check, tools/consumers, on that proxy).
#
#   make test                  everything
#   make test BACKEND=etcd     one column: memory, etcd, dynamodb, cloudflarekv, redis, postgres, mysql, sqlite, nats, containers
#   make containers            the container mode (Docker; see DEVELOPERS.md)
#   make demo                  a simulated fleet, the README's first command
#   make bench                 round trips per decision, contention, and benchmarks vs gobreaker
#   make fuzz                  fuzz the record and host-key decoders
#   make mutants               mutation test of the core (not part of make test; tools/mutants)
#   make robustness            long seeded fault schedules on etcd, Redis and PostgreSQL (internal/robustness)
#   make flakes                the short suite, FLAKES_ROUNDS times, with every core kept busy (tools/flakes)
#   make published             the published-path check alone (make consumers: its consumer graphs)
#   make release VERSION=v0.1.0   what tools/release would change and tag (dry run; docs/RELEASING.md)
#   make tidy                  go mod tidy of every module (tools/release -tidy)
SHELL       := /bin/bash
.SHELLFLAGS := -o pipefail -c
GO      ?= go
RACE    ?= -race
# Most packages wait on real servers and real time rather than compute, so
# more test binaries than cores run at once keep the cores busy.
TESTP   ?= 4
BACKEND ?=
# Every module of the workspace: the root, one per backend, the command,
# bench, the OpenTelemetry observer and its Prometheus example, the test
# servers with heavy dependencies, and the build tools.
ALL     := $(addsuffix /...,$(shell $(GO) list -m -f '{{.Dir}}'))
ifeq ($(BACKEND),)
PKGS    ?= $(ALL)
else ifeq ($(BACKEND),containers)
PKGS    ?= ./internal/testservers/containers/...
else
PKGS    ?= ./backends/$(BACKEND)/...
endif
MATRIX   = $(if $(filter-out containers,$(BACKEND)),-backend $(BACKEND))

.PHONY: test lint unit published consumers release tidy demo fuzz containers bench mutants robustness flakes

test: lint unit published

lint:
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet $(ALL)
	$(GO) tool staticcheck $(ALL)

unit:
	$(GO) test $(RACE) -p $(TESTP) -count=1 -timeout 30m -json $(PKGS) | $(GO) run ./tools/matrix $(MATRIX)

# The user's path: go get and go install from a module proxy built from a
# tagged temporary clone of the working tree, no replace, no workspace.
published:
	$(GO) run ./tools/published

# Throwaway consumer modules must not inherit other backends, test servers or
# benchmark dependencies (on the published check's proxy).
consumers:
	$(GO) run ./tools/published -only consumers

VERSION ?=
release:
	$(GO) run ./tools/release -version $(VERSION)

tidy:
	$(GO) run ./tools/release -tidy

# GOWORK=off: the demo is the root module's alone, so a first run loads only
# the root's requirements, not the go.mod of every workspace module's
# requirements (SDKs, servers, tools), which it would download first.
# kvbreaker_nohostkey: the simulator never calls HostKey, whose IDNA tables
# (golang.org/x/net, golang.org/x/text) a first run would download and
# compile (hostkey.go).
demo:
	GOWORK=off CGO_ENABLED=0 GOFLAGS=-tags=kvbreaker_nohostkey $(GO) run ./internal/demo

fuzz:
	$(GO) test ./internal/record -run '^$$' -fuzz FuzzDecodeRecord -fuzztime 30s
	$(GO) test . -run '^$$' -fuzz FuzzHostKey -fuzztime 30s

containers:
	bash scripts/containers.sh

BENCHCOUNT ?= 6
BENCHOUT   ?= $(or $(TMPDIR),/tmp)/kvbreaker-bench.txt
bench:
	$(GO) test ./bench -run 'TestRoundTrips|TestAllowLatencyRatio|TestContention|TestRecordSizeAndLeases' -v -count=1
	$(GO) test ./bench ./bench/hostmix -run '^$$' -bench . -benchmem -count $(BENCHCOUNT) | tee $(BENCHOUT)
	$(GO) tool benchstat $(BENCHOUT)
	$(GO) tool benchstat -col .name -filter '.name:(RealGet OR RealAllow)' $(BENCHOUT)

# Single-point mutants of internal/machine, internal/record and the root
# package, each run against its package's tests through -overlay (the tree
# is never written); the kill rate per file, the survivors with their
# diffs, the known equivalents (tools/mutants/equivalent.txt) apart.
# On a shared 2-core VM internal/record's 139 mutants took 56 s and
# internal/machine's 94 took 20 s, the root package about 9 s per mutant
# (473: over an hour at -p 1), so sample or narrow it:
#   make mutants MUTANTS='-sample 40 -p 2'
#   make mutants MUTANTS='-pkg internal/record'
MUTANTS ?=
mutants:
	$(GO) run ./tools/mutants $(MUTANTS)

# Breakers over a 3-member etcd cluster (members killed, restarted,
# partitioned, paused), a Redis server and a Redis primary and replica
# behind Sentinel (primary killed or paused, the replica promoted; also
# with WithWaitReplicas) and a PostgreSQL server (killed, restarted,
# paused), on schedules drawn from seeds, the history checked by
# internal/robustness (make test runs one short schedule of each).
# Replay a failure: make robustness ROBUSTNESS='-seed N'.
ROBUSTNESS ?= -seeds 5 -faultphase 2m
robustness:
	$(GO) test -count=1 -v -timeout 60m -run TestRobustness ./backends/etcd/ -args $(ROBUSTNESS)
	$(GO) test -count=1 -v -timeout 90m -run TestRobustness ./backends/redis/ -args $(ROBUSTNESS)
	$(GO) test -count=1 -v -timeout 120m -run TestRobustness ./backends/postgres/ -args $(ROBUSTNESS)

# The short suite of every package, FLAKES_ROUNDS times, beside a load
# generator (tools/cpuload, one spinning goroutine per CPU) that the
# command starts and kills by its PID; each failed test is printed with
# the command that replays it (docs/testing.md).
FLAKES_ROUNDS ?= 5
FLAKES_FLAGS  ?= $(RACE) -short -count=1 -p $(TESTP) -timeout 30m
flakes:
	$(GO) run ./tools/flakes -rounds $(FLAKES_ROUNDS) -flags '$(FLAKES_FLAGS)' $(PKGS)
