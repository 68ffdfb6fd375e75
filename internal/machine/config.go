package machine

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/kvbreaker/kvbreaker/internal/record"

	"github.com/kvbreaker/kvbreaker/driver"
)

// Defaults used where a Config field given to NewConfig is zero (those of
// fedify's breaker).
const (
	DefaultFailureThreshold = 5
	DefaultFailureWindow    = 10 * time.Minute
	DefaultRecoveryDelay    = 30 * time.Minute
	DefaultHoldLimit        = 7 * 24 * time.Hour
	DefaultReleaseInterval  = time.Second
	DefaultTTLMargin        = 5 * time.Second
	DefaultClockSkew        = time.Second
	// DefaultHistoryLimit caps the failure history a custom FailurePolicy
	// sees, as fedify's slice(-100) does.
	DefaultHistoryLimit = 100
	// DefaultRecoveryMultiplier is the back-off's factor when
	// MaxRecoveryDelay turns it on without one.
	DefaultRecoveryMultiplier = 2.0
)

// Config is the part of kvbreaker.Settings the pure transitions use, with
// the same field names and meanings (documented there). Given to NewConfig,
// a zero field means its default; NewConfig returns it validated and
// normalised, every field set, and the transitions take only such a Config.
type Config struct {
	FailureThreshold int
	FailureWindow    time.Duration
	RecoveryDelay    time.Duration
	HoldLimit        time.Duration
	ReleaseInterval  time.Duration
	// ClockSkew bounds how far any worker's clock may be from true time,
	// so two workers' clocks differ by at most twice it (see Future).
	ClockSkew time.Duration
	// TTLMargin, normalised, is the margin StateTTL was derived with:
	// max(DefaultTTLMargin, what the store needs for ClockSkew) unless set.
	TTLMargin time.Duration
	// StateTTL, normalised, is the TTL every record is written with.
	StateTTL time.Duration
	// FailurePolicy nil means the default threshold-in-window rule; without
	// one, the normalised HistoryLimit is FailureThreshold (all the default
	// rule looks at).
	FailurePolicy func(failures []time.Time) bool
	HistoryLimit  int
	// MaxRecoveryDelay, when set, turns recovery back-off on: each failed
	// probe multiplies the next restraint by RecoveryMultiplier, up to
	// it. Normalised, both are zero when back-off is off.
	MaxRecoveryDelay   time.Duration
	RecoveryMultiplier float64
	// ReleaseRamp, when set, turns the paced release on (see ReleaseAt).
	ReleaseRamp time.Duration

	// backoffCap is the first back-off level whose restraint reaches
	// MaxRecoveryDelay: the level stops counting there.
	backoffCap int
}

// NewConfig applies defaults to s and validates it against what a store with
// the given traits needs. Every problem is reported, joined in one error;
// the messages name kvbreaker.Settings' fields. A Config it returns is
// accepted again unchanged.
func NewConfig(s Config, t driver.Traits) (Config, error) {
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
	switch {
	case s.MaxRecoveryDelay < 0:
		bad("MaxRecoveryDelay is %v: set the longest restraint recovery back-off may reach, or zero for a fixed RecoveryDelay", s.MaxRecoveryDelay)
	case s.MaxRecoveryDelay == 0 && s.RecoveryMultiplier != 0:
		bad("RecoveryMultiplier is %v but MaxRecoveryDelay is zero, which turns recovery back-off off: set MaxRecoveryDelay too, or RecoveryMultiplier to zero", s.RecoveryMultiplier)
	case s.MaxRecoveryDelay > 0 && s.MaxRecoveryDelay < c.RecoveryDelay:
		bad("MaxRecoveryDelay is %v, below RecoveryDelay %v: the back-off starts at RecoveryDelay and grows up to it, so set it to at least %v", s.MaxRecoveryDelay, c.RecoveryDelay, c.RecoveryDelay)
	case s.MaxRecoveryDelay > 0:
		m := s.RecoveryMultiplier
		if m == 0 {
			m = DefaultRecoveryMultiplier
		}
		// The level that reaches the cap: m^level >= Max/RecoveryDelay.
		need := math.Log(float64(s.MaxRecoveryDelay)/float64(c.RecoveryDelay)) / math.Log(m)
		switch {
		case math.IsNaN(m) || math.IsInf(m, 0) || m <= 1:
			bad("RecoveryMultiplier is %v: set a factor above 1 (each failed probe multiplies the restraint by it), or zero for the default %v", s.RecoveryMultiplier, DefaultRecoveryMultiplier)
		case need > record.MaxBackoff:
			bad("RecoveryMultiplier %v would take more than %d failed probes to grow RecoveryDelay %v to MaxRecoveryDelay %v: raise it", m, record.MaxBackoff, c.RecoveryDelay, s.MaxRecoveryDelay)
		default:
			c.MaxRecoveryDelay, c.RecoveryMultiplier = s.MaxRecoveryDelay, m
			c.backoffCap = int(math.Ceil(need - 1e-9))
		}
	}
	switch {
	case s.ReleaseRamp < 0:
		bad("ReleaseRamp is %v: set how long held messages may take to come back after a probe succeeds, or zero to release them at once", s.ReleaseRamp)
	default:
		c.ReleaseRamp = s.ReleaseRamp
	}
	skew := dur("ClockSkew", s.ClockSkew, DefaultClockSkew)
	c.ClockSkew = skew
	switch {
	case s.FailureThreshold < 0:
		bad("FailureThreshold is %d: set at least 1, or zero for the default %d", s.FailureThreshold, DefaultFailureThreshold)
	case s.FailureThreshold == 0:
		c.FailureThreshold = DefaultFailureThreshold
	case s.FailureThreshold > record.MaxFailures:
		bad("FailureThreshold is %d, above the %d failures a record can hold: set at most %d", s.FailureThreshold, record.MaxFailures, record.MaxFailures)
	default:
		c.FailureThreshold = s.FailureThreshold
	}
	switch {
	case s.HistoryLimit < 0:
		bad("HistoryLimit is %d: set at least 1, or zero for the default %d", s.HistoryLimit, DefaultHistoryLimit)
	case s.HistoryLimit == 0:
		c.HistoryLimit = DefaultHistoryLimit
	case s.HistoryLimit > record.MaxFailures:
		bad("HistoryLimit is %d, above the %d failures a record can hold: set at most %d", s.HistoryLimit, record.MaxFailures, record.MaxFailures)
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
	c.TTLMargin = margin
	// The longest a record matters: a restraint (at most
	// MaxRecoveryDelay with back-off), a failure window, or a release
	// ramp kept on the closed record.
	horizon := max(c.RecoveryDelay, c.MaxRecoveryDelay, c.FailureWindow, c.ReleaseRamp)
	if s.FailurePolicy != nil {
		// A custom policy has no window: only the open record's lifetime
		// is known.
		horizon = max(c.RecoveryDelay, c.MaxRecoveryDelay, c.ReleaseRamp)
	}
	switch {
	case s.StateTTL < 0:
		bad("StateTTL is %v: set at least %v, or zero to derive it", s.StateTTL, horizon+need)
	case s.StateTTL == 0 && s.FailurePolicy != nil:
		bad("FailurePolicy is set but StateTTL is not: a custom policy has no failure window to derive the record's lifetime from, so set StateTTL (at least %v) or every failing host leaks a record", horizon+need)
	case s.StateTTL == 0:
		c.StateTTL = horizon + margin
	case s.StateTTL < horizon+need:
		bad("StateTTL is %v, below %v (max(RecoveryDelay, MaxRecoveryDelay, FailureWindow, ReleaseRamp) = %v plus the %v margin this store needs): a record would expire while it still matters; raise StateTTL or set it to zero to derive it",
			s.StateTTL, horizon+need, horizon, need)
	default:
		c.StateTTL = s.StateTTL
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	return c, nil
}

// Restraint is how long an open circuit holds deliveries after a probe
// failed level times in a row: RecoveryDelay × RecoveryMultiplier^level, at
// most MaxRecoveryDelay; RecoveryDelay without back-off.
func (c *Config) Restraint(level int) time.Duration {
	if c.MaxRecoveryDelay == 0 || level <= 0 {
		return c.RecoveryDelay
	}
	if level >= c.backoffCap {
		return c.MaxRecoveryDelay
	}
	d := float64(c.RecoveryDelay) * math.Pow(c.RecoveryMultiplier, float64(level))
	return min(time.Duration(d), c.MaxRecoveryDelay)
}

// nextLevel is the back-off level after one more failed probe from level;
// it stops at the level whose restraint is the cap, and is zero without
// back-off.
func (c *Config) nextLevel(level int) int {
	if c.MaxRecoveryDelay == 0 {
		return 0
	}
	return min(level+1, c.backoffCap)
}
