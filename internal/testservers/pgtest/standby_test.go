package pgtest_test

import (
	"testing"

	"github.com/kvbreaker/kvbreaker/internal/testservers/pgtest"
)

// TestStandbyPromote: a standby made with pg_basebackup -R replays what
// the primary commits, refuses writes, and after Promote takes them; the
// old primary rejoins as a standby of the new one.
func TestStandbyPromote(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two PostgreSQL servers")
	}
	ctx := t.Context()
	p := pgtest.MustStart(t)
	s := pgtest.MustStartStandby(t, p)
	mustQuery := func(srv *pgtest.Server, sql string) string {
		t.Helper()
		out, err := srv.Query(ctx, sql)
		if err != nil {
			t.Fatalf("%s on %s: %v: %s", sql, srv.Addr(), err, out)
		}
		return out
	}
	mustQuery(p, "create table t (v int); insert into t values (1)")
	// The standby has it once it has replayed the primary's position.
	lsn := mustQuery(p, "select pg_current_wal_lsn()")
	for mustQuery(s, "select pg_last_wal_replay_lsn() >= '"+lsn+"'") != "t" {
	}
	if got := mustQuery(s, "select count(*) from t"); got != "1" {
		t.Fatalf("standby has %s rows, want 1", got)
	}
	if out, err := s.Query(ctx, "insert into t values (2)"); err == nil {
		t.Fatalf("a standby took a write: %s", out)
	}
	p.Kill()
	if err := s.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	mustQuery(s, "insert into t values (2)")
	if err := p.Rejoin(ctx, s); err != nil {
		t.Fatal(err)
	}
	if got := mustQuery(p, "select pg_is_in_recovery()"); got != "t" {
		t.Fatalf("the rejoined server is not a standby: pg_is_in_recovery %s", got)
	}
}
