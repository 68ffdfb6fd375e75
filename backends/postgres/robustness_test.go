package postgres_test

import (
	"context"
	"fmt"
	"log/slog"
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
			t.Logf("replay: go test -run TestRobustness ./backends/postgres/ -args -seed %d", seed)
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
