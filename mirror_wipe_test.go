package kvbreaker_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/driver"
)

// TestMirrorResyncForgetsWipedRecords: the store is emptied behind the
// adapters' back and the feed says so as Lost, then a Reset and a snapshot
// without the host's record: the mirror forgets the record it held, so the
// next call sends, decided from the mirror with no read, as a Breaker
// without a mirror would.
func TestMirrorResyncForgetsWipedRecords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b, st, send := scripted(t, kvbreaker.Settings{FailureThreshold: 1})
		rec := openRecord(time.Now())
		ver, err := st.Store.CompareAndSwap(ctx, "h.example", driver.NoVersion, rec, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		send(driver.Change{Kind: driver.ChangePut, Key: "h.example", Value: rec, Version: ver}, driver.Change{Kind: driver.ChangeSynced, At: time.Now()})
		if v, err := b.Allow(ctx, "h.example", time.Time{}); err != nil || v.Decision != kvbreaker.Hold {
			t.Fatalf("with the open record in the mirror: %v %v, want Hold", v.Decision, err)
		}
		if err := st.Store.CompareAndDelete(ctx, "h.example", ver); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
		send(driver.Change{Kind: driver.ChangeLost, Err: errors.New("the database was flushed")},
			driver.Change{Kind: driver.ChangeReset}, driver.Change{Kind: driver.ChangeSynced, At: time.Now()})
		st.gets.Store(0)
		v, err := b.Allow(ctx, "h.example", time.Time{})
		if err != nil || v.Decision != kvbreaker.Send {
			t.Fatalf("after a resync whose snapshot lacks the record: %v %v, want Send", v.Decision, err)
		}
		if n := st.gets.Load(); n != 0 {
			t.Fatalf("the decision read the store %d times; want it from the resynced mirror", n)
		}
	})
}

// TestMirrorReadKeepsOwnWriteMadeMeanwhile: a call (A) reads a host the
// feed said changed and finds it absent; while it reads, another call of
// this worker (B), whose own read a second Stale made useless, opens the
// host's circuit. Installing A's read must not drop what B's write taught
// the mirror: the next call holds, from the mirror.
func TestMirrorReadKeepsOwnWriteMadeMeanwhile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b, st, send := scripted(t, kvbreaker.Settings{FailureThreshold: 1})
		send(stale("h.example"), driver.Change{Kind: driver.ChangeSynced, At: time.Now()})
		aRead, bDone, aDone := make(chan struct{}), make(chan struct{}), make(chan kvbreaker.Decision, 1)
		var reads atomic.Int32
		st.afterGet = func(string) {
			switch reads.Add(1) {
			case 1: // B's read: the feed names the host again, A reads it
				send(stale("h.example"))
				go func() {
					v, err := b.Allow(ctx, "h.example", time.Time{})
					if err != nil {
						t.Errorf("A: %v", err)
					}
					aDone <- v.Decision
				}()
				<-aRead
			case 2: // A's read, held until B has written
				close(aRead)
				<-bDone
			}
		}
		if err := b.Failure(ctx, "h.example"); err != nil {
			t.Fatalf("B: %v", err)
		}
		close(bDone)
		if d := <-aDone; d != kvbreaker.Send {
			t.Fatalf("A, whose read found the host absent: %v, want Send", d)
		}
		st.gets.Store(0)
		v, err := b.Allow(ctx, "h.example", time.Time{})
		if err != nil || v.Decision != kvbreaker.Hold || st.gets.Load() != 0 {
			t.Fatalf("after B opened the circuit: %v %v with %d reads, want Hold from the mirror", v.Decision, err, st.gets.Load())
		}
	})
}

// TestMirrorResyncKeepsOwnWriteItPredates: after Lost, a resync whose
// snapshot predates this worker's write (its Synced is dated before the
// write returned) keeps the write: the mirror decides from it, not from
// the older snapshot that lacks the record.
func TestMirrorResyncKeepsOwnWriteItPredates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		b, st, send := scripted(t, kvbreaker.Settings{FailureThreshold: 1})
		before := time.Now()
		time.Sleep(time.Millisecond)
		if err := b.Failure(ctx, "h.example"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
		send(driver.Change{Kind: driver.ChangeLost, Err: errors.New("connection reset")},
			driver.Change{Kind: driver.ChangeReset}, driver.Change{Kind: driver.ChangeSynced, At: before})
		st.gets.Store(0)
		v, err := b.Allow(ctx, "h.example", time.Time{})
		if err != nil || v.Decision != kvbreaker.Hold || st.gets.Load() != 0 {
			t.Fatalf("after a resync older than the write: %v %v with %d reads, want Hold from the own write", v.Decision, err, st.gets.Load())
		}
	})
}
