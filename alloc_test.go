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

// TestMirrorAllowAllocatesNothing: with a healthy mirror, Allow allocates
// nothing on a closed host, on an open one, and on a held message's
// re-check, each decided from the mirror without a store request. A Failure
// on a new host is the negative control: its write encodes a record.
func TestMirrorAllowAllocatesNothing(t *testing.T) {
	ctx := context.Background()
	st := &counting{Store: memory.New()}
	synced := make(chan struct{}, 1)
	b := newBreaker(t, st, kvbreaker.Settings{FailureThreshold: 1, Mirror: true, SkipClockCheck: true, Observer: &kvbreaker.Observer{
		Mirror: func(_ context.Context, i kvbreaker.MirrorInfo) {
			if i.Healthy {
				select {
				case synced <- struct{}{}:
				default:
				}
			}
		}}})
	defer b.Close(ctx)
	<-synced
	if err := b.Failure(ctx, "open.example"); err != nil {
		t.Fatal(err)
	}
	held := time.Now().Add(-time.Second)
	before := st.requests()
	for _, c := range []struct {
		name, host string
		heldSince  time.Time
		want       kvbreaker.Decision
	}{
		{"closed", "closed.example", time.Time{}, kvbreaker.Send},
		{"open", "open.example", time.Time{}, kvbreaker.Hold},
		{"held re-check", "open.example", held, kvbreaker.Hold},
	} {
		if n := testing.AllocsPerRun(1000, func() {
			if v, _ := b.Allow(ctx, c.host, c.heldSince); v.Decision != c.want {
				t.Fatalf("%s: %v, want %v", c.name, v.Decision, c.want)
			}
		}); n != 0 {
			t.Errorf("%s: Allow made %v allocations per call", c.name, n)
		}
	}
	if n := st.requests() - before; n != 0 {
		t.Errorf("%d store requests; want every Allow decided from the mirror", n)
	}
	i := 0
	if n := testing.AllocsPerRun(100, func() {
		i++
		if err := b.Failure(ctx, fmt.Sprintf("new%d.example", i)); err != nil {
			t.Fatal(err)
		}
	}); n == 0 {
		t.Error("negative control: a Failure that writes a record showed no allocations")
	}
}
