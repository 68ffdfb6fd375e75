package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/postgres"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/robustness"
	"github.com/kvbreaker/kvbreaker/internal/testservers/pgtest"
)

// pgInject kills the server (SIGKILL to every process; the heal restarts
// it with crash recovery), stops it (fast shutdown; restarted at the
// heal) or pauses it (SIGSTOP; SIGCONT at the heal). None loses a
// committed write: the server commits synchronously, and with fsync off a
// commit is in the operating system's cache, which a killed process does
// not take with it.
func pgInject(s *pgtest.Server) func(ctx context.Context, f robustness.Fault) (func(context.Context) error, error) {
	return func(ctx context.Context, f robustness.Fault) (func(context.Context) error, error) {
		switch f.Kind {
		case "kill":
			s.Kill()
			return s.Restart, nil
		case "restart":
			s.Stop()
			return s.Restart, nil
		case "pause":
			if err := s.Pause(); err != nil {
				return nil, err
			}
			return func(context.Context) error { return s.Resume() }, nil
		}
		return nil, fmt.Errorf("unknown fault %q", f.Kind)
	}
}

// TestRobustness runs the robustness harness (internal/robustness) on a
// PostgreSQL server of its own that is killed, restarted and paused on a
// schedule drawn from the seed, each worker with its own pool, and holds
// the history to every invariant, linearizability included. Replay a
// seed with -args -seed N; longer runs: -args -seeds 5 -faultphase 2m.
func TestRobustness(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time fault schedule (-short)")
	}
	srv := ownServer(t)
	for _, seed := range robustness.Seeds() {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Logf("replay: go test -run 'TestRobustness$' ./backends/postgres/ -args -seed %d -faultphase %v", seed, robustness.FaultPhase(8*time.Second))
			prefix := uniquePrefix(t)
			rep, err := robustness.Run(t.Context(), robustness.Config{
				Store: "postgres",
				Seed:  seed,
				NewStore: func(ctx context.Context, worker int) (driver.Store, error) {
					st, err := postgres.New(newPool(t, srv.URL()+"&connect_timeout=1"), table)
					if err != nil {
						return nil, err
					}
					return kvbreaker.Prefixed(st, prefix)
				},
				Faults:     []string{"kill", "restart", "pause"},
				Inject:     pgInject(srv),
				FaultPhase: robustness.FaultPhase(8 * time.Second),
				// A restart replays the log and the pools dial anew.
				Settle: 3 * time.Second,
				Slack:  time.Second,
				Settings: kvbreaker.Settings{
					FailureThreshold: 3, FailureWindow: 2 * time.Second, RecoveryDelay: time.Second,
					CallTimeout: 500 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
				},
				Logf: t.Logf,
			})
			t.Log(rep)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Faults == 0 || rep.Decisions["probe"] == 0 {
				t.Fatalf("the run injected no fault or never probed: %v", rep)
			}
		})
	}
}

// standbyPair is a primary and its streaming standby; which is which
// changes with each failover.
type standbyPair struct {
	mu               sync.Mutex
	primary, standby *pgtest.Server
}

// inject fails over. "failover": the primary is killed (SIGKILL to every
// process) and the standby promoted (pg_ctl promote), as an operator or a
// failover manager does once the primary is gone. "lagging-failover": the
// standby is paused (SIGSTOP) and its link cut (the primary's walsender
// terminated), so it misses what the primary commits meanwhile; the
// failover happens at the heal, the standby resumed just before its
// promotion. Each heal brings the old
// primary back as a standby of the new one (its data copied afresh by
// pg_basebackup -R) and waits until it streams, so each fault starts from
// a healthy pair.
func (p *standbyPair) inject(ctx context.Context, f robustness.Fault) (func(context.Context) error, error) {
	p.mu.Lock()
	old, next := p.primary, p.standby
	p.mu.Unlock()
	failover := func(ctx context.Context) error {
		old.Kill()
		if err := next.Resume(); err != nil {
			return err
		}
		if err := next.Promote(ctx); err != nil {
			return err
		}
		p.mu.Lock()
		p.primary, p.standby = next, old
		p.mu.Unlock()
		return nil
	}
	rejoin := func(ctx context.Context) error { return old.Rejoin(ctx, next) }
	switch f.Kind {
	case "failover":
		if err := failover(ctx); err != nil {
			return nil, err
		}
		return rejoin, nil
	case "lagging-failover":
		if err := next.Pause(); err != nil {
			return nil, err
		}
		// A paused standby's socket still takes what the primary sends
		// (megabytes on loopback): the link is cut too, so the standby
		// misses every commit from now on.
		if out, err := old.Query(ctx, "select pg_terminate_backend(pid) from pg_stat_replication"); err != nil {
			return nil, fmt.Errorf("cut the standby's link: %v: %s", err, out)
		}
		return func(ctx context.Context) error {
			if err := failover(ctx); err != nil {
				return err
			}
			return rejoin(ctx)
		}, nil
	}
	return nil, fmt.Errorf("unknown fault %q", f.Kind)
}

// TestRobustnessStandby runs the robustness harness on a primary with a
// streaming standby (pg_basebackup -R), failed over by killing the
// primary and promoting the standby, with the standby in step or lagging
// (paused, its link cut). Each worker's pool names both servers with
// target_session_attrs=read-write, so it follows the promotion.
// Replication is asynchronous by default: the run measures the committed
// writes a promotion loses (a store-declared allowance). With
// synchronous_standby_names = '*' every commit waits for the standby: no
// acknowledged write may be lost, and every invariant but
// linearizability holds. Long runs only (-args -faultphase D; make
// robustness).
func TestRobustnessStandby(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time fault schedule (-short)")
	}
	if robustness.FaultPhase(0) == 0 {
		t.Skip("a longer run: -args -faultphase D (make robustness)")
	}
	for _, seed := range robustness.Seeds() {
		for _, syncRep := range []bool{false, true} {
			name := "async"
			if syncRep {
				name = "sync"
			}
			t.Run(fmt.Sprintf("%s/seed=%d", name, seed), func(t *testing.T) {
				t.Logf("replay: go test -run 'TestRobustnessStandby/%s/' ./backends/postgres/ -args -seed %d -faultphase %v", name, seed, robustness.FaultPhase(0))
				var o pgtest.Options
				if syncRep {
					o.Settings = []string{"synchronous_standby_names=*"}
				}
				// The standby first: with synchronous_standby_names
				// every commit waits for one.
				p := &standbyPair{primary: pgtest.MustStartWith(t, o)}
				p.standby = pgtest.MustStartStandby(t, p.primary)
				pool := newPool(t, p.primary.URL())
				if err := postgres.CreateTable(t.Context(), pool, table); err != nil {
					t.Fatal(err)
				}
				pool.Close()
				url := "postgres://" + pgtest.User + "@" + p.primary.Addr() + "," + p.standby.Addr() +
					"/postgres?sslmode=disable&connect_timeout=1&target_session_attrs=read-write"
				prefix := uniquePrefix(t)
				rep, err := robustness.Run(t.Context(), robustness.Config{
					Store: "postgres-standby-" + name,
					Seed:  seed,
					NewStore: func(ctx context.Context, worker int) (driver.Store, error) {
						st, err := postgres.New(newPool(t, url), table)
						if err != nil {
							return nil, err
						}
						return kvbreaker.Prefixed(st, prefix)
					},
					Faults:           []string{"failover", "lagging-failover"},
					Inject:           p.inject,
					FaultPhase:       robustness.FaultPhase(0),
					Settle:           3 * time.Second,
					Slack:            time.Second,
					LosesAckedWrites: !syncRep,
					Settings: kvbreaker.Settings{
						FailureThreshold: 3, FailureWindow: 2 * time.Second, RecoveryDelay: time.Second,
						CallTimeout: 500 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
					},
					Logf: t.Logf,
				})
				t.Log(rep)
				for _, a := range rep.Allowed[:min(5, len(rep.Allowed))] {
					t.Log("allowed (acknowledged writes lost): ", a)
				}
				if syncRep {
					// No acknowledged commit may be lost. A commit
					// whose wait for the standby the client gave up
					// on (CallTimeout) is committed locally and seen by
					// every reader of the primary; if the standby
					// missed it (lagging-failover), its promotion undoes
					// it. Porcupine flags those keys: logged, not
					// failed; every other invariant holds.
					var strict []error
					for _, v := range rep.Violations {
						if strings.Contains(v.Error(), robustness.InvLinearizable+" (") {
							t.Log("linearizable finding (reads of commits whose wait for the standby was cancelled): ", v)
							continue
						}
						strict = append(strict, v)
					}
					if err != nil && len(rep.Violations) == 0 {
						t.Fatal(err)
					}
					if rep.LostWrites != 0 {
						strict = append(strict, fmt.Errorf("synchronous_standby_names: %d acknowledged writes lost", rep.LostWrites))
					}
					err = errors.Join(strict...)
				}
				if err != nil {
					t.Fatal(err)
				}
				if rep.Faults == 0 || rep.Decisions["probe"] == 0 {
					t.Fatalf("the run injected no fault or never probed: %v", rep)
				}
			})
		}
	}
}
