package backendtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// RowPurger is a row store's Store with Purge (MySQL, PostgreSQL).
type RowPurger interface {
	driver.Store
	Purge(ctx context.Context) (int64, error)
}

// PurgeBatches checks the Purge of a store made with a purge batch of 10,
// a purge delay of a microsecond and no automatic purge: expired rows and
// tombstones are deleted in batches, live rows stay, and a row a
// transaction holds is skipped rather than waited for. It writes 25 rows
// that expire a microsecond after their write (gone-00 …), 5 tombstones
// and 3 live rows; hold locks the row of gone-00 in a transaction and
// returns what ends it; rows counts the table's rows.
func PurgeBatches(t *testing.T, s RowPurger, hold func() (release func() error), rows func() int) {
	t.Helper()
	ctx := t.Context()
	for i := range 25 {
		if _, err := s.CompareAndSwap(ctx, fmt.Sprintf("gone-%02d", i), driver.NoVersion, []byte("x"), time.Microsecond); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		k := fmt.Sprintf("deleted-%d", i)
		v, err := s.CompareAndSwap(ctx, k, driver.NoVersion, []byte("x"), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.CompareAndDelete(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if _, err := s.CompareAndSwap(ctx, fmt.Sprintf("live-%d", i), driver.NoVersion, []byte("x"), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	release := hold()
	var got []int64
	for range 5 {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		n, err := s.Purge(pctx)
		cancel()
		if err != nil {
			t.Fatalf("Purge = %v after %v", err, got)
		}
		got = append(got, n)
	}
	if fmt.Sprint(got) != "[10 10 9 0 0]" {
		t.Errorf("purged %v per batch, want [10 10 9 0 0] (29 rows, one held)", got)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Purge(ctx); err != nil || n != 1 {
		t.Errorf("Purge once released = %d, %v; want 1", n, err)
	}
	if n := rows(); n != 3 {
		t.Errorf("%d rows left, want the 3 live ones", n)
	}
}
