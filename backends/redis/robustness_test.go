package redis_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/redis"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/robustness"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
)

// robustSettings are the fleet's Breaker settings on Redis.
func robustSettings() kvbreaker.Settings {
	return kvbreaker.Settings{
		FailureThreshold: 3, FailureWindow: 2 * time.Second, RecoveryDelay: time.Second,
		CallTimeout: callTimeout, Logger: slog.New(slog.DiscardHandler),
	}
}

// robustConfig is a run of the harness whose workers each have their own
// client from newClient, under prefix.
func robustConfig(t *testing.T, store string, seed int64, prefix string, newClient func() goredis.UniversalClient, opts ...redis.Option) robustness.Config {
	return robustness.Config{
		Store: store,
		Seed:  seed,
		NewStore: func(ctx context.Context, worker int) (driver.Store, error) {
			st, err := redis.New(newClient(), opts...)
			if err != nil {
				return nil, err
			}
			return kvbreaker.Prefixed(st, prefix)
		},
		// A failover client finds the new primary within a second or two
		// of Sentinel naming it (measured in TestSentinelFailover).
		Settle:   2 * time.Second,
		Slack:    callSlack,
		Settings: robustSettings(),
		Logf:     t.Logf,
	}
}

// sentinelInject kills or pauses the primary of r, so that the Sentinels
// promote the replica; the heal brings the old primary back as a replica
// (a killed one restarted empty with --replicaof the new primary, a paused
// one resumed and demoted by Sentinel if it was replaced) and waits until
// the pair is in sync, so each fault starts from a healthy pair.
func sentinelInject(r *redistest.Replicated) func(ctx context.Context, f robustness.Fault) (func(context.Context) error, error) {
	return func(ctx context.Context, f robustness.Fault) (func(context.Context) error, error) {
		primary, err := r.Primary(ctx)
		if err != nil {
			return nil, err
		}
		switch f.Kind {
		case "kill-primary":
			primary.Kill()
			return func(ctx context.Context) error {
				np, err := r.WaitFailover(ctx, primary.Addr())
				if err != nil {
					return err
				}
				if err := primary.RestartAsReplica(ctx, np.Addr()); err != nil {
					return err
				}
				return r.WaitSynced(ctx, np)
			}, nil
		case "pause-primary":
			if err := primary.Pause(); err != nil {
				return nil, err
			}
			return func(ctx context.Context) error {
				if err := primary.Resume(); err != nil {
					return err
				}
				return healPair(ctx, r, primary)
			}, nil
		}
		return nil, fmt.Errorf("unknown fault %q", f.Kind)
	}
}

// healPair waits until the Sentinels agree on a primary and the other
// server replicates it, demoting old if it was replaced while paused (as
// Sentinel does on its next look at it, up to 10 s later). A failover the
// Sentinels started during a short pause can still settle either way, so
// it looks again until the pair is in sync.
func healPair(ctx context.Context, r *redistest.Replicated, old *redistest.Server) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		np, err := r.Primary(ctx)
		if err != nil {
			return err
		}
		if np != old {
			if err := replicaOf(ctx, old.Addr(), np.Addr()); err != nil {
				return err
			}
		}
		sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
		err = r.WaitSynced(sctx, np)
		scancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
	}
}

// replicaOf makes the server at addr a replica of primary.
func replicaOf(ctx context.Context, addr, primary string) error {
	c := goredis.NewClient(&goredis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer c.Close()
	host, port, err := net.SplitHostPort(primary)
	if err != nil {
		return err
	}
	return c.ReplicaOf(ctx, host, port).Err()
}

// singleInject pauses a single server or drops every client connection
// (CLIENT KILL: answers in flight are lost). Neither loses a write the
// server acknowledged; a restart would (the test server keeps nothing on
// disk), so it is not among these faults.
func singleInject(s *redistest.Server, admin *goredis.Client) func(ctx context.Context, f robustness.Fault) (func(context.Context) error, error) {
	return func(ctx context.Context, f robustness.Fault) (func(context.Context) error, error) {
		switch f.Kind {
		case "pause":
			if err := s.Pause(); err != nil {
				return nil, err
			}
			return func(context.Context) error { return s.Resume() }, nil
		case "drop-connections":
			err := admin.ClientKillByFilter(ctx, "TYPE", "normal", "SKIPME", "yes").Err()
			return func(context.Context) error { return nil }, err
		}
		return nil, fmt.Errorf("unknown fault %q", f.Kind)
	}
}

// checkRun fails t on a violation or a run that never faulted or probed.
func checkRun(t *testing.T, rep robustness.Report, err error) {
	t.Helper()
	t.Log(rep)
	for _, a := range rep.Allowed[:min(5, len(rep.Allowed))] {
		t.Log("allowed (acknowledged writes lost): ", a)
	}
	if err != nil {
		t.Fatal(err)
	}
	if rep.Faults == 0 || rep.Decisions["probe"] == 0 {
		t.Fatalf("the run injected no fault or never probed: %v", rep)
	}
}

// TestRobustness runs the robustness harness (internal/robustness) on
// Redis: a single server paused or its connections dropped, held to every
// invariant including linearizability; a primary with a replica behind
// three Sentinels, the primary killed or paused so that the replica is
// promoted, with Redis's asynchronous replication, where the run measures
// the acknowledged writes a failover loses and what they cost the fleet
// (a store-declared allowance); and, under make robustness, the same
// failovers with WithWaitReplicas (no acknowledged write lost) and with
// WithWaitReplicas and min-replicas-to-write (every invariant). Replay a
// seed with -args -seed N; longer runs: -args -seeds 5 -faultphase 2m.
func TestRobustness(t *testing.T) {
	if testing.Short() {
		t.Skip("real-time fault schedules (-short)")
	}
	long := robustness.FaultPhase(0) > 0
	for _, seed := range robustness.Seeds() {
		t.Run(fmt.Sprintf("single/seed=%d", seed), func(t *testing.T) {
			t.Logf("replay: go test -run 'TestRobustness/single' ./backends/redis/ -args -seed %d -faultphase %v", seed, robustness.FaultPhase(4*time.Second))
			s := redistest.MustStart(t)
			admin := newClient(t, s.Addr())
			cfg := robustConfig(t, "redis", seed, uniquePrefix(t), func() goredis.UniversalClient {
				return newClient(t, s.Addr(), func(o *goredis.Options) {
					o.DialTimeout, o.MinRetryBackoff, o.MaxRetryBackoff = 300*time.Millisecond, time.Millisecond, 20*time.Millisecond
				})
			})
			cfg.Faults, cfg.Inject = []string{"pause", "drop-connections"}, singleInject(s, admin)
			cfg.FaultPhase = robustness.FaultPhase(4 * time.Second)
			rep, err := robustness.Run(t.Context(), cfg)
			checkRun(t, rep, err)
		})
		t.Run(fmt.Sprintf("sentinel/seed=%d", seed), func(t *testing.T) {
			t.Logf("replay: go test -run 'TestRobustness/^sentinel$/' ./backends/redis/ -args -seed %d -faultphase %v", seed, robustness.FaultPhase(8*time.Second))
			r := replicated(t)
			cfg := robustConfig(t, "redis-sentinel", seed, uniquePrefix(t), func() goredis.UniversalClient { return failoverClient(t, r) })
			cfg.Faults, cfg.Inject = []string{"kill-primary", "pause-primary"}, sentinelInject(r)
			cfg.FaultPhase = robustness.FaultPhase(8 * time.Second)
			// Asynchronous replication: a failover may lose acknowledged
			// writes, so this run measures the loss and is not held to
			// linearizability (nor one probe per restraint, nor the
			// half-open bound) where a detected loss explains the finding;
			// every other finding fails it.
			cfg.LosesAckedWrites = true
			rep, err := robustness.Run(t.Context(), cfg)
			checkRun(t, rep, err)
		})
		t.Run(fmt.Sprintf("sentinel-wait/seed=%d", seed), func(t *testing.T) {
			if !long {
				t.Skip("a longer run: -args -faultphase D (make robustness)")
			}
			t.Logf("replay: go test -run 'TestRobustness/sentinel-wait/' ./backends/redis/ -args -seed %d -faultphase %v", seed, robustness.FaultPhase(8*time.Second))
			r := replicated(t)
			cfg := robustConfig(t, "redis-sentinel-wait", seed, uniquePrefix(t), func() goredis.UniversalClient { return failoverClient(t, r) },
				redis.WithWaitReplicas(1, 100*time.Millisecond))
			cfg.Faults, cfg.Inject = []string{"kill-primary", "pause-primary"}, sentinelInject(r)
			cfg.FaultPhase = robustness.FaultPhase(8 * time.Second)
			rep, err := robustness.Run(t.Context(), cfg)
			// WAIT keeps every acknowledged write: none may be lost. It
			// does not keep readers from seeing writes that are never
			// acknowledged: a paused primary, resumed after its replica
			// was promoted, is still a primary until it is demoted and
			// takes the writes of the clients still connected to it
			// (ErrNotReplicated to the writer, visible to every reader
			// of that server); its resync discards them. Porcupine
			// flags such keys, so linearizable findings are logged, not
			// failed; every other invariant holds (docs/robustness.md;
			// sentinel-minreplicas is the configuration that passes).
			var strict []error
			for _, v := range rep.Violations {
				if strings.Contains(v.Error(), robustness.InvLinearizable+" (") {
					t.Log("linearizable finding (reads of unacknowledged writes on a resumed old primary): ", v)
					continue
				}
				strict = append(strict, v)
			}
			if err != nil && len(rep.Violations) == 0 {
				t.Fatal(err)
			}
			if rep.LostWrites != 0 {
				strict = append(strict, fmt.Errorf("WithWaitReplicas: %d acknowledged writes lost", rep.LostWrites))
			}
			checkRun(t, rep, errors.Join(strict...))
		})
		t.Run(fmt.Sprintf("sentinel-minreplicas/seed=%d", seed), func(t *testing.T) {
			if !long {
				t.Skip("a longer run: -args -faultphase D (make robustness)")
			}
			t.Logf("replay: go test -run 'TestRobustness/sentinel-minreplicas/' ./backends/redis/ -args -seed %d -faultphase %v", seed, robustness.FaultPhase(8*time.Second))
			// min-replicas-to-write makes a primary refuse writes
			// (NOREPLICAS) without a connected replica whose last
			// acknowledgement is at most min-replicas-max-lag (1 s) old,
			// so a resumed old primary takes none once it has seen its
			// replica go; WAIT keeps the acknowledged ones.
			// Held to every invariant, linearizability included.
			r := redistest.MustStartReplicated(t, redistest.ReplicatedOptions{
				ServerArgs: append(slices.Clone(fastSync), "--min-replicas-to-write", "1", "--min-replicas-max-lag", "1"),
			})
			cfg := robustConfig(t, "redis-sentinel-minreplicas", seed, uniquePrefix(t), func() goredis.UniversalClient { return failoverClient(t, r) },
				redis.WithWaitReplicas(1, 100*time.Millisecond))
			cfg.Faults, cfg.Inject = []string{"kill-primary", "pause-primary"}, sentinelInject(r)
			cfg.FaultPhase = robustness.FaultPhase(8 * time.Second)
			rep, err := robustness.Run(t.Context(), cfg)
			checkRun(t, rep, err)
			if rep.LostWrites != 0 {
				t.Fatalf("%d acknowledged writes lost", rep.LostWrites)
			}
		})
	}
}
