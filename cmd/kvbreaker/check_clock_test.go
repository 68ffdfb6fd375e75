package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
)

// clockBehind is how far the "redis-clock-behind" test backend sets this
// machine's clock behind (as check's clock measurement reads it).
const clockBehind = 5 * time.Second

func init() {
	// Redis, with this machine's clock read clockBehind late: an offset of
	// a known size without touching the server's clock.
	backends["redis-clock-behind"] = backendDef{func(ctx context.Context, f *backendFlags) (*conn, error) {
		c, err := openRedis(ctx, f)
		if c != nil {
			c.clockShift = -clockBehind
		}
		return c, err
	}, "redis"}
}

// TestCheckClockNotMeasurable: stores that show no clock (etcd, memory)
// report it as not measurable, with null offsets, and pass.
func TestCheckClockNotMeasurable(t *testing.T) {
	for _, backend := range []string{"memory", "etcd"} {
		t.Run(backend, func(t *testing.T) {
			rep := checkJSON(t, exitOK, append(connArgs(backend), "--quick", "--quiet")...)
			c := rep.Clock
			if c == nil || c.Result != clockNotMeasurable || c.OffsetMS != nil || c.UncertaintyMS != nil || c.Message == nil || !strings.Contains(*c.Message, "shows no clock") {
				t.Errorf("clock: %+v; want not_measurable with null offsets and a message", c)
			}
			code, out, _ := runT(t, append([]string{"check"}, append(connArgs(backend), "--quick", "--quiet")...)...)
			if code != exitOK || !strings.Contains(out, "clock: not measurable: ") {
				t.Errorf("table: exit %d, want a not-measurable clock line:\n%s", code, out)
			}
		})
	}
}

// TestCheckClockRedis: against a real Redis server, check measures the
// offset (TIME, 1 µs) next to --clock-skew. This machine and the server
// share one clock, so the offset is near zero and passes; with this
// machine's clock read 5 s behind, the offset is proven beyond the default
// 1 s and the check fails, naming the fix; with --clock-skew 10s the same
// offset passes (the control).
func TestCheckClockRedis(t *testing.T) {
	srv := redistest.MustStart(t)
	args := []string{"--redis-url", srv.URL(), "--quick", "--quiet"}

	rep := checkJSON(t, exitOK, append([]string{"--backend", "redis"}, args...)...)
	c := rep.Clock
	if c == nil || c.Result != clockOK || c.OffsetMS == nil || c.UncertaintyMS == nil {
		t.Fatalf("clock: %+v; want ok with an offset", c)
	}
	// One clock: the true offset is 0, so the interval must hold it.
	if lo, hi := *c.OffsetMS-*c.UncertaintyMS, *c.OffsetMS+*c.UncertaintyMS; lo > 0 || hi < 0 || hi-lo > 100 {
		t.Errorf("offset %v ± %v ms: want an interval holding 0, under 100 ms wide", *c.OffsetMS, *c.UncertaintyMS)
	}
	if c.ClockSkewMS != 1000 {
		t.Errorf("clock_skew_ms %v, want 1000 (the default --clock-skew)", c.ClockSkewMS)
	}

	code, out, errOut := runT(t, append([]string{"check", "--backend", "redis-clock-behind"}, args...)...)
	wantLine := "behind the store's, more than --clock-skew 1s: fix this machine's clock (NTP) or raise --clock-skew (Settings.ClockSkew)"
	if code != exitFail || !strings.Contains(out, wantLine) || !strings.Contains(errOut, wantLine) {
		t.Errorf("5 s behind: exit %d, want %d and %q on stdout and stderr\nstdout: %s\nstderr: %s", code, exitFail, wantLine, out, errOut)
	}
	rep = checkJSON(t, exitFail, append([]string{"--backend", "redis-clock-behind"}, args...)...)
	if c := rep.Clock; c == nil || c.Result != clockExceeds || c.OffsetMS == nil ||
		*c.OffsetMS-*c.UncertaintyMS > ms(clockBehind) || *c.OffsetMS+*c.UncertaintyMS < ms(clockBehind) {
		t.Errorf("5 s behind: clock %+v; want exceeds, with an interval holding %v ms", c, ms(clockBehind))
	}
	if rep.OK || len(rep.Broken) != 0 {
		t.Errorf("5 s behind: ok %v, broken %v; want not ok, no broken promise (the store keeps them)", rep.OK, rep.Broken)
	}

	rep = checkJSON(t, exitOK, append([]string{"--backend", "redis-clock-behind", "--clock-skew", "10s"}, args...)...)
	if c := rep.Clock; c == nil || c.Result != clockOK || c.ClockSkewMS != 10000 {
		t.Errorf("5 s behind, --clock-skew 10s: clock %+v; want ok", c)
	}
}

// TestCheckClockDynamoDB: DynamoDB's clock reads to the second (the Date
// header): three samples a few milliseconds apart leave most of that
// second unknown, and the interval holds the true offset (dynalite runs on
// this machine's clock).
func TestCheckClockDynamoDB(t *testing.T) {
	rep := checkJSON(t, exitOK, append(connArgs("dynamodb"), "--quick", "--quiet")...)
	c := rep.Clock
	if c == nil || c.OffsetMS == nil {
		t.Fatalf("clock: %+v; want a measured offset", c)
	}
	if *c.UncertaintyMS < 400 || *c.OffsetMS-*c.UncertaintyMS > 0 || *c.OffsetMS+*c.UncertaintyMS < 0 {
		t.Errorf("offset %v ± %v ms: want an interval most of a second wide (1 s resolution) holding 0", *c.OffsetMS, *c.UncertaintyMS)
	}
	if c.Result != clockOK && c.Result != clockUnproven {
		t.Errorf("result %q; want ok or unproven (one second's resolution against a 1 s bound)", c.Result)
	}
}
