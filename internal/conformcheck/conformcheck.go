// Package conformcheck is the conformance suite's report: per-case results,
// what each case could not verify, the expiry and staleness it measured,
// round trips, and the TTLMargin a fleet needs. kvbreaker check renders it
// and the suite's own tests read it; an adapter author needs none of it
// (conformance.Run and conformance.Check are the author's API), so it lives
// under internal/ and the author's package stays small.
//
// Package conformance runs the cases and fills a Report; it hands its
// engine to Measure through Register when it is linked in (conformance
// imports this package, so this package cannot import it: case and promise
// IDs are plain strings here, the values of conformance.CaseID and
// conformance.PromiseID).
package conformcheck

import (
	"context"
	"errors"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// Options are the suite's settings. conformance.Option sets them (its With…
// functions and Waive); the With… functions here set the ones only the
// suite's own tests and kvbreaker check tune. The zero value of every field
// means its default.
type Options struct {
	// Goroutines race through CompareAndSwap in the linearizability case.
	// Default 8.
	Goroutines int
	// Iterations is how many read-then-swap rounds each goroutine makes in
	// the linearizability case. Default 40.
	Iterations int
	// ExpiryTTL is the short TTL the expiry cases write with. Default
	// max(Traits().Expiry.MinTTL, 2 s).
	ExpiryTTL time.Duration
	// StateTTL is the long TTL the expiry cases also check: default, the
	// StateTTL a Breaker with default Settings writes over the store.
	StateTTL time.Duration
	// ClockSkew is the fleet's clock-skew bound δ. Default
	// kvbreaker's default ClockSkew.
	ClockSkew time.Duration
	// SkipSlow skips the cases that wait in real time when the harness
	// cannot advance the backend's clock (Run sets it under -short).
	SkipSlow bool
	// Only, when set, runs just these cases (and reachable, which every
	// case needs), the others skipped as not selected: for the suite's
	// own negative controls, which each target one case.
	Only []string
	// Timeout bounds each case. Default 2 min plus the waits the store's
	// declared traits force.
	Timeout time.Duration
	// ReachTimeout bounds the first MakeStore and Get. Default 5 s.
	ReachTimeout time.Duration
	// Trials is how many randomised runs per margin the margin case makes.
	// Default 200.
	Trials int
	// CheckTimeout bounds one porcupine search. Default 1 min.
	CheckTimeout time.Duration
	// FollowHeartbeat is the heartbeat the Follower cases pass to
	// driver.Follower.Follow. Default 250 ms.
	FollowHeartbeat time.Duration
	// Waivers are the promises the harness accepts unverified
	// (conformance.Waive), in the order given.
	Waivers []Waiver
}

// Waiver is one conformance.Waive: a promise the harness accepts without
// the suite verifying it, and why.
type Waiver struct {
	Promise string
	Reason  string
}

// WithReachTimeout sets Options.ReachTimeout. It is assignable to
// conformance.Option.
func WithReachTimeout(d time.Duration) func(*Options) {
	return func(o *Options) { o.ReachTimeout = d }
}

// WithTrials sets Options.Trials.
func WithTrials(n int) func(*Options) { return func(o *Options) { o.Trials = n } }

// WithTimeout sets Options.Timeout.
func WithTimeout(d time.Duration) func(*Options) { return func(o *Options) { o.Timeout = d } }

// WithCheckTimeout sets Options.CheckTimeout.
func WithCheckTimeout(d time.Duration) func(*Options) {
	return func(o *Options) { o.CheckTimeout = d }
}

// Harness is conformance.Harness (the same methods, so a value of either
// is a value of the other).
type Harness interface {
	MakeStore(ctx context.Context) (driver.Store, error)
	Close()
}

// Engine is what package conformance registers: the case loop and the
// cases' IDs in the order they run.
type Engine struct {
	Measure func(ctx context.Context, h Harness, opts []func(*Options)) (*Report, error)
	Cases   func() []string
}

var engine *Engine

// Register installs package conformance's engine; conformance calls it
// from init.
func Register(e *Engine) { engine = e }

// errNoEngine: the binary does not link package conformance.
var errNoEngine = errors.New("conformcheck: package conformance is not linked in (import it)")

// Measure runs the suite against the stores h makes, as conformance.Check
// does, and returns what it found: the Report, and the joined violations
// (Report.Err), with ctx's error if it ended first (the report then lacks
// the cases not run). Unlike conformance.Run and Check it does not fail
// for promises left unverified: the report lists them (Report.NotVerified,
// Result.NotVerified), and the caller decides. opts are conformance.Option
// values or the With… functions of this package.
func Measure(ctx context.Context, h Harness, opts ...func(*Options)) (*Report, error) {
	if engine == nil {
		return nil, errNoEngine
	}
	return engine.Measure(ctx, h, opts)
}

// Cases returns every case's ID in the order the suite runs them.
func Cases() []string {
	if engine == nil {
		return nil
	}
	return engine.Cases()
}
