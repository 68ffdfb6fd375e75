package redis_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker/backends/redis"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
)

// clockSlack is what the bounds allow beyond resolution: the server runs on
// this machine and reads the same clock, so its reading happens between
// before and after; the slack covers only the two clock-reading paths.
const clockSlack = time.Millisecond

// outside says why got, a server reading with resolution res taken between
// before and after on this machine's clock, lies outside
// [before-res-clockSlack, after+clockSlack]; "" when it lies inside.
func outside(before, after, got time.Time, res time.Duration) string {
	if lo, hi := before.Add(-res-clockSlack), after.Add(clockSlack); got.Before(lo) || got.After(hi) {
		return fmt.Sprintf("server clock %v outside [%v, %v] (offset from before %v, round trip %v)",
			got, lo, hi, got.Sub(before), after.Sub(before))
	}
	return ""
}

// sampleWithin samples st's clock and fails t unless the sample is within
// bounds of this machine's clock.
func sampleWithin(t *testing.T, st driver.ClockSampler) {
	t.Helper()
	before := time.Now()
	got, res, err := st.SampleClock(t.Context())
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	if res != time.Microsecond {
		t.Errorf("resolution = %v, want 1µs (TIME)", res)
	}
	if why := outside(before, after, got, res); why != "" {
		t.Error(why)
	}
}

// TestSampleClock: TIME on a server of this machine reads this machine's
// clock, to the microsecond, within the round trip.
func TestSampleClock(t *testing.T) {
	st := newRaw(t, srv.Addr())
	for range 20 {
		sampleWithin(t, st)
	}
}

// TestSampleClockCluster: a ClusterClient sends the keyless TIME to some
// node and answers like a single server.
func TestSampleClockCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-master cluster")
	}
	c := redistest.MustStartCluster(t, 3)
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = cc.Close() })
	st, err := redis.New(cc)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		sampleWithin(t, st)
	}
}

// TestSampleClockErrors: a canceled context, a closed store, a paused and a
// killed server each give a redis *driver.OpError, never a time.
func TestSampleClockErrors(t *testing.T) {
	check := func(what string, err error, cause error) {
		t.Helper()
		var oe *driver.OpError
		if !errors.As(err, &oe) || oe.Backend != "redis" || oe.Op != "sample clock" {
			t.Errorf("%s: err = %v, want a redis sample clock *driver.OpError", what, err)
		}
		if cause != nil && !errors.Is(err, cause) {
			t.Errorf("%s: err = %v, want it to match %v", what, err, cause)
		}
		t.Logf("%s: %v", what, err)
	}
	sample := func(ctx context.Context, st *redis.Store) error {
		got, res, err := st.SampleClock(ctx)
		if err != nil && (!got.IsZero() || res != 0) {
			t.Errorf("SampleClock = %v, %v with error %v; want zero values", got, res, err)
		}
		return err
	}

	s := redistest.MustStart(t)
	st := newRaw(t, s.Addr(), func(o *goredis.Options) { o.MaxRetries = 1 })
	sampleWithin(t, st) // negative control: the same store answers while the server runs

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	check("canceled", sample(ctx, st), context.Canceled)

	if err := s.Pause(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithTimeout(t.Context(), 300*time.Millisecond)
	start := time.Now()
	err := sample(ctx, st)
	cancel()
	// The server stays paused until the call returns, so returning with
	// DeadlineExceeded (checked below) proves the context was honoured;
	// how soon is the machine's load, so the bound only catches a hang.
	if d := time.Since(start); d > hangGuard {
		t.Errorf("paused: SampleClock took %v, beyond its 300 ms context", d)
	}
	check("paused", err, context.DeadlineExceeded)
	if err := s.Resume(); err != nil {
		t.Fatal(err)
	}
	sampleWithin(t, st)

	s.Kill()
	check("killed", sample(t.Context(), st), nil)

	closed := newRaw(t, srv.Addr())
	_ = closed.Close()
	check("closed", sample(t.Context(), closed), redis.ErrClosed)
}

// hangGuard bounds a call that should end with its context: far past any
// delay a loaded machine adds, short of waiting for the paused server.
const hangGuard = 30 * time.Second
