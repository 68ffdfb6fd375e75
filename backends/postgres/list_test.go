package postgres_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kvbreaker/kvbreaker/backends/postgres"
)

// TestListPrefixNotUTF8: text must be UTF-8, so a prefix that is not is
// refused by the server, not matched bytewise. (Prefixes next to U+10FFFF
// and the surrogate gap, LIKE's metacharacters, backslashes: the
// conformance suite's list-hostile-keys case.)
func TestListPrefixNotUTF8(t *testing.T) {
	pool := newPool(t, server.URL())
	s, err := postgres.New(pool, ownTable(t, pool), postgres.WithPurgeEvery(0))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.List(t.Context(), "p\xff", "", 10); err == nil || !strings.Contains(err.Error(), "invalid byte sequence") {
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
