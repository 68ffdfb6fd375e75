package robustness_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/leakcheck"
	"github.com/kvbreaker/kvbreaker/internal/robustness"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

var quiet = slog.New(slog.DiscardHandler)

// memoryConfig is a short run on one shared in-process store: no faults,
// so the negative controls' seeded bugs are all that can break a check.
func memoryConfig(t *testing.T, seed int64) robustness.Config {
	st := memory.New()
	return robustness.Config{
		Store:      "memory",
		Seed:       seed,
		NewStore:   func(context.Context, int) (driver.Store, error) { return st, nil },
		FaultPhase: 2 * time.Second,
		Settle:     200 * time.Millisecond,
		Slack:      500 * time.Millisecond,
		Settings: kvbreaker.Settings{
			FailureThreshold: 3, FailureWindow: time.Second, RecoveryDelay: 500 * time.Millisecond,
			CallTimeout: 500 * time.Millisecond, Logger: quiet,
		},
		HistoryDir: t.TempDir(),
	}
}

// TestMemoryPasses is the positive control: a correct Breaker over a
// correct store violates nothing, and the run opened, probed and closed
// circuits (so the checks had something to judge).
func TestMemoryPasses(t *testing.T) {
	t.Parallel()
	rep, err := robustness.Run(t.Context(), memoryConfig(t, 11))
	t.Log(rep)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Decisions["probe"] == 0 || rep.Decisions["hold"] == 0 || rep.Decisions["send"] == 0 {
		t.Fatalf("the run never opened and probed a circuit: %v", rep)
	}
}

// mustFlag runs cfg and requires a violation of inv naming the seed.
func mustFlag(t *testing.T, cfg robustness.Config, inv string) {
	t.Helper()
	rep, err := robustness.Run(t.Context(), cfg)
	t.Log(rep)
	if err == nil {
		t.Fatalf("the seeded bug went unnoticed: no %s violation", inv)
	}
	if !errors.Is(err, robustness.ErrViolation) {
		t.Fatalf("not a violation: %v", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, inv+" (store memory, seed "+fmt.Sprint(cfg.Seed)+")") {
		t.Fatalf("no %s violation naming seed %d in:\n%v", inv, cfg.Seed, msg)
	}
	if !strings.Contains(msg, "replay: -seed "+fmt.Sprint(cfg.Seed)) || rep.HistoryFile == "" {
		t.Fatalf("no history file or replay line in:\n%v", msg)
	}
	t.Logf("flagged as expected:\n%v", msg)
}

// wrapped gives every worker the same seeded bug.
func wrapped(f func(robustness.Caller) robustness.Caller) func(int, robustness.Caller) robustness.Caller {
	return func(_ int, b robustness.Caller) robustness.Caller { return f(b) }
}

// doubleFailure counts each failure twice.
type doubleFailure struct{ robustness.Caller }

func (d doubleFailure) Failure(ctx context.Context, host string) error {
	if err := d.Caller.Failure(ctx, host); err != nil {
		return err
	}
	return d.Caller.Failure(ctx, host)
}

func TestFailuresCountedOnceFlagsADoubleCount(t *testing.T) {
	t.Parallel()
	cfg := memoryConfig(t, 21)
	cfg.WrapBreaker = wrapped(func(b robustness.Caller) robustness.Caller { return doubleFailure{b} })
	mustFlag(t, cfg, robustness.InvFailuresOnce)
}

// holdAsProbe answers every third Hold with Probe.
type holdAsProbe struct {
	robustness.Caller
	n atomic.Int64
}

func (p *holdAsProbe) Allow(ctx context.Context, host string, heldSince time.Time) (kvbreaker.Verdict, error) {
	v, err := p.Caller.Allow(ctx, host, heldSince)
	if err == nil && v.Decision == kvbreaker.Hold && p.n.Add(1)%3 == 0 {
		v.Decision = kvbreaker.Probe
	}
	return v, err
}

func TestOneProbeFlagsASecondProbe(t *testing.T) {
	t.Parallel()
	cfg := memoryConfig(t, 31)
	cfg.WrapBreaker = wrapped(func(b robustness.Caller) robustness.Caller { return &holdAsProbe{Caller: b} })
	mustFlag(t, cfg, robustness.InvOneProbe)
}

// slowGets makes every 40th Get ignore its context and take longer than
// CallTimeout plus the slack.
type slowGets struct {
	driver.Store
	n     atomic.Int64
	delay time.Duration
}

func (s *slowGets) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	if s.n.Add(1)%40 == 0 {
		<-time.After(s.delay) // an adapter that does not honour ctx
	}
	return s.Store.Get(ctx, key)
}

func TestCallTimeFlagsAnAdapterIgnoringItsContext(t *testing.T) {
	t.Parallel()
	cfg := memoryConfig(t, 41)
	cfg.WrapStore = func(_ int, s driver.Store) driver.Store {
		return &slowGets{Store: s, delay: cfg.Settings.CallTimeout + cfg.Slack + 200*time.Millisecond}
	}
	mustFlag(t, cfg, robustness.InvCallTime)
}

// lostFailures never records a failure, so a dead host's circuit never
// opens.
type lostFailures struct{ robustness.Caller }

func (lostFailures) Failure(context.Context, string) error { return nil }

func TestRecoveryFlagsADeadHostNeverOpened(t *testing.T) {
	t.Parallel()
	cfg := memoryConfig(t, 51)
	cfg.WrapBreaker = wrapped(func(b robustness.Caller) robustness.Caller { return lostFailures{b} })
	mustFlag(t, cfg, robustness.InvRecovery)
}

// silentProbes never reports a probe's outcome.
type silentProbes struct {
	robustness.Caller
	mu      sync.Mutex
	probing map[string]bool
}

func (s *silentProbes) Allow(ctx context.Context, host string, heldSince time.Time) (kvbreaker.Verdict, error) {
	v, err := s.Caller.Allow(ctx, host, heldSince)
	s.mu.Lock()
	s.probing[host] = err == nil && v.Decision == kvbreaker.Probe
	s.mu.Unlock()
	return v, err
}

func (s *silentProbes) swallow(host string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.probing[host]
	s.probing[host] = false
	return p
}

func (s *silentProbes) Failure(ctx context.Context, host string) error {
	if s.swallow(host) {
		return nil
	}
	return s.Caller.Failure(ctx, host)
}

func (s *silentProbes) Success(ctx context.Context, host string) error {
	if s.swallow(host) {
		return nil
	}
	return s.Caller.Success(ctx, host)
}

func TestHalfOpenFlagsAProbeNeverAnswered(t *testing.T) {
	t.Parallel()
	cfg := memoryConfig(t, 61)
	cfg.WrapBreaker = wrapped(func(b robustness.Caller) robustness.Caller {
		return &silentProbes{Caller: b, probing: map[string]bool{}}
	})
	mustFlag(t, cfg, robustness.InvHalfOpen)
}

// staleReads answers every third Get whose key has changed since this
// worker's last read with what that read returned: a replica behind.
type staleReads struct {
	driver.Store
	mu   sync.Mutex
	n    int
	last map[string]readAt
}

type readAt struct {
	v   []byte
	ver driver.Version
}

func (s *staleReads) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	v, ver, err := s.Store.Get(ctx, key)
	if err != nil {
		return v, ver, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, ok := s.last[key]
	if ok && prev.ver != ver {
		s.n++
		if s.n%3 == 0 {
			return prev.v, prev.ver, nil
		}
	}
	s.last[key] = readAt{v, ver}
	return v, ver, nil
}

func TestLinearizableFlagsStaleReads(t *testing.T) {
	t.Parallel()
	cfg := memoryConfig(t, 71)
	st := memory.New()
	cfg.NewStore = func(context.Context, int) (driver.Store, error) {
		return &staleReads{Store: st, last: map[string]readAt{}}, nil
	}
	mustFlag(t, cfg, robustness.InvLinearizable)
}

// TestScheduleReplays: the seed alone decides the fault schedule.
func TestScheduleReplays(t *testing.T) {
	kinds := []string{"kill-leader", "partition", "pause"}
	a, b := robustness.Schedule(7, kinds, 30*time.Second), robustness.Schedule(7, kinds, 30*time.Second)
	if len(a) < 5 || fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("schedule of seed 7 not replayed: %v vs %v", a, b)
	}
	if c := robustness.Schedule(8, kinds, 30*time.Second); fmt.Sprint(a) == fmt.Sprint(c) {
		t.Fatalf("seeds 7 and 8 drew the same schedule %v", a)
	}
}

// TestScheduleShortPhaseHasAFault: every seed's schedule of a 4 s phase
// (the default run's) injects a fault, which the runs require.
func TestScheduleShortPhaseHasAFault(t *testing.T) {
	for seed := range int64(2000) {
		if s := robustness.Schedule(seed, []string{"pause"}, 4*time.Second); len(s) == 0 {
			t.Fatalf("seed %d: no fault in a 4 s phase", seed)
		}
	}
}

// ackedButLost acknowledges every fifth update of an existing record
// without applying it, with a version above every real one: a write the
// store acknowledged and then lost, as an asynchronous replica's promotion
// loses it.
type ackedButLost struct {
	driver.Store
	n atomic.Uint64
}

func (s *ackedButLost) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	if old != driver.NoVersion {
		if n := s.n.Add(1); n%5 == 0 {
			return driver.Version(1<<62 + n), nil
		}
	}
	return s.Store.CompareAndSwap(ctx, key, old, value, ttl)
}

func lossyConfig(t *testing.T, seed int64, allow bool) robustness.Config {
	cfg := memoryConfig(t, seed)
	st := &ackedButLost{Store: memory.New()}
	cfg.NewStore = func(context.Context, int) (driver.Store, error) { return st, nil }
	cfg.LosesAckedWrites = allow
	return cfg
}

// TestLostWritesFailStrictRuns: a store that loses acknowledged writes
// fails the linearizable check unless it declares it may, and the loss is
// measured either way.
func TestLostWritesFailStrictRuns(t *testing.T) {
	t.Parallel()
	cfg := lossyConfig(t, 81, false)
	mustFlag(t, cfg, robustness.InvLinearizable)
}

// TestLostWritesMeasuredWhenDeclared: with LosesAckedWrites the same store
// passes, and the report gives what the loss cost: lost writes, the
// failures they held, and the findings the allowance let through.
func TestLostWritesMeasuredWhenDeclared(t *testing.T) {
	t.Parallel()
	rep, err := robustness.Run(t.Context(), lossyConfig(t, 81, true))
	t.Log(rep)
	for _, a := range rep.Allowed[:min(3, len(rep.Allowed))] {
		t.Log("allowed: ", a)
	}
	if err != nil {
		t.Fatal(err)
	}
	if rep.LostWrites == 0 || rep.LostFailures == 0 || len(rep.Allowed) == 0 {
		t.Fatalf("the loss went unmeasured: %v", rep)
	}
}

// TestNoLossMeasuredOnACorrectStore: a store that loses nothing shows no
// lost write (the measure has no false positives on a correct history).
func TestNoLossMeasuredOnACorrectStore(t *testing.T) {
	t.Parallel()
	cfg := memoryConfig(t, 91)
	cfg.LosesAckedWrites = true
	rep, err := robustness.Run(t.Context(), cfg)
	t.Log(rep)
	if err != nil {
		t.Fatal(err)
	}
	if rep.LostWrites != 0 || rep.LostFailures != 0 || len(rep.Allowed) != 0 {
		t.Fatalf("losses measured on a store that loses nothing: %v", rep)
	}
}

// TestAllowanceKeepsOtherFindings: the allowance excuses only findings on
// keys that lost a write; a second probe on a store that loses nothing is
// still a violation.
func TestAllowanceKeepsOtherFindings(t *testing.T) {
	t.Parallel()
	cfg := memoryConfig(t, 31)
	cfg.LosesAckedWrites = true
	cfg.WrapBreaker = wrapped(func(b robustness.Caller) robustness.Caller { return &holdAsProbe{Caller: b} })
	mustFlag(t, cfg, robustness.InvOneProbe)
}

// TestAllowanceKeepsHalfOpenFindings: a circuit left half-open with no
// lost write to explain it is a violation under the allowance too.
func TestAllowanceKeepsHalfOpenFindings(t *testing.T) {
	t.Parallel()
	cfg := memoryConfig(t, 61)
	cfg.LosesAckedWrites = true
	cfg.WrapBreaker = wrapped(func(b robustness.Caller) robustness.Caller {
		return &silentProbes{Caller: b, probing: map[string]bool{}}
	})
	mustFlag(t, cfg, robustness.InvHalfOpen)
}

// lateAcks answers every other successful compare-and-swap 30 ms after
// applying it, as a write followed by WAIT is answered: another worker can
// read the new version, replace it and hear back first. overtaken counts
// the writes replaced before their own answer.
type lateAcks struct {
	driver.Store
	n, overtaken atomic.Int64
}

func (s *lateAcks) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	ver, err := s.Store.CompareAndSwap(ctx, key, old, value, ttl)
	if err != nil || s.n.Add(1)%2 == 0 {
		return ver, err
	}
	select {
	case <-time.After(30 * time.Millisecond): // the store's latency, not a wait for our logic
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	if _, cur, err := s.Store.Get(ctx, key); err == nil && cur != ver {
		s.overtaken.Add(1)
	}
	return ver, nil
}

// TestLateAnswersAreNotLostWrites: a write answered after a later write
// replaced it lost nothing; the lost-write measure must not count it (it
// places a write's effect anywhere between its start and its end).
func TestLateAnswersAreNotLostWrites(t *testing.T) {
	t.Parallel()
	cfg := memoryConfig(t, 93)
	st := &lateAcks{Store: memory.New()}
	cfg.NewStore = func(context.Context, int) (driver.Store, error) { return st, nil }
	rep, err := robustness.Run(t.Context(), cfg)
	t.Log(rep)
	if st.overtaken.Load() == 0 {
		t.Fatal("no write was replaced before its answer: the run tested nothing")
	}
	if err != nil || rep.LostWrites != 0 {
		t.Fatalf("%d writes overtaken before their answer, measured as %d lost writes: %v", st.overtaken.Load(), rep.LostWrites, err)
	}
}

// lostOnFailover loses every third acknowledged create and every second
// acknowledged delete, as a failover to an asynchronous replica that had
// not received them does: a create is applied and at once undone (its
// version is used up, so every later version is higher, and no read finds
// an older one), a delete is acknowledged and never applied.
type lostOnFailover struct {
	driver.Store
	creates, deletes bool
	nc, nd, lost     atomic.Int64
}

func (s *lostOnFailover) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	ver, err := s.Store.CompareAndSwap(ctx, key, old, value, ttl)
	if err == nil && s.creates && old == driver.NoVersion && s.nc.Add(1)%3 == 0 {
		if err := s.Store.CompareAndDelete(ctx, key, ver); err != nil {
			return 0, err
		}
		s.lost.Add(1)
	}
	return ver, err
}

func (s *lostOnFailover) CompareAndDelete(ctx context.Context, key string, old driver.Version) error {
	if s.deletes && s.nd.Add(1)%2 == 0 {
		if _, cur, err := s.Store.Get(ctx, key); err == nil && cur == old {
			s.lost.Add(1)
			return nil
		}
	}
	return s.Store.CompareAndDelete(ctx, key, old)
}

// TestLostCreatesAndDeletes: a store that loses acknowledged creates (a
// later read finds the key absent) or deletes (a later read finds the
// deleted version) fails the linearizable check unless it declares it
// may; with the allowance it passes and the loss is measured.
func TestLostCreatesAndDeletes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name             string
		creates, deletes bool
		seed             int64
	}{
		{"creates", true, false, 101},
		{"deletes", false, true, 111},
	} {
		store := func(cfg *robustness.Config) *lostOnFailover {
			st := &lostOnFailover{Store: memory.New(), creates: tc.creates, deletes: tc.deletes}
			cfg.NewStore = func(context.Context, int) (driver.Store, error) { return st, nil }
			return st
		}
		t.Run(tc.name+"/strict", func(t *testing.T) {
			t.Parallel()
			cfg := memoryConfig(t, tc.seed)
			st := store(&cfg)
			mustFlag(t, cfg, robustness.InvLinearizable)
			if st.lost.Load() == 0 {
				t.Fatal("the store lost nothing: the run tested nothing")
			}
		})
		t.Run(tc.name+"/declared", func(t *testing.T) {
			t.Parallel()
			cfg := memoryConfig(t, tc.seed)
			cfg.LosesAckedWrites = true
			st := store(&cfg)
			rep, err := robustness.Run(t.Context(), cfg)
			t.Log(rep)
			for _, a := range rep.Allowed[:min(3, len(rep.Allowed))] {
				t.Log("allowed: ", a)
			}
			if err != nil {
				t.Fatal(err)
			}
			if st.lost.Load() == 0 {
				t.Fatal("the store lost nothing: the run tested nothing")
			}
			if rep.LostWrites == 0 || len(rep.Allowed) == 0 {
				t.Fatalf("the store lost %d acknowledged writes, measured as %d: %v", st.lost.Load(), rep.LostWrites, rep)
			}
		})
	}
}
