package conformance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
)

// ForeignPlanter is an optional Harness capability: it stores, at a key of a
// store this harness made, data no Breaker wrote, through the backend's own
// client and not the adapter: what other software, an older version or a
// half-finished write leaves under the Breaker's prefix (for Redis a string
// or a list where a hash belongs, a hash without its version; for DynamoDB
// an item whose version is missing or of the wrong type; bytes that are no
// record). With it the suite checks that every such shape is replaced by the
// next write, so it can never stop a circuit opening.
type ForeignPlanter interface {
	// ForeignShapes names the shapes PlantForeign can store, one per
	// case run ("string key", "hash without n").
	ForeignShapes() []string
	// PlantForeign stores shape at key as s names it (under s's prefix or
	// table), with no expiry where the backend allows one to be left out,
	// replacing whatever is there.
	PlantForeign(ctx context.Context, s driver.Store, key, shape string) error
}

// checkForeign plants each of the harness's foreign shapes and checks that
// the store reads it as some value with a version, or as absent, and that a
// write with what Get returned replaces it (with the write's TTL, where the
// harness reports lifetimes); then that a Breaker over a key holding it
// opens, holds and resets.
func checkForeign(ctx context.Context, e *env) {
	p, ok := e.h.(ForeignPlanter)
	if !ok {
		e.notVerifiedf("data another process wrote at a Breaker's key: the harness does not implement ForeignPlanter")
		return
	}
	for i, shape := range p.ForeignShapes() {
		if ctx.Err() != nil {
			return
		}
		key := fmt.Sprintf("foreign-%d.example", i)
		if err := p.PlantForeign(ctx, e.raw, key, shape); err != nil {
			e.errorf(promiseMakeStore, "ForeignPlanter.PlantForeign(%q, %q) = %v", key, shape, err)
			continue
		}
		e.replaceForeign(ctx, key, shape)
		e.breakerOverForeign(ctx, p, fmt.Sprintf("foreign-breaker-%d.example", i), shape)
	}
}

// replaceForeign reads the foreign value at key and replaces it.
func (e *env) replaceForeign(ctx context.Context, key, shape string) {
	old, ver, err := e.store.Get(ctx, key)
	switch {
	case errors.Is(err, driver.ErrNotFound):
		ver = driver.NoVersion
	case err != nil:
		e.errorf(promiseForeign, "%s: Get(%q) = %v; a value the adapter cannot read must read as some value with a version (or as absent), so that the next write replaces it", shape, key, err)
		return
	default:
		if ver == driver.NoVersion {
			e.errorf(promiseForeign, "%s: Get(%q) returned value %.40q with driver.NoVersion; a present value needs a version the next write can name", shape, key, old)
			return
		}
	}
	want := val("replaced")
	nv, err := e.store.CompareAndSwap(ctx, key, ver, want, ttl)
	if err != nil {
		e.errorf(promiseForeign, "%s: CompareAndSwap(%q, %d) with the version Get returned = %v; the next write must replace what is there", shape, key, ver, err)
		return
	}
	if _, _, _, ok := e.awaitRead(ctx, promiseForeign, key, nv, want); !ok {
		return
	}
	if lr, ok := e.h.(LifetimeReporter); ok {
		rem, err := lr.Lifetime(ctx, e.raw, key)
		hi := ttl + e.traits.Expiry.Granularity + e.traits.Expiry.Late + time.Minute
		if e.traits.Expiry.Kind != driver.ExpiryRelative {
			// A reader-filtered store pads its physical copy by the
			// clock skew it tolerates.
			hi += e.traits.MaxClockSkew
		}
		switch {
		case err != nil:
			e.errorf(promiseForeign, "%s: LifetimeReporter.Lifetime(%q) after the replacing write = %v", shape, key, err)
		case rem <= 0 || rem > hi:
			e.errorf(promiseForeign, "%s: after a write with TTL %v the backend keeps %q for %v; the write must replace the foreign value's expiry (or lack of one)", shape, ttl, key, rem)
		}
	}
	if err := e.store.CompareAndDelete(ctx, key, nv); err != nil {
		e.errorf(promiseForeign, "%s: CompareAndDelete(%q, %d) of the replacing write = %v", shape, key, nv, err)
	}
}

// breakerOverForeign checks that a Breaker whose host's key holds the
// foreign shape opens its circuit at the threshold and can be reset.
func (e *env) breakerOverForeign(ctx context.Context, p ForeignPlanter, host, shape string) {
	if err := p.PlantForeign(ctx, e.raw, host, shape); err != nil {
		e.errorf(promiseMakeStore, "ForeignPlanter.PlantForeign(%q, %q) = %v", host, shape, err)
		return
	}
	b, err := kvbreaker.New(e.store, kvbreaker.Settings{
		FailureThreshold: 2,
		FailureWindow:    time.Minute,
		RecoveryDelay:    time.Minute,
		ClockSkew:        e.opts.ClockSkew,
		CallTimeout:      30*time.Second + e.traits.MinWriteInterval,
		SkipClockCheck:   true,
		Logger:           slog.New(slog.DiscardHandler),
	})
	if err != nil {
		e.errorf(promiseFleet, "kvbreaker.New over the store's declared traits: %v", err)
		return
	}
	defer b.Close(context.WithoutCancel(ctx))
	for i := range 2 {
		if err := b.Failure(ctx, host); err != nil {
			e.errorf(promiseForeign, "%s: Breaker.Failure(%q) #%d over a foreign value = %v", shape, host, i+1, err)
			return
		}
	}
	// A store with stale reads may show the open record late.
	deadline := time.Now().Add(e.traits.ReadStaleness)
	for {
		v, err := b.Allow(ctx, host, time.Time{})
		if err == nil && v.Decision == kvbreaker.Hold {
			break
		}
		if err != nil || time.Now().After(deadline) {
			e.errorf(promiseForeign, "%s: after 2 failures (FailureThreshold 2) over a foreign value, Breaker.Allow(%q) = %v, %v; want Hold: foreign data at a key stopped the circuit opening", shape, host, v.Decision, err)
			return
		}
		if sleep(ctx, 100*time.Millisecond) != nil {
			return
		}
	}
	// The Breaker's write replaced the foreign value's expiry (or lack of
	// one) with its own TTL.
	if r, ok := e.raw.(driver.ExpiryReader); ok {
		d, err := r.Expiry(ctx, host)
		lim := b.StateTTL() + e.traits.Expiry.Granularity + e.traits.Expiry.Late + e.traits.MaxClockSkew + time.Minute
		if err != nil || d <= 0 || d > lim {
			e.errorf(promiseForeign, "%s: the Breaker's record over a foreign value expires in %v (%v); want within its StateTTL %v", shape, expiryText(d), err, b.StateTTL())
		}
	}
	if err := b.Reset(ctx, host); err != nil {
		e.errorf(promiseForeign, "%s: Breaker.Reset(%q) of the record written over a foreign value = %v", shape, host, err)
		return
	}
	deadline = time.Now().Add(e.traits.ReadStaleness)
	for {
		v, err := b.Allow(ctx, host, time.Time{})
		if err == nil && v.Decision == kvbreaker.Send {
			return
		}
		if err != nil || time.Now().After(deadline) {
			e.errorf(promiseForeign, "%s: after Breaker.Reset(%q), Allow = %v, %v; want Send", shape, host, v.Decision, err)
			return
		}
		if sleep(ctx, 100*time.Millisecond) != nil {
			return
		}
	}
}

func expiryText(d time.Duration) string {
	if d == driver.NoExpiry {
		return "never"
	}
	return d.String()
}
