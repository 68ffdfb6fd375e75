package kvbreaker_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/skew"
)

// A worker whose clock runs a year (or an hour) ahead opens a host's
// circuit. The correct workers must hold that host's messages no longer
// than a correct writer could have made them (RecoveryDelay, plus twice
// ClockSkew), never drop one before HoldLimit of real holding, and the
// record must not outlive what this worker's StateTTL allows, also on a
// store whose expiry follows the writer's clock (DynamoDB's expiresAt).
func TestFastClockWriterBounded(t *testing.T) {
	for _, kind := range []driver.ExpiryKind{driver.ExpiryRelative, driver.ExpiryReaderFiltered} {
		for _, ahead := range []time.Duration{365 * 24 * time.Hour, time.Hour} {
			t.Run(fmt.Sprintf("%v/%v", kind, ahead), func(t *testing.T) { fastClockFleet(t, kind, ahead) })
		}
	}
}

func fastClockFleet(t *testing.T, kind driver.ExpiryKind, ahead time.Duration) {
	ctx := context.Background()
	const host = "fast.example"
	const skewBound = time.Second
	truth := skew.NewManual(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	st := skew.New(memory.New(memory.WithClock(truth.Now)), skew.Distortion{Kind: kind}, truth.Now)
	s := kvbreaker.Settings{
		FailureThreshold: 5,
		FailureWindow:    10 * time.Minute,
		RecoveryDelay:    30 * time.Minute,
		HoldLimit:        2 * time.Hour,
		ClockSkew:        skewBound,
		SkipClockCheck:   true,
		Logger:           slog.New(slog.DiscardHandler),
	}
	worker := func(offset time.Duration) *kvbreaker.Breaker {
		c := &skew.Clock{Base: truth.Now, Offset: offset}
		ws := s
		ws.Clock = c.Now
		b, err := kvbreaker.New(st.View(c.Now), ws)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close(ctx) })
		return b
	}
	fast := worker(ahead)
	correct := []*kvbreaker.Breaker{worker(0), worker(skewBound), worker(-skewBound)}
	for range 5 {
		if err := fast.Failure(ctx, host); err != nil {
			t.Fatal(err)
		}
	}
	if v, _ := fast.Allow(ctx, host, time.Time{}); v.Decision != kvbreaker.Hold {
		t.Fatalf("the fast worker's own circuit is %v, want open (hold)", v.Decision)
	}

	// Each correct worker holds one message and asks again at every
	// RetryAt until it is sent; a message is dropped only after HoldLimit.
	type msg struct {
		b         *kvbreaker.Breaker
		heldSince time.Time
		retryAt   time.Time
		done      bool
	}
	start := truth.Now()
	msgs := make([]*msg, len(correct))
	for i, b := range correct {
		msgs[i] = &msg{b: b}
	}
	sent := 0
	for step := 0; sent < len(msgs); step++ {
		if step > 100 {
			t.Fatalf("messages still held after 100 rounds (%v of real time)", truth.Now().Sub(start))
		}
		for _, m := range msgs {
			if m.done || truth.Now().Before(m.retryAt) {
				continue
			}
			now := truth.Now()
			v, err := m.b.Allow(ctx, host, m.heldSince)
			if err != nil {
				t.Fatal(err)
			}
			switch v.Decision {
			case kvbreaker.Drop:
				t.Fatalf("message held since %v dropped at %v, after %v of real holding (HoldLimit %v)", m.heldSince, now, now.Sub(m.heldSince), s.HoldLimit)
			case kvbreaker.Hold:
				if lim := now.Add(s.RecoveryDelay + 3*skewBound); v.RetryAt.After(lim) {
					t.Fatalf("held at %v until %v, %v away: beyond RecoveryDelay + 2×ClockSkew (and this worker's own offset)", now, v.RetryAt, v.RetryAt.Sub(now))
				}
				m.heldSince, m.retryAt = v.HeldSince, v.RetryAt
			default:
				m.done = true
				sent++
				if v.Decision == kvbreaker.Probe {
					if err := m.b.Success(ctx, host); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		next := time.Time{}
		for _, m := range msgs {
			if !m.done && (next.IsZero() || m.retryAt.Before(next)) {
				next = m.retryAt
			}
		}
		if d := next.Sub(truth.Now()); d > 0 {
			truth.Advance(d)
		}
	}
	if held := truth.Now().Sub(start); held > s.RecoveryDelay+3*skewBound {
		t.Fatalf("the host was held for %v; a correct writer could hold it for RecoveryDelay %v", held, s.RecoveryDelay)
	}
}

// Once a correct worker has read the fast writer's record, the record it
// leaves lives no longer than this worker's StateTTL (the write replaced
// the fast writer's expiry) and holds no instant from the future.
func TestFastClockRecordRewritten(t *testing.T) {
	ctx := context.Background()
	const host = "fast.example"
	truth := skew.NewManual(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	st := skew.New(memory.New(memory.WithClock(truth.Now)), skew.Distortion{Kind: driver.ExpiryReaderFiltered}, truth.Now)
	var logs bytes.Buffer
	var mu sync.Mutex
	var anomalies []string
	s := kvbreaker.Settings{
		SkipClockCheck: true,
		Logger:         slog.New(slog.NewTextHandler(&logs, nil)),
		Observer: &kvbreaker.Observer{RecordAnomaly: func(_ context.Context, e kvbreaker.AnomalyInfo) {
			mu.Lock()
			anomalies = append(anomalies, e.Anomaly)
			mu.Unlock()
		}},
	}
	fastClock := &skew.Clock{Base: truth.Now, Offset: 365 * 24 * time.Hour}
	fs := s
	fs.Clock = fastClock.Now
	fast, err := kvbreaker.New(st.View(fastClock.Now), fs)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if err := fast.Failure(ctx, host); err != nil {
			t.Fatal(err)
		}
	}
	cs := s
	cs.Clock = truth.Now
	b, err := kvbreaker.New(st.View(truth.Now), cs)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if v, err := b.Allow(ctx, host, time.Time{}); err != nil || v.Decision != kvbreaker.Hold {
			t.Fatalf("Allow = %+v, %v; want Hold", v, err)
		}
	}
	status, err := b.Inspect(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	now := truth.Now()
	if status.State != kvbreaker.StateOpen || status.RestrainedUntil.After(now.Add(b.StateTTL())) || len(status.Failures) != 5 {
		t.Fatalf("after a correct worker's Allow the record is %+v; want open, restrained at most RecoveryDelay, 5 failures", status)
	}
	for _, f := range status.Failures {
		if f.After(now) {
			t.Fatalf("failure %v still after now %v", f, now)
		}
	}
	// The record expires by the writer's clock: the correct worker's
	// write must have replaced the fast one's expiry.
	truth.Advance(b.StateTTL() + time.Second)
	if _, _, err := st.View(truth.Now).Get(ctx, host); err == nil {
		t.Fatalf("the record still lives StateTTL (%v) after the correct worker rewrote it: the fast writer's expiry stands", b.StateTTL())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(anomalies) == 0 || anomalies[0] != "future" {
		t.Fatalf("Observer.RecordAnomaly saw %v; want %q", anomalies, "future")
	}
	if n := strings.Count(logs.String(), "clock ahead"); n != 1 {
		t.Fatalf("logged the fast record %d times; want once per host:\n%s", n, logs.String())
	}
}
