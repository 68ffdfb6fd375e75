package kvbreaker

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/machine"
)

// The Breaker's own defaults, where a Settings field is zero (the
// machine's are in internal/machine); Settings.WithDefaults shows them all.
const (
	defaultCallTimeout     = 5 * time.Second
	defaultCacheStaleness  = time.Second
	defaultMirrorSize      = 100_000
	defaultMirrorStaleness = time.Second
)

// Settings configures a Breaker. The zero value of every field means its
// default; a negative value is an error. New validates all fields at once
// and reports every problem in one error.
type Settings struct {
	// FailureThreshold failures within FailureWindow open the circuit.
	// Default 5.
	FailureThreshold int
	// FailureWindow: failures older than this stop counting. Default 10 min.
	FailureWindow time.Duration
	// RecoveryDelay: how long an open circuit holds deliveries before it
	// lets one probe through, and how long a probe may stay unanswered
	// before another worker takes it over. Default 30 min.
	RecoveryDelay time.Duration
	// HoldLimit: a message held this long since its first hold is dropped.
	// Default 7 days. A signed request (an HTTP signature's Date) must be
	// signed again when it is finally sent: receivers refuse old
	// signatures (Mastodon, older than about 12 hours).
	HoldLimit time.Duration
	// ReleaseInterval: while a probe is in flight, held messages re-check
	// this often. Default 1 s.
	ReleaseInterval time.Duration
	// MaxRecoveryDelay turns recovery back-off on: each probe that fails
	// in a row multiplies the next restraint by RecoveryMultiplier, from
	// RecoveryDelay up to MaxRecoveryDelay, and a success resets it, so a
	// short outage is probed soon and a dead host once per
	// MaxRecoveryDelay. The level is kept in the record, for the whole
	// fleet. Zero (the default) keeps the fixed RecoveryDelay. Records
	// it writes carry a field releases before this one cannot read (they
	// treat the record as absent): turn it on once every worker of the
	// fleet runs a release that reads it.
	MaxRecoveryDelay time.Duration
	// RecoveryMultiplier is recovery back-off's factor, above 1. Default
	// 2; only used with MaxRecoveryDelay.
	RecoveryMultiplier float64
	// ReleaseRamp turns the paced release on: after a probe succeeds, the
	// messages held for the host come back in the order they were held,
	// spread over twice the outage but at most ReleaseRamp, so the backlog
	// reaches the host at about half the rate it built up instead of at
	// once. Each worker computes a message's turn from the record and the
	// message's held-since, without coordination; fresh messages go at
	// once. Zero (the default) releases every held message at once. Like
	// MaxRecoveryDelay, turn it on once every worker reads its records.
	ReleaseRamp time.Duration

	// ClockSkew bounds how far any worker's clock may be from true time.
	// Default 1 s. A record holding an instant no worker within it could
	// have written yet is held no longer than RecoveryDelay and rewritten
	// on this worker's clock (AnomalyInfo's "future").
	ClockSkew time.Duration
	// TTLMargin is added to max(RecoveryDelay, MaxRecoveryDelay,
	// FailureWindow, ReleaseRamp) to get the record's TTL. Zero means max(5 s, what the store needs for ClockSkew);
	// an explicit value below what the store needs is an error.
	TTLMargin time.Duration
	// StateTTL overrides the derived TTL. It must be at least
	// max(RecoveryDelay, MaxRecoveryDelay, FailureWindow, ReleaseRamp) plus
	// the margin the store needs, and
	// is required with a FailurePolicy.
	StateTTL time.Duration

	// FailurePolicy replaces the default "FailureThreshold failures within
	// FailureWindow" rule: it is called with the failure history (oldest
	// first, at most HistoryLimit entries, not pruned by time) and reports
	// whether the circuit should open. It has no window to derive a TTL
	// from, so StateTTL must be set with it.
	FailurePolicy func(failures []time.Time) bool
	// HistoryLimit caps the history FailurePolicy sees. Default 100; only
	// used with a FailurePolicy.
	HistoryLimit int

	// OnStateChange is called after a transition has been stored, once, by
	// the worker whose write made it. It is a shortcut for an Observer
	// whose Transition hook calls it; New composes it with Observer,
	// before it.
	OnStateChange func(host string, from, to State)
	// OnDrop is called when Allow drops a message held for HoldLimit. It
	// is a shortcut for an Observer whose Decision hook calls it for a
	// Drop; New composes it with Observer, before it.
	OnDrop func(host string, heldSince time.Time)
	// Observer receives every decision, delivery outcome, transition,
	// abandoned probe and store call, for metrics and traces (see the
	// otelkvbreaker module); ComposeObservers lets several watch. Default
	// none.
	Observer *Observer
	// FailClosed makes Allow hold for ReleaseInterval when the store fails;
	// by default it sends (fails open). The error is returned either way.
	FailClosed bool
	// CacheSize enables a local cache of up to this many hosts' records,
	// so repeated checks of a host cost no store read. Zero disables it.
	// A cached record is served for at most CacheStaleness and never past
	// its RestrainedUntil, so caching can delay seeing another worker's
	// opening or closing of a circuit by at most CacheStaleness; this
	// worker's own writes update the cache at once.
	CacheSize int
	// CacheStaleness: how long a cached record may be served. Default 1 s.
	CacheStaleness time.Duration
	// Mirror makes the Breaker follow its store's records (the store must
	// be a driver.Follower: etcd, Redis, PostgreSQL, NATS, SQLite, memory, or Prefixed
	// over one) into a local mirror, and decide from it while the feed is
	// healthy: then Allow, and a Success or ReachableFailure on a host
	// without a record, cost no store request; writes still
	// compare-and-swap against the store, and this worker's own writes
	// are in the mirror at once. Over a feed that names changed keys
	// without their values (Redis, PostgreSQL: driver.ChangeStale), the
	// first call on such a host after its change reads it once. The feed is healthy from its first
	// snapshot on, while its last Synced is within MirrorStaleness and the
	// store holds at most MirrorSize records; otherwise every call reads
	// the store as without a mirror. A decision can then differ from one
	// read from the store by what other workers wrote within the feed's
	// delay (Observer.MirrorLag measures it, MirrorStaleness bounds it).
	// It costs one goroutine and one feed (a connection on a networked
	// store) per Breaker, until Close. With a mirror the decision cache is
	// not used (CacheSize is ignored). Default off.
	Mirror bool
	// MirrorSize caps the records the mirror holds. When the store holds
	// more, the mirror cannot know a host absent, so it empties itself,
	// every call reads the store, and it follows again a minute later,
	// until the store holds at most MirrorSize. A record costs about 150
	// bytes of heap with a host name of 20 bytes and one failure
	// (measured: go test -run TestMirrorMemoryPerEntry -v .), so the
	// default holds about 15 MB at most. Default 100,000.
	MirrorSize int
	// MirrorStaleness: the mirror decides only while its feed has shown,
	// within this long, that every change before has been delivered. The
	// feed is asked for such a heartbeat every quarter of it, so three
	// late heartbeats in a row (a pause, a slow round trip) are tolerated
	// before calls fall back to the store. Default 1 s.
	MirrorStaleness time.Duration
	// CallTimeout bounds each store call, within the caller's context.
	// Default 5 s.
	CallTimeout time.Duration
	// Clock returns the current time. Default time.Now.
	Clock func() time.Time
	// Logger receives warnings (a last-writer-wins store, corrupt
	// records, a clock further from the store's than ClockSkew). Default
	// slog.Default().
	Logger *slog.Logger

	// ClockCheckInterval is how often the Breaker samples its store's clock
	// in the background, to warn (once, through Logger) when this worker's
	// clock is proven further from the store's than ClockSkew assumes. A
	// check is one store call, started by a store-using call (Allow,
	// Failure, …) once due, the first one by the first such call; the
	// caller never waits for it, and Close ends it. Only stores that can
	// show their clock (driver.ClockSampler) and are not in-process are
	// checked. Default 10 min.
	ClockCheckInterval time.Duration
	// SkipClockCheck turns the background clock checks off (CheckClock
	// still works): for tests that count store calls, or a clock the
	// Breaker should not compare (a simulated one).
	SkipClockCheck bool
}

// WithDefaults returns s with each zero field that has a default set to
// the value New uses for it: FailureThreshold 5, FailureWindow 10 min,
// RecoveryDelay 30 min, HoldLimit 7 days, ReleaseInterval 1 s, ClockSkew
// 1 s, CallTimeout 5 s, CacheStaleness 1 s, MirrorSize 100,000,
// MirrorStaleness 1 s, ClockCheckInterval 10 min (unless SkipClockCheck),
// HistoryLimit 100 (with a FailurePolicy) and RecoveryMultiplier 2 (with
// MaxRecoveryDelay). It leaves TTLMargin zero, whose default depends on
// the store (max(5 s, what the store needs for ClockSkew): see
// Breaker.StateTTL), and Clock and Logger nil. New(store, s.WithDefaults())
// is New(store, s); it is for what shows the defaults, such as a command's
// flags.
func (s Settings) WithDefaults() Settings {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if s.FailureThreshold == 0 {
		s.FailureThreshold = machine.DefaultFailureThreshold
	}
	def(&s.FailureWindow, machine.DefaultFailureWindow)
	def(&s.RecoveryDelay, machine.DefaultRecoveryDelay)
	def(&s.HoldLimit, machine.DefaultHoldLimit)
	def(&s.ReleaseInterval, machine.DefaultReleaseInterval)
	def(&s.ClockSkew, machine.DefaultClockSkew)
	def(&s.CallTimeout, defaultCallTimeout)
	def(&s.CacheStaleness, defaultCacheStaleness)
	def(&s.MirrorStaleness, defaultMirrorStaleness)
	if s.MirrorSize == 0 {
		s.MirrorSize = defaultMirrorSize
	}
	if !s.SkipClockCheck {
		def(&s.ClockCheckInterval, defaultClockCheckInterval)
	}
	if s.FailurePolicy != nil && s.HistoryLimit == 0 {
		s.HistoryLimit = machine.DefaultHistoryLimit
	}
	if s.MaxRecoveryDelay != 0 && s.RecoveryMultiplier == 0 {
		s.RecoveryMultiplier = machine.DefaultRecoveryMultiplier
	}
	return s
}

// config validates s against the store's traits: the machine's settings,
// then the Breaker's own. Every problem is reported in one error. This is
// the one place Settings' fields are handed to the machine.
func (s *Settings) config(store driver.Store, t driver.Traits) (machine.Config, error) {
	c, err := machine.NewConfig(machine.Config{
		FailureThreshold:   s.FailureThreshold,
		FailureWindow:      s.FailureWindow,
		RecoveryDelay:      s.RecoveryDelay,
		HoldLimit:          s.HoldLimit,
		ReleaseInterval:    s.ReleaseInterval,
		MaxRecoveryDelay:   s.MaxRecoveryDelay,
		RecoveryMultiplier: s.RecoveryMultiplier,
		ReleaseRamp:        s.ReleaseRamp,
		ClockSkew:          s.ClockSkew,
		TTLMargin:          s.TTLMargin,
		StateTTL:           s.StateTTL,
		FailurePolicy:      s.FailurePolicy,
		HistoryLimit:       s.HistoryLimit,
	}, t)
	errs := []error{err}
	if s.Mirror && !follows(store) {
		errs = append(errs, fmt.Errorf("store %T cannot follow its keys (it is no driver.Follower), which Mirror needs: set Mirror false, or use a store that can (etcd, Redis, PostgreSQL, NATS, SQLite, memory)", store))
	}
	if s.CallTimeout < 0 {
		errs = append(errs, fmt.Errorf("CallTimeout is %v: set a positive duration, or zero for the default %v", s.CallTimeout, defaultCallTimeout))
	}
	if s.CacheStaleness < 0 {
		errs = append(errs, fmt.Errorf("CacheStaleness is %v: set a positive duration, or zero for the default %v", s.CacheStaleness, defaultCacheStaleness))
	}
	if s.MirrorSize < 0 {
		errs = append(errs, fmt.Errorf("MirrorSize is %d: set the number of records the mirror may hold, or zero for the default %d", s.MirrorSize, defaultMirrorSize))
	}
	if s.MirrorStaleness < 0 {
		errs = append(errs, fmt.Errorf("MirrorStaleness is %v: set a positive duration, or zero for the default %v", s.MirrorStaleness, defaultMirrorStaleness))
	}
	if s.CacheSize < 0 {
		errs = append(errs, fmt.Errorf("CacheSize is %d: set a number of hosts to cache, or zero to disable the cache", s.CacheSize))
	}
	switch {
	case s.ClockCheckInterval < 0:
		errs = append(errs, fmt.Errorf("ClockCheckInterval is %v: set a positive duration, or zero for the default %v (SkipClockCheck turns the checks off)", s.ClockCheckInterval, defaultClockCheckInterval))
	case s.ClockCheckInterval > 0 && s.SkipClockCheck:
		errs = append(errs, fmt.Errorf("ClockCheckInterval is %v but SkipClockCheck turns the checks off: set only one", s.ClockCheckInterval))
	}
	if err := errors.Join(errs...); err != nil {
		return machine.Config{}, fmt.Errorf("kvbreaker: invalid settings:\n%w", err)
	}
	return c, nil
}
