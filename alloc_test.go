package kvbreaker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
)

// TestAllowClosedAllocatesNothing: Allow on a closed host allocates
// nothing, over a host mix larger than the hint cache (so every call also
// evicts a hint) and with the decision cache on. The open host is the
// negative control: decoding its record allocates, and the check sees it.
func TestAllowClosedAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	hosts := make([]string, 40_000) // more than the 16,384 hints
	for i := range hosts {
		hosts[i] = fmt.Sprintf("a%06d.example", i)
	}
	for _, s := range []kvbreaker.Settings{{}, {CacheSize: 2 * len(hosts)}} {
		b := newBreaker(t, memory.New(), s)
		i := 0
		allow := func() {
			if v, _ := b.Allow(ctx, hosts[i], time.Time{}); v.Decision != kvbreaker.Send {
				t.Fatalf("closed host: %v", v.Decision)
			}
			i = (i + 1) % len(hosts)
		}
		for range len(hosts) { // every cache shard allocates its slots once
			allow()
		}
		if n := testing.AllocsPerRun(len(hosts), allow); n != 0 {
			t.Errorf("CacheSize %d: closed Allow made %v allocations per call", s.CacheSize, n)
		}
	}
	b := newBreaker(t, memory.New(), kvbreaker.Settings{FailureThreshold: 1})
	if err := b.Failure(ctx, host); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() { b.Allow(ctx, host, time.Time{}) }); n == 0 {
		t.Error("negative control: Allow on an open host (a record to copy and decode) showed no allocations")
	}
}
