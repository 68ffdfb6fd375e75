package kvbreaker_test

import (
	"context"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
)

// BenchmarkAllowClosed: a closed Allow over the memory store (one Get per
// call, no cache), without hooks, with an Observer that sets none, and with
// the OnStateChange and OnDrop shortcuts (which a closed Allow never calls).
// What the hooks cost when nothing is watching.
//
//	go test -run '^$' -bench 'Allow' -benchmem .
func BenchmarkAllowClosed(b *testing.B) {
	for _, bc := range []struct {
		name string
		s    kvbreaker.Settings
	}{
		{"none", kvbreaker.Settings{}},
		{"empty-observer", kvbreaker.Settings{Observer: &kvbreaker.Observer{}}},
		{"shortcuts", kvbreaker.Settings{
			OnStateChange: func(string, kvbreaker.State, kvbreaker.State) {},
			OnDrop:        func(string, time.Time) {},
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			bc.s.SkipClockCheck = true
			br, err := kvbreaker.New(memory.New(), bc.s)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if v, _ := br.Allow(ctx, host, time.Time{}); v.Decision != kvbreaker.Send {
					b.Fatal(v.Decision)
				}
			}
		})
	}
}
