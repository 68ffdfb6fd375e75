package core

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Defaults used where a Settings field is zero (those of fedify's breaker).
const (
	DefaultFailureThreshold = 5
	DefaultFailureWindow    = 10 * time.Minute
	DefaultRecoveryDelay    = 30 * time.Minute
	DefaultHoldLimit        = 7 * 24 * time.Hour
	DefaultReleaseInterval  = time.Second
	DefaultTTLMargin        = 5 * time.Second
	DefaultClockSkew        = time.Second
	DefaultCallTimeout      = 5 * time.Second
	// DefaultHistoryLimit caps the failure history a custom FailurePolicy
	// sees, as fedify's slice(-100) does.
	DefaultHistoryLimit = 100
)

// Settings configures a Breaker. The zero value of every field means its
// default; a negative value is an error. NewBreaker validates all fields at
// once and reports every problem in one error.
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
	// Default 7 days.
	HoldLimit time.Duration
	// ReleaseInterval: while a probe is in flight, held messages re-check
	// this often. Default 1 s.
	ReleaseInterval time.Duration

	// ClockSkew bounds how far any worker's clock may be from true time.
	// Default 1 s.
	ClockSkew time.Duration
	// TTLMargin is added to max(RecoveryDelay, FailureWindow) to get the
	// record's TTL. Zero means max(5 s, what the store needs for ClockSkew);
	// an explicit value below what the store needs is an error.
	TTLMargin time.Duration
	// StateTTL overrides the derived TTL. It must be at least
	// max(RecoveryDelay, FailureWindow) plus the margin the store needs, and
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
	// the worker whose write made it.
	OnStateChange func(host string, from, to State)
	// OnDrop is called when Allow drops a message held for HoldLimit.
	OnDrop func(host string, heldSince time.Time)
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
	// CallTimeout bounds each store call, within the caller's context.
	// Default 5 s.
	CallTimeout time.Duration
	// Clock returns the current time. Default time.Now.
	Clock func() time.Time
	// Logger receives warnings (a last-writer-wins store, corrupt
	// records). Default slog.Default().
	Logger *slog.Logger
}

// Config is the validated, normalised form of Settings that the pure
// transitions use. Build one with NewConfig.
type Config struct {
	FailureThreshold int
	FailureWindow    time.Duration
	RecoveryDelay    time.Duration
	HoldLimit        time.Duration
	ReleaseInterval  time.Duration
	// StateTTL is the TTL every record is written with.
	StateTTL time.Duration
	// FailurePolicy and HistoryLimit as in Settings; FailurePolicy nil
	// means the default threshold-in-window rule.
	FailurePolicy func(failures []time.Time) bool
	HistoryLimit  int
}

// NewConfig applies defaults to s and validates it against what a store with
// the given traits needs. Every problem is reported, joined in one error.
func NewConfig(s Settings, t Traits) (Config, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	dur := func(name string, v, def time.Duration) time.Duration {
		switch {
		case v < 0:
			bad("%s is %v: set a positive duration, or zero for the default %v", name, v, def)
		case v == 0:
			return def
		}
		return v
	}
	c := Config{
		FailureWindow:   dur("FailureWindow", s.FailureWindow, DefaultFailureWindow),
		RecoveryDelay:   dur("RecoveryDelay", s.RecoveryDelay, DefaultRecoveryDelay),
		HoldLimit:       dur("HoldLimit", s.HoldLimit, DefaultHoldLimit),
		ReleaseInterval: dur("ReleaseInterval", s.ReleaseInterval, DefaultReleaseInterval),
		FailurePolicy:   s.FailurePolicy,
	}
	skew := dur("ClockSkew", s.ClockSkew, DefaultClockSkew)
	dur("CallTimeout", s.CallTimeout, DefaultCallTimeout)
	dur("CacheStaleness", s.CacheStaleness, time.Second)
	if s.CacheSize < 0 {
		bad("CacheSize is %d: set a number of hosts to cache, or zero to disable the cache", s.CacheSize)
	}
	switch {
	case s.FailureThreshold < 0:
		bad("FailureThreshold is %d: set at least 1, or zero for the default %d", s.FailureThreshold, DefaultFailureThreshold)
	case s.FailureThreshold == 0:
		c.FailureThreshold = DefaultFailureThreshold
	case s.FailureThreshold > MaxFailures:
		bad("FailureThreshold is %d, above the %d failures a record can hold: set at most %d", s.FailureThreshold, MaxFailures, MaxFailures)
	default:
		c.FailureThreshold = s.FailureThreshold
	}
	switch {
	case s.HistoryLimit < 0:
		bad("HistoryLimit is %d: set at least 1, or zero for the default %d", s.HistoryLimit, DefaultHistoryLimit)
	case s.HistoryLimit == 0:
		c.HistoryLimit = DefaultHistoryLimit
	case s.HistoryLimit > MaxFailures:
		bad("HistoryLimit is %d, above the %d failures a record can hold: set at most %d", s.HistoryLimit, MaxFailures, MaxFailures)
	default:
		c.HistoryLimit = s.HistoryLimit
	}
	if s.FailurePolicy == nil {
		c.HistoryLimit = c.FailureThreshold
	}

	if t.MaxClockSkew > 0 && skew > t.MaxClockSkew {
		opt := t.MaxClockSkewOption
		if opt == "" {
			opt = "the store's clock-skew option"
		}
		bad("ClockSkew is %v but this store's physical expiry covers at most %v of skew: raise it with %s, or lower ClockSkew if your clocks are that close",
			skew, t.MaxClockSkew, opt)
	}
	need := t.Expiry.RequiredMargin(skew)
	margin := max(DefaultTTLMargin, need)
	switch {
	case s.TTLMargin < 0:
		bad("TTLMargin is %v: set a positive duration of at least %v, or zero for the default", s.TTLMargin, need)
	case s.TTLMargin > 0 && s.TTLMargin < need:
		bad("TTLMargin is %v but this store (%s expiry, granularity %v, early by up to %v) with ClockSkew %v needs at least %v: raise TTLMargin or set it to zero",
			s.TTLMargin, t.Expiry.Kind, t.Expiry.Granularity, t.Expiry.Early, skew, need)
	case s.TTLMargin > 0:
		margin = s.TTLMargin
	}
	horizon := max(c.RecoveryDelay, c.FailureWindow)
	if s.FailurePolicy != nil {
		// A custom policy has no window: only the open record's lifetime
		// is known.
		horizon = c.RecoveryDelay
	}
	switch {
	case s.StateTTL < 0:
		bad("StateTTL is %v: set at least %v, or zero to derive it", s.StateTTL, horizon+need)
	case s.StateTTL == 0 && s.FailurePolicy != nil:
		bad("FailurePolicy is set but StateTTL is not: a custom policy has no failure window to derive the record's lifetime from, so set StateTTL (at least %v) or every failing host leaks a record", horizon+need)
	case s.StateTTL == 0:
		c.StateTTL = horizon + margin
	case s.StateTTL < horizon+need:
		bad("StateTTL is %v, below %v (max(RecoveryDelay, FailureWindow) = %v plus the %v margin this store needs): a record would expire while it still matters; raise StateTTL or set it to zero to derive it",
			s.StateTTL, horizon+need, horizon, need)
	default:
		c.StateTTL = s.StateTTL
	}
	if len(errs) > 0 {
		return Config{}, fmt.Errorf("kvbreaker: invalid settings:\n%w", errors.Join(errs...))
	}
	return c, nil
}
