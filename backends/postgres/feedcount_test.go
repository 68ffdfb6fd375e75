package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kvbreaker/kvbreaker/backends/postgres"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
	"github.com/kvbreaker/kvbreaker/internal/mirrortest"
	"github.com/kvbreaker/kvbreaker/internal/model"
	"github.com/kvbreaker/kvbreaker/internal/testservers/pgtest"
)

// statsServer is a PostgreSQL of its own with pg_stat_statements, whose
// counts the feed's cost model is held to; started by the first test that
// needs it, closed by TestMain.
var statsServer struct {
	once sync.Once
	s    *pgtest.Server
	err  error
}

// countingServer returns the PostgreSQL that counts statements, with the
// table created and pg_stat_statements installed.
func countingServer(t *testing.T) *pgtest.Server {
	t.Helper()
	statsServer.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		s, err := pgtest.StartWith(ctx, pgtest.Options{Settings: []string{
			"shared_preload_libraries=pg_stat_statements",
			"pg_stat_statements.track_utility=on",
		}})
		if err != nil {
			statsServer.err = err
			return
		}
		statsServer.s = s
		pool, err := pgxpool.New(ctx, s.URL())
		if err != nil {
			statsServer.err = err
			return
		}
		defer pool.Close()
		if statsServer.err = postgres.CreateTable(ctx, pool, table); statsServer.err != nil {
			return
		}
		_, statsServer.err = pool.Exec(ctx, "CREATE EXTENSION pg_stat_statements")
	})
	if statsServer.err != nil {
		t.Fatalf("the PostgreSQL with pg_stat_statements: %v", statsServer.err)
	}
	return statsServer.s
}

func closeCountingServer() {
	if statsServer.s != nil {
		statsServer.s.Close()
	}
}

// resetCounts clears pg_stat_statements.
func resetCounts(t *testing.T, admin *pgxpool.Pool) {
	t.Helper()
	if _, err := admin.Exec(t.Context(), "SELECT pg_stat_statements_reset()"); err != nil {
		t.Fatal(err)
	}
}

// feedStatement names a statement as the feed model does; any other is
// named by its text, which no model knows.
func feedStatement(query string) string {
	switch {
	case strings.Contains(query, "to_regclass"):
		return "trigger check"
	case strings.Contains(query, "set_config("):
		return "set_config"
	case strings.HasPrefix(query, "LISTEN "):
		return "LISTEN"
	case strings.HasPrefix(query, "SELECT key, value, version,") && strings.Contains(query, "expires_at > now()"):
		return "snapshot"
	case strings.Contains(query, "pg_notify") && strings.Contains(query, "clock_timestamp()"):
		return "pg_notify dated"
	case strings.Contains(query, "pg_notify"):
		return "pg_notify"
	case query == "SELECT clock_timestamp()":
		return "clock_timestamp"
	}
	return query
}

// serverCounts reads what pg_stat_statements counted since its last
// reset, every statement named by name (feedStatement, or the store's
// own), less the test's own reads and reset of it.
func serverCounts(t *testing.T, admin *pgxpool.Pool, name func(string) string) map[string]int {
	t.Helper()
	rows, err := admin.Query(t.Context(), `SELECT query, calls FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	m := map[string]int{}
	for rows.Next() {
		var q string
		var calls int64
		if err := rows.Scan(&q, &calls); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(q, "pg_stat_statements") {
			continue
		}
		m[name(q)] += int(calls)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

// countedStore returns a Store over the counting server's table with a
// pool of its own, closed when t ends.
func countedStore(t *testing.T, s *pgtest.Server) *postgres.Store {
	t.Helper()
	st, err := postgres.New(newPool(t, s.URL()), table, postgres.WithPurgeEvery(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestFollowRequestsCounted holds the simulator's PostgreSQL feed model
// (model.FeedModels["postgres"], which internal/sim costs a mirror with)
// to what the server itself counts (pg_stat_statements) over one Follow:
// its session, a snapshot of 100 keys, and its beats every heartbeat. A
// statement Follow sends that the model leaves out fails it; so does a
// control model without the beat's pg_notify.
func TestFollowRequestsCounted(t *testing.T) {
	s := countingServer(t)
	admin := newPool(t, s.URL())
	backendtest.SessionHeld(t, 3, func(t *testing.T) error { return followRequestsCounted(t, s, admin) })
}

// followRequestsCounted is one run of TestFollowRequestsCounted; it returns
// the first Lost's error, if the feed lost its session, before it checks.
func followRequestsCounted(t *testing.T, s *pgtest.Server, admin *pgxpool.Pool) error {
	p := uniquePrefix(t)
	w := countedStore(t, s)
	const keys = 100
	for i := range keys {
		put(t, w, fmt.Sprintf("%s%d", p, i), driver.NoVersion, "v", time.Hour)
	}
	st := countedStore(t, s)
	warm(t, st)
	resetCounts(t, admin)

	f := &feed{wake: make(chan struct{}, 1), store: st}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- st.Follow(ctx, p, 50*time.Millisecond, f.fn) }()
	f.waitFor(t, "six Synced", func(ev []event) bool { return count(ev, driver.ChangeSynced) >= 6 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Follow returned %v", err)
	}
	counted := serverCounts(t, admin, feedStatement)
	ev := f.snapshot()
	if err := lostErr(ev); err != nil {
		return err
	}
	// The snapshot's Synced costs no beat; each other Synced is one.
	beats := count(ev, driver.ChangeSynced) - 1
	m := model.FeedModels["postgres"]
	use := model.FeedUse{Sessions: 1, Pages: m.Pages(keys), Keys: keys, Beats: beats}
	// slack 2: beats sent whose Synced the cancelled feed did not deliver.
	if err := m.Compare(use, counted, 2); err != nil {
		t.Fatal(err)
	}
	t.Logf("server counted %v over %d beats: %d statements, the model %d", counted, beats, mirrortest.Total(counted), m.Total(use))
	ctlModel := without(m, "pg_notify")
	if err := ctlModel.Compare(use, counted, 2); err == nil {
		t.Fatal("a model without the beat's pg_notify matched the server's count")
	}
	return nil
}

// lostErr returns the error of the first Lost in ev, nil when there is none.
func lostErr(ev []event) error {
	for _, e := range ev {
		if e.Kind == driver.ChangeLost {
			if e.Err == nil {
				return errors.New("Lost without an error")
			}
			return e.Err
		}
	}
	return nil
}

// warm makes st's pool open its connection and read once, as a Breaker's
// has before its feed starts, so that what is counted next is the feed's.
func warm(t *testing.T, st *postgres.Store) {
	t.Helper()
	if _, _, err := st.Get(t.Context(), "warm"); !errors.Is(err, driver.ErrNotFound) {
		t.Fatal(err)
	}
}

// without returns m less its request named name.
func without(m model.FeedModel, name string) model.FeedModel {
	c := m
	c.Requests = nil
	for _, r := range m.Requests {
		if r.Name != name {
			c.Requests = append(c.Requests, r)
		}
	}
	return c
}

// TestFollowDemandCounted: three feeds on demand over one prefix, one of
// them asked for beats: its beats reach the other two, which send none,
// and the statements the server counts over the whole run are, name by
// name, what the postgres feed model says the sessions, the beats on
// demand and the clock samples cost. A model that leaves out the dated
// pg_notify, or the clock sample, does not match.
func TestFollowDemandCounted(t *testing.T) {
	s := countingServer(t)
	admin := newPool(t, s.URL())
	backendtest.SessionHeld(t, 3, func(t *testing.T) error { return followDemandCounted(t, s, admin) })
}

// followDemandCounted is one run of TestFollowDemandCounted; it returns the
// first Lost's error, if a feed lost its session, before it checks.
func followDemandCounted(t *testing.T, s *pgtest.Server, admin *pgxpool.Pool) error {
	var stores []*postgres.Store
	for range 3 {
		st := countedStore(t, s)
		warm(t, st)
		stores = append(stores, st)
	}
	resetCounts(t, admin)
	sent0, samples0, _ := postgres.BeatCounts()
	const hb = 100 * time.Millisecond
	d := startDemand(t, stores, uniquePrefix(t), hb)
	// Asked more often than the heartbeat (every 10 ms), feed 0 sends one
	// beat per heartbeat at most.
	stop := d.ask(0)
	for _, i := range []int{1, 2} {
		d.feeds[i].waitFor(t, fmt.Sprintf("feed %d's fifth Synced", i), func(ev []event) bool { return count(ev, driver.ChangeSynced) >= 5 })
	}
	stop()
	// Until the beat in flight, if any, is back: feed 0's Synced are its
	// snapshot's and one per beat it sent (only it beats).
	d.feeds[0].waitFor(t, "feed 0's own beats back", func(ev []event) bool {
		sent, _, _ := postgres.BeatCounts()
		return count(ev, driver.ChangeSynced) == 1+sent-sent0
	})
	counted := serverCounts(t, admin, feedStatement)
	for i, f := range d.feeds {
		if err := lostErr(f.snapshot()); err != nil {
			return fmt.Errorf("feed %d: %w", i, err)
		}
	}
	sent, samples, _ := postgres.BeatCounts()
	m := model.FeedModels["postgres"]
	use := m.DemandStart(3)
	use.FleetBeats, use.Samples = sent-sent0, samples-samples0
	if use.FleetBeats < 4 || use.Samples < 2 {
		t.Errorf("%d beats on demand and %d clock samples for four Synced on the unasked feeds", use.FleetBeats, use.Samples)
	}
	if err := m.Compare(use, counted, 0); err != nil {
		t.Fatal(err)
	}
	t.Logf("server counted %v: %d statements, the model %d (%+v)", counted, mirrortest.Total(counted), m.Total(use), use)
	for _, leave := range []string{"pg_notify dated", "clock_timestamp"} {
		if err := without(m, leave).Compare(use, counted, 0); err == nil {
			t.Errorf("a model without %s matched the server's count", leave)
		}
	}
	return nil
}

// TestMirrorLightTraffic: the light-traffic run (mirrortest.Light) on
// PostgreSQL, counted by pg_stat_statements: idle with Mirror, for 2 s, no
// more than 2 statements a second in all; under light traffic the mirror
// costs less than a quarter of the statements per delivery of no mirror.
func TestMirrorLightTraffic(t *testing.T) {
	s := countingServer(t)
	admin := newPool(t, s.URL())
	prefix := uniquePrefix(t)
	r := mirrortest.Light{
		NewStore: func(t testing.TB) driver.Store { return isolate(t, countedStore(t.(*testing.T), s), prefix) },
		Reset:    func(t testing.TB) { resetCounts(t.(*testing.T), admin) },
		Count:    func(t testing.TB) map[string]int { return serverCounts(t.(*testing.T), admin, shortStatement) },
		Seconds:  mirrortest.LightSeconds(t),
	}.Run(t)
	t.Log(r)
	if r.IdlePerSecond() > 2 {
		t.Errorf("8 idle mirrors: %d statements in %v (%.1f/s), want no more than 2 a second: %v", mirrortest.Total(r.IdleCount), r.Idle, r.IdlePerSecond(), r.IdleCount)
	}
	if r.Ratio() >= 0.25 {
		t.Errorf("the mirror costs %.3f× the statements of no mirror, want well under 1", r.Ratio())
	}
}

// shortStatement is feedStatement, a statement it does not know (a
// Breaker's own) cut to its first 30 bytes.
func shortStatement(query string) string {
	if n := feedStatement(query); len(n) > 30 {
		return n[:30] + "…"
	}
	return feedStatement(query)
}
