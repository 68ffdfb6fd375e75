package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/internal/testservers/dateproxy"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"

	"github.com/kvbreaker/kvbreaker/internal/output"
)

// clockBehind is how far the "redis-clock-behind" test backend sets this
// machine's clock behind (as check's clock measurement reads it).
const clockBehind = 5 * time.Second

func init() {
	// Redis, with this machine's clock read clockBehind late: an offset of
	// a known size without touching the server's clock.
	backends["redis-clock-behind"] = variant(func(ctx context.Context, f *backendFlags) (*conn, error) {
		c, err := openRedis(ctx, f)
		if c != nil {
			c.clockShift = -clockBehind
		}
		return c, err
	}, "redis")
	// The same for DynamoDB, whose clock (the Date header) reads to the
	// second.
	backends["dynamodb-clock-behind"] = variant(func(ctx context.Context, f *backendFlags) (*conn, error) {
		c, err := openDynamoDB(ctx, f)
		if c != nil {
			c.clockShift = -clockBehind
		}
		return c, err
	}, "dynamodb")
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
	// One clock: the true offset is 0, so the interval must hold it. Its
	// width is the samples' round trips, which the machine's load sets, so
	// it is logged, not judged (a width that made the result unproven
	// would fail the result check above, and the table says to run again).
	if lo, hi := *c.OffsetMS-*c.UncertaintyMS, *c.OffsetMS+*c.UncertaintyMS; lo > 0 || hi < 0 {
		t.Errorf("offset %v ± %v ms: want an interval holding 0", *c.OffsetMS, *c.UncertaintyMS)
	}
	t.Logf("offset %v ± %v ms", *c.OffsetMS, *c.UncertaintyMS)
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
		*c.OffsetMS-*c.UncertaintyMS > output.Ms(clockBehind) || *c.OffsetMS+*c.UncertaintyMS < output.Ms(clockBehind) {
		t.Errorf("5 s behind: clock %+v; want exceeds, with an interval holding %v ms", c, output.Ms(clockBehind))
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
// header), so the interval is up to a second wide, narrower when samples
// straddle a second boundary; whatever its width, it must hold the true
// offset: 0 (the Date is stamped from this machine's clock), and 5 s with this
// machine's clock read 5 s behind (the control: an interval that ignored
// the offset would fail there). Which result a width gives depends on
// where in the second the samples fell, so any result the interval
// allows is accepted, and the one got is logged.
func TestCheckClockDynamoDB(t *testing.T) {
	for _, tc := range []struct {
		backend string
		offset  time.Duration
		results []string // what an interval holding offset may yield against the default 1 s
	}{
		{"dynamodb", 0, []string{clockOK, clockUnproven}},
		{"dynamodb-clock-behind", clockBehind, []string{clockExceeds}},
	} {
		t.Run(tc.backend, func(t *testing.T) {
			args := append(connArgs("dynamodb"), "--quick", "--quiet")
			args[1] = tc.backend
			// dynalite's own Date is node's cached string, refreshed by a
			// timer that runs late on a loaded machine; a proxy stamps
			// the true one.
			i := slices.Index(args, "--dynamodb-endpoint")
			args[i+1] = dateproxy.Start(t, args[i+1], dateproxy.Stamp(0)).URL
			want := exitOK
			if tc.offset > 0 {
				want = exitFail
			}
			c := checkJSON(t, want, args...).Clock
			if c == nil || c.OffsetMS == nil || c.UncertaintyMS == nil {
				t.Fatalf("clock: %+v; want a measured offset", c)
			}
			off, unc := *c.OffsetMS, *c.UncertaintyMS
			if unc < 0 || off-unc > output.Ms(tc.offset) || off+unc < output.Ms(tc.offset) {
				t.Errorf("offset %v ± %v ms: want an interval holding the true %v ms", off, unc, output.Ms(tc.offset))
			}
			if !slices.Contains(tc.results, c.Result) {
				t.Errorf("result %q for %v ± %v ms; want one of %q", c.Result, off, unc, tc.results)
			}
			t.Logf("offset %v ± %v ms: %s", off, unc, c.Result)
		})
	}
}
