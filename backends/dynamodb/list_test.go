package dynamodb_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
	"github.com/kvbreaker/kvbreaker/driver"
)

// listAll (for the foreign-data tests) pages through l's keys under prefix, limit at a time, and fails
// the test if a page is larger than limit or the listing does not end.
func listAll(t *testing.T, l driver.Lister, prefix string, limit int) []string {
	t.Helper()
	var all []string
	cursor := ""
	for page := 0; ; page++ {
		if page > 1000 {
			t.Fatalf("List(%q) has not ended after %d pages (cursor %q)", prefix, page, cursor)
		}
		keys, next, err := l.List(t.Context(), prefix, cursor, limit)
		if err != nil {
			t.Fatalf("List(%q, %q, %d): %v", prefix, cursor, limit, err)
		}
		if len(keys) > limit {
			t.Fatalf("List(%q, %q, %d) returned %d keys", prefix, cursor, limit, len(keys))
		}
		all = append(all, keys...)
		if next == "" {
			return all
		}
		cursor = next
	}
}

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
