package postgres_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/backends/postgres"
	"github.com/kvbreaker/kvbreaker/driver"
)

// TestListHostilePrefixes: List returns exactly the keys that begin with
// the prefix, in bytewise order, for prefixes and keys next to the largest
// code point U+10FFFF, next to the surrogate gap (U+D7FF, U+E000), with
// LIKE's metacharacters and backslashes, and for the empty prefix; whole
// and a key per page. Before the upper bound was computed from the prefix,
// the statement bounded keys by prefix || U+10FFFF and missed the keys with
// more after it: the cases "p", "p\U0010FFFF", "\U0010FFFF" and "" failed
// (checked by running this test on that statement).
func TestListHostilePrefixes(t *testing.T) {
	ctx := t.Context()
	pool := newPool(t, server.URL())
	s, err := postgres.New(pool, ownTable(t, pool), postgres.WithPurgeEvery(0))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const max = "\U0010FFFF"
	keys := []string{
		"p", "px", "p" + max, "p" + max + "x", "p" + max + max, "p" + max + max + "y", "q", "o" + max,
		"a", "ab", "abcx", "a%x", "a%_x", `a\b`, `a\\`, "a_",
		"d\uD7FF", "d\uD7FFx", "d\uE000",
		max, max + "z", max + max, max + max + "z",
	}
	for _, k := range keys {
		if _, err := s.CompareAndSwap(ctx, k, driver.NoVersion, []byte("v"), time.Hour); err != nil {
			t.Fatalf("CompareAndSwap(%q) = %v", k, err)
		}
	}
	for _, prefix := range []string{
		"p", "p" + max, "p" + max + max, "o", "q",
		"a%", "a%_", "a_", `a\`, `a\\`, "ab",
		"d\uD7FF", "d",
		max, max + max, "",
	} {
		// The specification: strings.HasPrefix, in Go's (bytewise) order,
		// which is the "C" collation's on UTF-8.
		var want []string
		for _, k := range keys {
			if strings.HasPrefix(k, prefix) {
				want = append(want, k)
			}
		}
		slices.Sort(want)
		for _, limit := range []int{100, 1} {
			var got []string
			cursor := ""
			for range len(keys) + 2 {
				page, next, err := s.List(ctx, prefix, cursor, limit)
				if err != nil {
					t.Fatalf("List(%+q, %+q, %d) = %v", prefix, cursor, limit, err)
				}
				got = append(got, page...)
				if next == "" {
					break
				}
				cursor = next
			}
			if !slices.Equal(got, want) {
				t.Errorf("List(%+q) by %d = %+q, want %+q", prefix, limit, got, want)
			}
		}
	}
	// Text must be UTF-8: a prefix that is not is refused by the server,
	// not matched bytewise.
	if _, _, err := s.List(ctx, "p\xff", "", 10); err == nil || !strings.Contains(err.Error(), "invalid byte sequence") {
		t.Errorf("List with a prefix not UTF-8 = %v, want the server's invalid byte sequence", err)
	}
}

// TestListUsesPrimaryKey: with PostgreSQL's generic plan (its parameters
// unknown to the planner, as a cached statement gets after five runs), List
// scans a range of the primary key bounded on both sides: prefix and the
// bound computed from it.
func TestListUsesPrimaryKey(t *testing.T) {
	ctx := t.Context()
	pool := newPool(t, server.URL())
	tbl := ownTable(t, pool)
	if _, err := pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %s (key, value, version, expires_at, purge_at, writes, versions)
SELECT 'k' || i, '', i, 'infinity', 'infinity', '{}', '{}' FROM generate_series(1, 10000) i`, tbl)); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "ANALYZE "+tbl); err != nil {
		t.Fatal(err)
	}
	s, err := postgres.New(pool, tbl, postgres.WithPurgeEvery(0))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, sql := range []string{
		"SET plan_cache_mode = force_generic_plan",
		"PREPARE list AS " + s.ListSQL(),
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	defer conn.Exec(ctx, "DEALLOCATE list; RESET plan_cache_mode") //nolint:errcheck // the pool is closed with the test
	rows, err := conn.Query(ctx, "EXPLAIN EXECUTE list('k1', '', 10, 'k2')")
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	t.Logf("EXPLAIN EXECUTE list('k1', '', 10, 'k2') with a generic plan:\n%s", text)
	if !strings.Contains(text, "Index Scan using "+tbl+"_pkey") || !strings.Contains(text, "Index Cond: ((key >= $1) AND (key < $4) AND (key > $2))") {
		t.Errorf("plan of List does not scan a range of the primary key:\n%s", text)
	}
}
