package main

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/kvbreaker/kvbreaker/examples/mapstore"
)

// mapstoreBackend is the descriptor docs/backends.md ("Adding a store")
// shows for examples/mapstore, as the docs print it.
var mapstoreBackend = backendDesc{name: "mapstore", title: "map store", usage: "no flags: a store inside this process (a demo)",
	open: func(context.Context, *backendFlags) (*conn, error) {
		return &conn{describe: "map store (this process)", store: mapstore.New(nil)}, nil
	}}

// The example's descriptor is registered as the tests register their
// variants (not in the registry, which help and the docs' tables list),
// with memory's flags: none.
func init() { backends[mapstoreBackend.name] = variant(mapstoreBackend.open, "memory") }

// variant is a test's backend: the descriptor named base (its flags,
// validation and init) with open as its opener.
func variant(open func(context.Context, *backendFlags) (*conn, error), base string) *backendDesc {
	d := *backends[base]
	d.open = open
	return &d
}

// TestExampleDescriptorRuns: the descriptor docs/backends.md shows is the
// one this file registers, and with it alone kvbreaker check runs the
// example adapter through the conformance suite and passes.
func TestExampleDescriptorRuns(t *testing.T) {
	doc, err := os.ReadFile("../../docs/backends.md")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)### Adding a store.*?```go\n(.*?)```").FindSubmatch(doc)
	src, err := os.ReadFile("backend_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	if block == nil || !strings.Contains(string(src), string(block[1])) {
		t.Fatalf("docs/backends.md's descriptor under \"Adding a store\" is not mapstoreBackend as this file declares it:\n%s", block)
	}
	code, out, errOut := runT(t, "check", "--backend", mapstoreBackend.name, "--quick", "--quiet")
	if code != exitOK || !strings.Contains(out, "map store (this process)") {
		t.Fatalf("kvbreaker check --backend mapstore: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
}
