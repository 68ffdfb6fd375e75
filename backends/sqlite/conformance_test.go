package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/sqlite"
	"github.com/kvbreaker/kvbreaker/conformance"
	"github.com/kvbreaker/kvbreaker/driver"
)

// harness makes Stores over one temporary file, each case under a prefix of
// its own, all judging expiry by one fake clock the suite moves
// (conformance.TimeAdvancer): the store has no clock but the one it is
// given, so moving it is moving every clock the store judges by.
type harness struct {
	path  string
	clock *fakeClock
	store *sqlite.Store
	n     atomic.Int64

	mu       sync.Mutex
	prefixes map[driver.Store]string
	extra    []*sqlite.Store
}

// harnessAt is a harness over the file at path.
func harnessAt(ctx context.Context, path string) (*harness, error) {
	h := &harness{path: path, clock: newFakeClock(), prefixes: map[driver.Store]string{}}
	s, err := sqlite.Open(ctx, h.path, sqlite.WithClock(h.clock.Now))
	if err != nil {
		return nil, err
	}
	h.store = s
	return h, nil
}

func (h *harness) MakeStore(ctx context.Context) (driver.Store, error) {
	prefix := fmt.Sprintf("conformance/%d/", h.n.Add(1))
	s, err := kvbreaker.Prefixed(h.store, prefix)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.prefixes[s] = prefix
	h.mu.Unlock()
	return s, nil
}

func (h *harness) prefixOf(s driver.Store) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	prefix, ok := h.prefixes[s]
	if !ok {
		return "", fmt.Errorf("not a store of this harness: %T", s)
	}
	return prefix, nil
}

func (h *harness) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.extra {
		s.Close()
	}
	h.store.Close()
}

func (h *harness) Describe() string { return "sqlite file " + h.path }

// Advance implements conformance.TimeAdvancer.
func (h *harness) Advance(_ context.Context, d time.Duration) error {
	h.clock.Advance(d)
	return nil
}

// Lifetime implements conformance.LifetimeReporter: the row's purge_at
// minus the clock, read with SQL outside the store. The store filters
// expiry by the reader's clock (driver.ExpiryReaderFiltered), so what no
// reader can find any more is the row the purge deletes.
func (h *harness) Lifetime(ctx context.Context, s driver.Store, key string) (time.Duration, error) {
	prefix, err := h.prefixOf(s)
	if err != nil {
		return 0, err
	}
	var purgeAt int64
	err = h.store.DB().QueryRowContext(ctx, "SELECT purge_at FROM kvbreaker WHERE key = ? AND expires_at > ?", prefix+key, math.MinInt64).Scan(&purgeAt)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, driver.ErrNotFound
	case err != nil:
		return 0, err
	case purgeAt == math.MaxInt64:
		return driver.NoExpiry, nil
	}
	return time.Duration(purgeAt - h.clock.Now().UnixNano()), nil
}

// MakeSkewedStore implements conformance.SkewedStoreMaker: a second
// Store on the same file (its own connections, as another process has)
// whose clock runs offset from the harness's.
func (h *harness) MakeSkewedStore(ctx context.Context, s driver.Store, offset time.Duration) (driver.Store, error) {
	prefix, err := h.prefixOf(s)
	if err != nil {
		return nil, err
	}
	other, err := sqlite.Open(ctx, h.path, sqlite.WithClock(func() time.Time { return h.clock.Now().Add(offset) }))
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	h.extra = append(h.extra, other)
	h.mu.Unlock()
	return kvbreaker.Prefixed(other, prefix)
}

// foreignRows are rows another program can leave at a key within the
// table's types and constraints (STRICT, version > 0), as the values of
// (value, version, expires_at); expires_at MaxInt64 is no expiry.
var foreignRows = []struct {
	name    string
	value   []byte
	version int64
	expires func(now time.Time) int64
}{
	{"bytes that are no record, version 1, no expiry", []byte("\x00garbage"), 1, func(time.Time) int64 { return math.MaxInt64 }},
	{"empty value, no expiry", []byte{}, 7, func(time.Time) int64 { return math.MaxInt64 }},
	{"version above the counter, expiring in an hour", []byte("garbage"), 1 << 62, func(now time.Time) int64 { return now.Add(time.Hour).UnixNano() }},
}

// ForeignShapes implements conformance.ForeignPlanter.
func (h *harness) ForeignShapes() []string {
	names := make([]string, len(foreignRows))
	for i, r := range foreignRows {
		names[i] = r.name
	}
	return names
}

// PlantForeign implements conformance.ForeignPlanter with SQL on the
// store's database handle, outside the store.
func (h *harness) PlantForeign(ctx context.Context, s driver.Store, key, shape string) error {
	prefix, err := h.prefixOf(s)
	if err != nil {
		return err
	}
	for _, r := range foreignRows {
		if r.name == shape {
			_, err := h.store.DB().ExecContext(ctx, `INSERT INTO kvbreaker (key, value, version, expires_at, purge_at) VALUES (?1, ?2, ?3, ?4, ?4)
ON CONFLICT (key) DO UPDATE SET value = ?2, version = ?3, expires_at = ?4, purge_at = ?4`, prefix+key, r.value, r.version, r.expires(h.clock.Now()))
			return err
		}
	}
	return fmt.Errorf("unknown foreign shape %q", shape)
}

// BreakFeed implements conformance.FeedBreaker. A follower reads a file,
// not a connection, and what can break its feed is a purge of changes it
// has not read (it fell behind by more than WithPurgeDelay): this records
// such a purge, as Purge does, past every version given so far, so every
// follower's next read must report Lost and resynchronise.
func (h *harness) BreakFeed(ctx context.Context) error {
	_, err := h.store.DB().ExecContext(ctx, `UPDATE kvbreaker_meta SET value = (SELECT value + 1 FROM kvbreaker_meta WHERE name = 'version')
WHERE name IN ('version', 'purged')`)
	return err
}

// lostAnswers is why the lost-answer promise holds without an
// AnswerDropper.
const lostAnswers = "no network between the store and the file: a write's answer is COMMIT's own result in the calling process, " +
	"the store never resends a write, and a context that ends during COMMIT is reported as an unknown outcome (matching ctx.Err())"

func TestConformance(t *testing.T) {
	conformance.Run(t, newWipingHarness, waivers...)
}

// conformanceOn runs the suite over the file at path.
func conformanceOn(t *testing.T, path string) {
	conformance.Run(t, func(ctx context.Context, _ *testing.T) (conformance.Harness, error) { return harnessAt(ctx, path) }, waivers...)
}

var waivers = []conformance.Option{
	conformance.Waive("lost-answer-cas", lostAnswers),
	conformance.Waive("lost-answer-delete", lostAnswers),
	conformance.Waive("lost-answer-breaker", lostAnswers),
}

// TestConformanceMissingFile: a store whose file is missing fails Open with
// a *FileError naming the path, at once.
func TestConformanceMissingFile(t *testing.T) {
	path := tempDB(t)
	_, err := sqlite.Open(t.Context(), path, sqlite.WithCreate(false))
	fe, ok := errors.AsType[*sqlite.FileError](err)
	if !ok || !errors.Is(err, sqlite.ErrFileMissing) || fe.Path != path {
		t.Fatalf("Open of a missing file = %v, want a *FileError matching ErrFileMissing naming %s", err, path)
	}
}
