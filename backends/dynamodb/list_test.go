package dynamodb_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
	"github.com/kvbreaker/kvbreaker/driver"
)

// TestListArguments: a limit below 1 and another prefix's cursor are
// errors. (Pagination over the shared table, prefixes, tombstones, expired
// items still in the table, kvbreaker.Prefixed: the conformance suite's
// list cases, whose harness judges expiry by its own clock as here.)
func TestListArguments(t *testing.T) {
	ctx := t.Context()
	s, err := dynamodb.New(client, table)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = s.List(ctx, "a/", "", 0)
	if oe, ok := errors.AsType[*driver.OpError](err); !ok || oe.Op != "list" || !strings.Contains(err.Error(), "dynamodb: list a/: limit 0 is not positive") {
		t.Fatalf("List with limit 0 = %v, want an OpError", err)
	}
	_, _, err = s.List(ctx, "a/", "b/\x1fb/other1.example", 2)
	if err == nil || !strings.Contains(err.Error(), "belongs to a listing of prefix") {
		t.Fatalf("List with another prefix's cursor = %v, want an error", err)
	}
}
