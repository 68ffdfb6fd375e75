# kvbreaker: `make test` is the one command CI (.ci/run) and the README use.
GO      ?= go
RACE    ?= -race
PKGS    ?= ./...

.PHONY: test lint unit demo fuzz

test: lint unit

lint:
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)

unit:
	$(GO) test $(RACE) -count=1 -timeout 30m $(PKGS)

fuzz:
	$(GO) test ./core -run '^$$' -fuzz FuzzDecodeRecord -fuzztime 30s
