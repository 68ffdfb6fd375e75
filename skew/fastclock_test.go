package skew_test

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/record"
	"github.com/kvbreaker/kvbreaker/skew"
)

// outliveCheck wraps one worker's view of a reader-filtered store and checks
// every record it writes: the record lives until the writer's now + ttl (by
// every reader's clock, since readers filter the absolute instant), and each
// failure in it counts until its instant + FailureWindow. A failure that
// counts past the record's life is one a reader loses when the record
// vanishes.
type outliveCheck struct {
	driver.Store
	clock  func() time.Time
	window time.Duration

	mu       *sync.Mutex
	writes   *int
	outlived *[]string
}

func (s outliveCheck) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	now := s.clock()
	v, err := s.Store.CompareAndSwap(ctx, key, old, value, ttl)
	if err != nil {
		return v, err
	}
	r, derr := record.DecodeRecord(value)
	if derr != nil {
		return v, derr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	*s.writes++
	for _, f := range r.Failures {
		if by := f.Add(s.window).Sub(now.Add(ttl)); by > 0 {
			*s.outlived = append(*s.outlived, by.String())
			break
		}
	}
	return v, nil
}

// TestFastClockFailuresDieWithTheirRecord is the margin experiment for
// failure instants: a fleet whose clocks are up to δ = 5 s apart records
// failures on a reader-filtered store, with the failure window longer than
// the recovery delay so the window sets the TTL and the default 5 s margin
// is all the slack. A failure stamped by a fast clock and carried into a
// record rewritten by a slow one would count up to 2δ = 10 s past that
// record's life (without the clamp, 26 of 1,050 writes here carried such a
// failure, by up to 4.4 s), so core clamps carried instants to the writer's
// now.
//
//	go test ./skew -run TestFastClockFailuresDieWithTheirRecord -v
func TestFastClockFailuresDieWithTheirRecord(t *testing.T) {
	const delta = 5 * time.Second
	const window = time.Hour
	truth := skew.NewManual(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
	st := skew.New(memory.New(memory.WithClock(truth.Now)), skew.Distortion{Kind: driver.ExpiryReaderFiltered}, truth.Now)
	rng := rand.New(rand.NewPCG(12, 8))
	clocks := skew.Fleet(rng, truth.Now, 4, delta, 0)
	var mu sync.Mutex
	writes, outlived := 0, []string{}
	fleet := make([]*kvbreaker.Breaker, len(clocks))
	for i, c := range clocks {
		store := outliveCheck{Store: st.View(c.Now), clock: c.Now, window: window, mu: &mu, writes: &writes, outlived: &outlived}
		b, err := kvbreaker.New(store, kvbreaker.Settings{
			FailureThreshold: 3, FailureWindow: window, RecoveryDelay: 30 * time.Minute,
			ClockSkew: delta, Clock: c.Now, Logger: slog.New(slog.DiscardHandler),
		})
		if err != nil {
			t.Fatal(err)
		}
		fleet[i] = b
	}
	ctx := t.Context()
	for range 3000 {
		truth.Advance(time.Duration(rng.Int64N(int64(10 * time.Second))))
		b := fleet[rng.IntN(len(fleet))]
		switch rng.IntN(4) {
		case 0:
			if err := b.Success(ctx, "h.example"); err != nil {
				t.Fatal(err)
			}
		case 1:
			if _, err := b.Allow(ctx, "h.example", time.Time{}); err != nil {
				t.Fatal(err)
			}
		default:
			if err := b.Failure(ctx, "h.example"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if writes < 500 {
		t.Fatalf("only %d writes: the experiment did not exercise the store", writes)
	}
	if len(outlived) > 0 {
		t.Fatalf("%d of %d writes carried a failure that counts past the record's life (by %v, ...)", len(outlived), writes, outlived[:min(3, len(outlived))])
	}
	t.Logf("%d writes, none carrying a failure past the record's life", writes)
}
