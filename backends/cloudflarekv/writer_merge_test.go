package cloudflarekv

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudflare/cloudflare-go/v6/kv"
	"github.com/cloudflare/cloudflare-go/v6/option"
	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/record"
)

// Tests of the write coalescer's merge, the declared clock-skew bound, the
// options' validation and the logical expiry, over Miniflare, on its clock.

// TestExpiredProbeNotMergedBack: a probe's record that expired unanswered
// must not come back through the write coalescer's merge with this store's
// last write. Merged with the expired probe record, the next Failure would
// store a half-open record with a past RestrainedUntil, and another worker
// would get Probe instead of Send.
func TestExpiredProbeNotMergedBack(t *testing.T) {
	ctx := t.Context()
	const host = "expired-probe.example"
	s := newStore(t)
	settings := kvbreaker.Settings{
		FailureThreshold: 2, FailureWindow: time.Minute, RecoveryDelay: time.Minute,
		Clock: srv.Now, CallTimeout: 10 * time.Second, Logger: quiet,
	}
	a, err := kvbreaker.New(s, settings)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := a.Failure(ctx, host); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.Advance(ctx, settings.RecoveryDelay); err != nil {
		t.Fatal(err)
	}
	if v, err := a.Allow(ctx, host, time.Time{}); err != nil || v.Decision != kvbreaker.Probe {
		t.Fatalf("Allow after the recovery delay = %v, %v; want probe", v, err)
	}
	// The probe is never answered; its record expires.
	if err := srv.Advance(ctx, a.StateTTL()); err != nil {
		t.Fatal(err)
	}
	if err := a.Failure(ctx, host); err != nil {
		t.Fatal(err)
	}
	b, err := kvbreaker.New(sibling(t, s), settings)
	if err != nil {
		t.Fatal(err)
	}
	st, err := b.Inspect(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != kvbreaker.StateClosed || len(st.Failures) != 1 || !st.RestrainedUntil.IsZero() {
		t.Errorf("after the probe's record expired and one failure: stored %s %+v; want closed with that one failure", st.State, st)
	}
	if v, err := b.Allow(ctx, host, time.Time{}); err != nil || v.Decision != kvbreaker.Send {
		t.Errorf("another worker's Allow = %v, %v; want send", v.Decision, err)
	}
}

// TestWriteFromDeletedVersionNotRestored: a write computed from a record
// that a local Success has since deleted (a Failure that read the half-open
// record before the probe's Success) must not bring back the deleted
// failures, restraint or probe. A write that replaced the delete whole
// would store the record open again with all the pre-Success failures.
func TestWriteFromDeletedVersionNotRestored(t *testing.T) {
	for _, tc := range []struct {
		name    string
		between bool // a Failure computed after the Success lands first
	}{
		{"right-after-the-delete", false},
		{"after-a-later-write", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			const host = "deleted-base.example"
			s := newStore(t)
			now := srv.Now().Truncate(time.Millisecond)
			halfOpen := record.Record{Failures: []time.Time{now.Add(-2 * time.Second), now.Add(-time.Second)}, RestrainedUntil: now.Add(time.Minute), Probing: true}
			v1, err := s.CompareAndSwap(ctx, host, driver.NoVersion, record.EncodeRecord(halfOpen), time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.CompareAndDelete(ctx, host, v1); err != nil { // the probe's Success
				t.Fatal(err)
			}
			want := record.Record{Failures: []time.Time{now}}
			if tc.between {
				after := now.Add(time.Millisecond)
				if _, err := s.CompareAndSwap(ctx, host, driver.NoVersion, record.EncodeRecord(record.Record{Failures: []time.Time{after}}), time.Hour); err != nil {
					t.Fatal(err)
				}
				want.Failures = append(want.Failures, after)
			}
			// The late Failure, computed from v1: the probe failed, reopen.
			late := record.Record{Failures: append(halfOpen.Failures[:2:2], now), RestrainedUntil: now.Add(time.Minute)}
			if _, err := s.CompareAndSwap(ctx, host, v1, record.EncodeRecord(late), time.Hour); err != nil {
				t.Fatal(err)
			}
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			v, _, err := sibling(t, s).Get(ctx, host)
			if err != nil {
				t.Fatal(err)
			}
			got, err := record.DecodeRecord(v)
			if err != nil {
				t.Fatal(err)
			}
			if string(record.EncodeRecord(got)) != string(record.EncodeRecord(want)) {
				t.Errorf("stored %+v; want only the failures added after the Success %+v", got, want)
			}
		})
	}
}

// TestClockSkewBoundDeclared: WithClockSkew's padding covers that much skew
// and no more, so Traits declares it and kvbreaker.New refuses a larger
// Settings.ClockSkew, naming the option: over a store padded for 1 s, a
// ClockSkew of 5 s would promise a margin the physical TTL does not have.
func TestClockSkewBoundDeclared(t *testing.T) {
	s := newStore(t)
	if got := s.Traits(); got.MaxClockSkew != (kvbreaker.Settings{}).WithDefaults().ClockSkew || got.MaxClockSkewOption != "cloudflarekv.WithClockSkew" {
		t.Errorf("Traits MaxClockSkew %v (option %q), want %v (cloudflarekv.WithClockSkew)", got.MaxClockSkew, got.MaxClockSkewOption, kvbreaker.Settings{}.WithDefaults().ClockSkew)
	}
	_, err := kvbreaker.New(s, kvbreaker.Settings{ClockSkew: 5 * time.Second, Clock: srv.Now, Logger: quiet})
	if err == nil || !strings.Contains(err.Error(), "cloudflarekv.WithClockSkew") {
		t.Errorf("kvbreaker.New with ClockSkew 5s over a store padded for 1s = %v; want an error naming cloudflarekv.WithClockSkew", err)
	}
	// Negative control: padded for it, the same settings are accepted.
	if _, err := kvbreaker.New(newStore(t, WithClockSkew(5*time.Second)), kvbreaker.Settings{ClockSkew: 5 * time.Second, Clock: srv.Now, Logger: quiet}); err != nil {
		t.Errorf("kvbreaker.New with ClockSkew 5s over WithClockSkew(5s) = %v", err)
	}
}

// TestNewRefusesEachBadOption: every invalid option is an error from New
// that names the option and what to set. WithClockSkew(0) would pad for no
// skew while core reads a zero bound as "no bound", and WithWriteInterval(0)
// would send a second write per second to one key, which Cloudflare answers
// with 429.
func TestNewRefusesEachBadOption(t *testing.T) {
	c := kv.NewKVService(option.WithBaseURL(srv.BaseURL()), option.WithAPIToken(srv.Token))
	for _, tc := range []struct {
		name string
		opt  Option
		want string
	}{
		{"zero-clock-skew", WithClockSkew(0), "cloudflarekv: invalid WithClockSkew: 0s: set a positive bound"},
		{"negative-clock-skew", WithClockSkew(-time.Second), "cloudflarekv: invalid WithClockSkew: -1s"},
		{"zero-write-interval", WithWriteInterval(0), "cloudflarekv: invalid WithWriteInterval: 0s: set a positive interval"},
		{"negative-write-interval", WithWriteInterval(-time.Second), "cloudflarekv: invalid WithWriteInterval: -1s"},
		{"negative-cache-size", WithCache(-1, time.Second), "cloudflarekv: invalid WithCache size: -1: set a number of keys"},
		{"negative-freshness", WithCache(10, -time.Second), "cloudflarekv: invalid WithCache freshness: -1s"},
		{"negative-retries", WithMaxRetries(-1), "cloudflarekv: invalid WithMaxRetries: -1: set 0 or more"},
		{"zero-call-timeout", WithCallTimeout(0), "cloudflarekv: invalid WithCallTimeout: 0s: set a positive duration"},
		{"negative-call-timeout", WithCallTimeout(-time.Second), "cloudflarekv: invalid WithCallTimeout: -1s"},
		{"nil-clock", WithClock(nil), "cloudflarekv: invalid WithClock: nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(c, srv.AccountID, srv.NamespaceID, tc.opt)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New = %v; want an error containing %q", err, tc.want)
			}
			if _, ok := err.(*driver.OptionError); !ok {
				t.Errorf("New = %#v; want a *driver.OptionError", err)
			}
		})
	}
	// Negative control: the valid edge values are accepted.
	if _, err := New(c, srv.AccountID, srv.NamespaceID, WithCache(0, 0), WithMaxRetries(0), WithClockSkew(time.Millisecond), WithWriteInterval(time.Millisecond)); err != nil {
		t.Errorf("New with the smallest valid options = %v", err)
	}
}

// TestNoLogicalMinTTL: what a Breaker sees expires at the exact TTL, so
// Traits declare no minimum TTL, and TestConformance runs its expiry cases
// at the suite's default 2 s TTL with no violation. Workers KV's 60 s
// minimum applies to the physical expiry only; declared as MinTTL, it would
// make a suite run at a 5 s expiry TTL expect the entry to live 60 s and
// report it as vanishing 55 s early.
func TestNoLogicalMinTTL(t *testing.T) {
	if got := (&Store{}).Traits().Expiry.MinTTL; got != 0 {
		t.Errorf("Traits MinTTL %v: the logical expiry has no minimum", got)
	}
}

// TestConcurrentFailuresAtOneInstant: two Failures of one host within one
// millisecond, computed from the same record and coalesced into one write,
// are two failures. Record instants are milliseconds, so a union of
// instants counted them once: a burst of 40 concurrent Failures on a real
// clock stored 3 to 11 of them, and TestBurstCoalesced (distinct instants,
// but the machine clamps a later instant to an earlier writer's now) lost
// one under load. So the store merges what each write changed in the
// record it read: a union of instants stores [t0 t1] here, not
// [t0 t1 t1].
func TestConcurrentFailuresAtOneInstant(t *testing.T) {
	ctx := t.Context()
	s := newStore(t)
	t0 := srv.Now().Truncate(time.Millisecond)
	t1 := t0.Add(time.Millisecond)
	rec := func(f ...time.Time) []byte { return record.EncodeRecord(record.Record{Failures: f}) }
	// Sent at once; it occupies the key's write slot, so both writes
	// below queue together.
	if _, err := s.CompareAndSwap(ctx, "instant.example", driver.NoVersion, rec(t0), time.Hour); err != nil {
		t.Fatal(err)
	}
	_, base, err := s.Get(ctx, "instant.example")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			if _, err := s.CompareAndSwap(ctx, "instant.example", base, rec(t0, t1), time.Hour); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	v, _, err := sibling(t, s).Get(ctx, "instant.example")
	if err != nil {
		t.Fatal(err)
	}
	got, err := record.DecodeRecord(v)
	if err != nil {
		t.Fatal(err)
	}
	if want := rec(t0, t1, t1); string(record.EncodeRecord(got)) != string(want) {
		t.Errorf("stored failures %v, want %v: one failure at t0, two at t1", got.Failures, []time.Time{t0, t1, t1})
	}
}
