package adapter_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/driver"
)

// rowStore is the smallest adapter built with this package: a table of
// rows that do not expire by themselves, as a SQL table's do not. A map
// under a mutex stands in for the table; an adapter over a database runs
// the same steps as statements (a SELECT that filters on expires_at, an
// UPDATE … WHERE version = $old, a DELETE of expired rows).
type rowStore struct {
	purge  adapter.Purge
	purger *adapter.Purger
	now    func() time.Time

	mu   sync.Mutex
	rows map[string]row
	last driver.Version // never handed out twice, deletes included

	// readsExpired, set by the negative control only, reads an expired
	// row as live: the bug of a SELECT that forgot its expires_at filter.
	readsExpired bool
}

type row struct {
	value   []byte
	version driver.Version
	expires time.Time
}

// A rowOption configures a rowStore, as WithPurgeEvery and its siblings
// configure the SQL stores.
type rowOption func(*rowStore)

func withPurgeEvery(n int) rowOption { return func(s *rowStore) { s.purge.Every = n } }

func withPurgeDelay(d time.Duration) rowOption { return func(s *rowStore) { s.purge.Delay = d } }

// newRowStore checks every option before it makes anything, and reports
// every bad one in one error (adapter.Problems).
func newRowStore(opts ...rowOption) (*rowStore, error) {
	s := &rowStore{purge: adapter.DefaultPurge, now: time.Now, rows: map[string]row{}}
	for _, o := range opts {
		o(s)
	}
	var problems adapter.Problems
	s.purge.Check(&problems)
	if err := problems.Err(); err != nil {
		return nil, err
	}
	s.purger = adapter.NewPurger(s.purge.Every, time.Second, s.Purge)
	return s, nil
}

// Traits: atomic; an expired row is filtered by the reader's clock
// (expires_at compared with now), and a purge deletes it Delay after that,
// which is the clock skew the store tolerates between a writer and a
// purger. The map is in this process, so no answer can be lost on the way
// back; an adapter over a server declares InProcess false, and its harness
// puts a fault proxy (conformance/faultproxy) between client and server.
func (s *rowStore) Traits() driver.Traits {
	return driver.Traits{
		Atomic:             true,
		Expiry:             driver.ExpiryModel{Kind: driver.ExpiryReaderFiltered},
		MaxClockSkew:       s.purge.Delay,
		MaxClockSkewOption: "withPurgeDelay",
		InProcess:          true,
	}
}

func opError(op, key string, err error) error {
	return &driver.OpError{Backend: "rows", Op: op, Key: key, Err: err}
}

// live is key's row unless it is absent or expired (s.mu held).
func (s *rowStore) live(key string) (row, bool) {
	r, ok := s.rows[key]
	if !ok || !s.readsExpired && !s.now().Before(r.expires) {
		return row{}, false
	}
	return r, true
}

func (s *rowStore) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	if err := ctx.Err(); err != nil {
		return nil, driver.NoVersion, opError("get", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.live(key)
	if !ok {
		return nil, driver.NoVersion, driver.ErrNotFound
	}
	return clone(r.value), r.version, nil
}

func (s *rowStore) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	if err := ctx.Err(); err != nil {
		return driver.NoVersion, opError("compare-and-swap", key, err)
	}
	if ttl <= 0 {
		return driver.NoVersion, opError("compare-and-swap", key, fmt.Errorf("ttl %v is not positive", ttl))
	}
	s.mu.Lock()
	r, _ := s.live(key) // an expired row is absent: NoVersion replaces it
	if r.version != old {
		s.mu.Unlock()
		return driver.NoVersion, &driver.ConflictError{Value: clone(r.value), Version: r.version}
	}
	s.last++
	s.rows[key] = row{value: clone(value), version: s.last, expires: s.now().Add(ttl)}
	v := s.last
	s.mu.Unlock()
	s.purger.Wrote()
	return v, nil
}

func (s *rowStore) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	if err := ctx.Err(); err != nil {
		return opError("compare-and-delete", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.live(key)
	switch {
	case !ok:
		return driver.ErrNotFound
	case r.version != old:
		return &driver.ConflictError{Value: clone(r.value), Version: r.version}
	}
	delete(s.rows, key)
	return nil
}

// Purge deletes at most one batch of rows expired more than the purge's
// Delay ago, the statement adapter.Purger runs after every so many writes.
func (s *rowStore) Purge(ctx context.Context) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, opError("purge", "", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cut := s.now().Add(-s.purge.Delay)
	var n int64
	for k, r := range s.rows {
		if n == int64(s.purge.Batch) {
			break
		}
		if r.expires.Before(cut) {
			delete(s.rows, k)
			n++
		}
	}
	return n, nil
}

// Close waits for a purge under way.
func (s *rowStore) Close() error {
	s.purger.Close()
	return nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}

// rowHarness gives each conformance case a table of its own, and reaches
// the rows behind the adapter's back as another program would: to read how
// long a row is kept and to plant a row the adapter did not write. It
// moves the stores' clock (conformance.TimeAdvancer), as a database's
// clock would move, so that the suite sees when readers drop a row.
type rowHarness struct {
	mu           sync.Mutex
	stores       []*rowStore
	advance      time.Duration
	readsExpired bool // the negative control's stores
}

func (h *rowHarness) MakeStore(context.Context) (driver.Store, error) {
	s, err := newRowStore()
	if err != nil {
		return nil, err
	}
	s.readsExpired = h.readsExpired
	s.now = func() time.Time {
		h.mu.Lock()
		defer h.mu.Unlock()
		return time.Now().Add(h.advance)
	}
	h.mu.Lock()
	h.stores = append(h.stores, s)
	h.mu.Unlock()
	return s, nil
}

func (h *rowHarness) Advance(_ context.Context, d time.Duration) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.advance += d
	return nil
}

func (h *rowHarness) Close() {
	for _, s := range h.stores {
		s.Close()
	}
}

// Lifetime is how long key's row stays readable: until a purge may delete
// it, its expiry plus the purge's Delay.
func (h *rowHarness) Lifetime(_ context.Context, st driver.Store, key string) (time.Duration, error) {
	s := st.(*rowStore)
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[key]
	if !ok {
		return 0, driver.ErrNotFound
	}
	return r.expires.Add(s.purge.Delay).Sub(s.now()), nil
}

func (h *rowHarness) ForeignShapes() []string { return []string{"text row"} }

// PlantForeign stores a row another program wrote: not a record, with a
// version the adapter never handed out and no expiry to speak of.
func (h *rowHarness) PlantForeign(_ context.Context, st driver.Store, key, _ string) error {
	s := st.(*rowStore)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last++
	s.rows[key] = row{value: []byte("written by another program"), version: s.last, expires: s.now().Add(100 * 365 * 24 * time.Hour)}
	return nil
}

// TestExampleAdapterConforms runs the whole conformance suite over
// rowStore: an adapter written with this package passes it with one call.
func TestExampleAdapterConforms(t *testing.T) {
	conformance.Run(t, func(context.Context, *testing.T) (conformance.Harness, error) {
		return &rowHarness{}, nil
	})
}

// TestExampleAdapterBugCaught is the negative control: the same adapter
// with a read that forgot to filter expired rows fails the suite, on the
// promise that an entry vanishes when its TTL ends.
func TestExampleAdapterBugCaught(t *testing.T) {
	h := &rowHarness{readsExpired: true}
	defer h.Close()
	err := conformance.Check(t.Context(), h, conformance.WithSkipSlow(true))
	if !errors.Is(err, conformance.PromiseID("expiry-not-late")) {
		t.Fatalf("conformance.Check over a store that reads expired rows = %v, want a failure of %v", err, "expiry-not-late")
	}
}

// TestExampleAdapterOptions: every bad option is reported at once, named
// by the option that set it.
func TestExampleAdapterOptions(t *testing.T) {
	_, err := newRowStore(withPurgeEvery(-1), withPurgeDelay(0))
	var oe *driver.OptionError
	if !errors.As(err, &oe) {
		t.Fatalf("newRowStore(bad options) = %v, want a *driver.OptionError", err)
	}
	for _, want := range []string{"WithPurgeEvery", "WithPurgeDelay"} {
		if !containsOption(err, want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

func containsOption(err error, option string) bool {
	var joined interface{ Unwrap() []error }
	errs := []error{err}
	if errors.As(err, &joined) {
		errs = joined.Unwrap()
	}
	for _, e := range errs {
		var oe *driver.OptionError
		if errors.As(e, &oe) && oe.Option == option {
			return true
		}
	}
	return false
}
