package kvbreaker_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
)

// TestMirrorLagStaleDuringOwnWrite: on a feed of invalidations, the Stale
// of this worker's write can arrive before the write returns; MirrorLag
// then reports the Stale's arrival, measured from when the write was sent,
// once: not the later return, and not again at the host's next Stale.
func TestMirrorLagStaleDuringOwnWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		var ev mirrorEvents
		b, st, send := scripted(t, kvbreaker.Settings{FailureThreshold: 1, Observer: ev.observer()})
		st.afterWrite = func(key string) {
			st.afterWrite = nil
			time.Sleep(2 * time.Millisecond)
			send(stale(key))
			time.Sleep(5 * time.Millisecond)
		}
		if err := b.Failure(ctx, "h.example"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
		send(stale("h.example"))
		ev.mu.Lock()
		lags := fmt.Sprint(ev.lags)
		ev.mu.Unlock()
		if lags != "[2ms]" {
			t.Fatalf("MirrorLag: %s, want [2ms] (the Stale's arrival during the write, once)", lags)
		}
	})
}

// TestMirrorResetKeepsOwnUntilSynced: a Reset keeps this worker's writes
// ahead of the feed (the snapshot may predate them), and the snapshot's
// Synced settles them, so that the feed decides the host again: when
// another worker deleted the record before the snapshot, the host is
// absent, not held open by the own write.
func TestMirrorResetKeepsOwnUntilSynced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b, st, send := scripted(t, kvbreaker.Settings{FailureThreshold: 1})
		if err := b.Failure(ctx, "h.example"); err != nil {
			t.Fatal(err)
		}
		_, ver, err := st.Store.Get(ctx, "h.example")
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
		send(driver.Change{Kind: driver.ChangeReset})
		if d, _ := b.Allow(ctx, "h.example", time.Time{}); d.Decision != kvbreaker.Hold {
			t.Fatalf("after the Reset, before the snapshot's Synced: %v, want Hold from the own write", d.Decision)
		}
		// Another worker closes the circuit; the snapshot, read after,
		// has no record of the host.
		if err := st.Store.CompareAndDelete(ctx, "h.example", ver); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
		send(driver.Change{Kind: driver.ChangeSynced, At: time.Now()})
		st.gets.Store(0)
		if d, _ := b.Allow(ctx, "h.example", time.Time{}); d.Decision != kvbreaker.Send || st.gets.Load() != 0 {
			t.Fatalf("after a snapshot without the record: %v with %d reads, want Send from the mirror", d.Decision, st.gets.Load())
		}
	})
}
