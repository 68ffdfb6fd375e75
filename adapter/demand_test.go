package adapter_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/adapter"
)

// demandBeats returns a DemandBeats whose store's clock reads an hour
// ahead of the local clock, sampled in an instant at *now.
func demandBeats(now *time.Time, sampleErr *error) *adapter.DemandBeats {
	return &adapter.DemandBeats{
		Heartbeat: 800 * time.Millisecond,
		Dropped:   new(atomic.Int64),
		KeepLate:  new(atomic.Bool),
		Clock: adapter.BeatClock{
			Sample: func(context.Context) (before, server, after time.Time, err error) {
				if *sampleErr != nil {
					return time.Time{}, time.Time{}, time.Time{}, *sampleErr
				}
				return *now, now.Add(time.Hour), *now, nil
			},
			Every: 30 * time.Second, Fresh: time.Second, DriftPPM: 500, Unit: time.Microsecond,
		},
	}
}

// TestDemandBeatsDueAfterHeartbeatAndJitter: a feed beats only once its
// newest Synced is the heartbeat old, and always by the heartbeat and an
// eighth; the jitter in between differs from one Synced to the next.
func TestDemandBeatsDueAfterHeartbeatAndJitter(t *testing.T) {
	var now time.Time
	var noErr error
	b := demandBeats(&now, &noErr)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if !b.Due(t0) {
		t.Error("a feed that delivered no Synced is not due")
	}
	dueMid, notDueMid, notDueLate := 0, 0, 0
	for i := range 400 {
		at := t0.Add(time.Duration(i) * time.Hour)
		if !b.Synced(at) {
			t.Fatalf("Synced(%v) after %v reports it not newer", at, b.Last())
		}
		if b.Due(at.Add(b.Heartbeat - time.Nanosecond)) {
			t.Fatalf("due before the heartbeat: Synced at %v", at)
		}
		if !b.Due(at.Add(b.Heartbeat + b.Heartbeat/8)) {
			t.Fatalf("not due at the heartbeat and an eighth: Synced at %v", at)
		}
		if b.Due(at.Add(b.Heartbeat + b.Heartbeat/16)) {
			dueMid++
		} else {
			notDueMid++
		}
		// Past nine tenths of the jitter's range: about one in ten waits
		// longer, so not one in 400 would be a narrower range.
		if !b.Due(at.Add(b.Heartbeat + b.Heartbeat/8*9/10)) {
			notDueLate++
		}
	}
	if dueMid == 0 || notDueMid == 0 {
		t.Errorf("at the heartbeat and a sixteenth, %d of 400 feeds were due and %d were not: the jitter does not vary", dueMid, notDueMid)
	}
	if notDueLate == 0 {
		t.Error("every feed was due at nine tenths of an eighth past the heartbeat: the jitter does not reach an eighth")
	}
}

// TestDemandBeatsDueAtTheHeartbeat: with no room for a jitter (a
// heartbeat under 8 ns) a feed is due exactly when its newest Synced is
// the heartbeat old, not a nanosecond later.
func TestDemandBeatsDueAtTheHeartbeat(t *testing.T) {
	for _, h := range []time.Duration{0, 7} {
		b := &adapter.DemandBeats{Heartbeat: h}
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		b.Synced(at)
		if !b.Due(at.Add(h)) {
			t.Errorf("heartbeat %v: not due at the heartbeat", h)
		}
		if h > 0 && b.Due(at.Add(h-1)) {
			t.Errorf("heartbeat %v: due a nanosecond before the heartbeat", h)
		}
	}
}

// TestDemandBeatsOwnBeatUnderWay: while the feed's own beat is under way
// it is never due; that beat is taken once, by its own number, at the
// instant it was sent; it is overdue only past the bound.
func TestDemandBeatsOwnBeatUnderWay(t *testing.T) {
	var now time.Time
	var noErr error
	b := demandBeats(&now, &noErr)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b.Synced(t0)
	seq := b.Next()
	sent := t0.Add(time.Second)
	b.Sent(sent)
	if b.Due(sent.Add(time.Hour)) {
		t.Error("due while the feed's own beat is under way")
	}
	if b.Overdue(sent.Add(2*time.Second), 2*time.Second) {
		t.Error("overdue at the bound")
	}
	if !b.Overdue(sent.Add(2*time.Second+time.Nanosecond), 2*time.Second) {
		t.Error("not overdue past the bound")
	}
	if _, ok := b.Own(seq - 1); ok {
		t.Error("an earlier number taken for the beat under way")
	}
	at, ok := b.Own(seq)
	if !ok || !at.Equal(sent) {
		t.Errorf("Own(%d) = %v, %v; want %v, true", seq, at, ok, sent)
	}
	if _, ok := b.Own(seq); ok {
		t.Error("the beat under way taken twice")
	}
	if b.Overdue(sent.Add(time.Hour), 2*time.Second) {
		t.Error("overdue with no beat under way")
	}
	if next := b.Next(); next <= seq {
		t.Errorf("Next after %d = %d: numbers must grow", seq, next)
	}
}

// TestDemandBeatsOther: another's beat is dated at or before its arrival
// and delivered when newer than the last Synced; one that converts to an
// instant after its arrival is dropped and counted (kept only with
// KeepLate, the negative control), and the sample's error is returned.
func TestDemandBeatsOther(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var sampleErr error
	b := demandBeats(&now, &sampleErr)
	ctx := t.Context()

	// The beat ran 10 ms before its arrival by the store's clock.
	arrival := now.Add(50 * time.Millisecond)
	at, ok, err := b.Other(ctx, arrival.Add(time.Hour-10*time.Millisecond), arrival)
	if err != nil || !ok {
		t.Fatalf("Other = %v, %v, %v; want a Synced", at, ok, err)
	}
	if at.After(arrival) || !b.Last().Equal(at) {
		t.Errorf("dated %v for an arrival at %v (Last %v)", at, arrival, b.Last())
	}
	// An older beat arriving after it is not delivered, nor counted late.
	if _, ok, err := b.Other(ctx, arrival.Add(time.Hour-20*time.Millisecond), arrival.Add(time.Millisecond)); err != nil || ok || b.Dropped.Load() != 0 {
		t.Errorf("an older beat: ok %v, err %v, %d dropped as late; want none", ok, err, b.Dropped.Load())
	}
	// A beat dated a minute after its arrival.
	last := b.Last()
	future := arrival.Add(time.Hour + time.Minute)
	if _, ok, err := b.Other(ctx, future, arrival.Add(2*time.Millisecond)); err != nil || ok || b.Dropped.Load() != 1 {
		t.Errorf("a beat from the future: ok %v, err %v, %d dropped as late; want it dropped", ok, err, b.Dropped.Load())
	}
	if !b.Last().Equal(last) {
		t.Errorf("a dropped beat moved Last from %v to %v", last, b.Last())
	}
	b.KeepLate.Store(true)
	if at, ok, err := b.Other(ctx, future, arrival.Add(3*time.Millisecond)); err != nil || !ok || !at.After(arrival) || b.Dropped.Load() != 1 {
		t.Errorf("the same beat with KeepLate: %v, ok %v, err %v, %d dropped; want it delivered after its arrival", at, ok, err, b.Dropped.Load())
	}
	// A sample that fails: its error, nothing delivered.
	sampleErr = errors.New("connection refused")
	now = now.Add(time.Hour)
	if _, ok, err := b.Other(ctx, now.Add(time.Hour), now); !errors.Is(err, sampleErr) || ok {
		t.Errorf("with a failing sample: ok %v, err %v; want the sample's error", ok, err)
	}
}
