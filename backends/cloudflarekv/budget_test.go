package cloudflarekv

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// TestBudgetBucketNeverExceedsShare drives the bucket on a fake clock with a
// caller that takes every token it can, every 10 ms for 20 periods, and
// checks that no window of one period holds more than the process's share.
// The control is a bucket twice as large: the same check must then fail.
func TestBudgetBucketNeverExceedsShare(t *testing.T) {
	for _, tc := range []struct {
		name     string
		requests int
		wantOK   bool
	}{{"share", 1200, true}, {"control-double-share", 2400, false}} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(0, 0)
			b := &budget{requests: tc.requests, per: AccountPeriod, processes: 4, now: func() time.Time { return now }}
			problems := adapter.Problems{Backend: "cloudflarekv"}
			if b.validate(&problems); problems.Err() != nil {
				t.Fatal(problems.Err())
			}
			var sent []time.Time
			for now.Before(time.Unix(0, 0).Add(20 * AccountPeriod)) {
				for {
					ok, _ := b.take()
					if !ok {
						break
					}
					sent = append(sent, now)
				}
				now = now.Add(10 * time.Millisecond)
			}
			share := 1200 / 4
			worst, j := 0, 0
			for i := range sent {
				for sent[i].Sub(sent[j]) >= AccountPeriod {
					j++
				}
				worst = max(worst, i-j+1)
			}
			t.Logf("%d requests in 20 periods; at most %d in one period (share %d)", len(sent), worst, share)
			if (worst <= share) != tc.wantOK {
				t.Errorf("worst window %d, share %d, want within: %v", worst, share, tc.wantOK)
			}
		})
	}
}

// TestBudgetNextIsReady: when a refused request is told to come back at
// next, a token is there at next, whatever the rates' rounding. Fails
// before the wait was rounded up: next fell a fraction of a nanosecond short,
// so on a clock that stands still between readings a queued write retried
// at that instant forever (seen hanging under synctest).
func TestBudgetNextIsReady(t *testing.T) {
	for _, requests := range []int{7, 1200, 1201, 3333} {
		now := time.Unix(0, 0)
		b := &budget{requests: requests, per: AccountPeriod, processes: 3, now: func() time.Time { return now }}
		problems := adapter.Problems{Backend: "cloudflarekv"}
		if b.validate(&problems); problems.Err() != nil {
			t.Fatal(problems.Err())
		}
		for i := 0; i < 2000; i++ {
			ok, next := b.take()
			if ok {
				continue
			}
			now = next
			if ok, _ := b.take(); !ok {
				t.Fatalf("%d requests/period: refused again at the instant it was told to come back (%v)", requests, next)
			}
		}
	}
}

func TestBudgetOptionValidated(t *testing.T) {
	for _, o := range []Option{WithRequestBudget(0), WithRequestBudget(-3), WithRequestBudgetLimit(3, time.Minute, 4), WithRequestBudgetLimit(10, 0, 1)} {
		_, err := New(client(), srv.AccountID, srv.NamespaceID, o)
		if err == nil || !strings.Contains(err.Error(), "WithRequestBudget") {
			t.Errorf("want an error naming WithRequestBudget, got %v", err)
		}
	}
	if _, err := New(client(), srv.AccountID, srv.NamespaceID, WithRequestBudget(8)); err != nil {
		t.Errorf("8 processes: %v", err)
	}
}

// TestBudgetAgainstMiniflare: two processes (stores) sharing a budget of 12
// requests per 2 s ask about fresh hosts as fast as they can for 2.5 s.
// Miniflare's own request count must stay within what the two buckets allow
// (each at most its burst plus its refill over the run), calls beyond it
// get an error matching ErrBudgetExhausted without a request, and a Breaker
// over a spent store answers per FailClosed: Send by default, Hold with it.
func TestBudgetAgainstMiniflare(t *testing.T) {
	ctx := t.Context()
	const requests, per, procs = 12, 2 * time.Second, 2
	a := newStore(t, WithRequestBudgetLimit(requests, per, procs))
	b := sibling(t, a, WithRequestBudgetLimit(requests, per, procs))
	if err := srv.ResetStats(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	calls, refused := 0, 0
	for i := 0; time.Since(start) < 2500*time.Millisecond; i++ {
		for _, s := range []*tstore{a, b} {
			_, _, err := s.Get(ctx, fmt.Sprintf("host%d-%p.example", i, s))
			calls++
			switch {
			case errors.Is(err, ErrBudgetExhausted):
				refused++
			case err != nil && !errors.Is(err, driver.ErrNotFound):
				t.Fatal(err)
			}
		}
		time.Sleep(5 * time.Millisecond) // pace the loop, not the logic
	}
	elapsed := time.Since(start)
	st, err := srv.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	share := float64(requests) / procs
	burst := max(1, share/10)
	allowed := procs * (burst + (share-burst)*elapsed.Seconds()/per.Seconds())
	sent := st.Get + st.Put + st.Delete
	t.Logf("%d calls in %v: Miniflare saw %d requests (allowed %.1f), %d refused with ErrBudgetExhausted", calls, elapsed.Round(time.Millisecond), sent, allowed, refused)
	if float64(sent) > allowed+0.001 || refused == 0 || sent+refused != calls {
		t.Errorf("sent %d (allowed %.1f), refused %d, calls %d: want sent within the budget and every other call refused", sent, allowed, refused, calls)
	}

	for _, failClosed := range []bool{false, true} {
		br, err := kvbreaker.New(a, kvbreaker.Settings{FailClosed: failClosed, Clock: srv.Now})
		if err != nil {
			t.Fatal(err)
		}
		v, err := br.Allow(ctx, fmt.Sprintf("spent-%v.example", failClosed), time.Time{})
		want := kvbreaker.Send
		if failClosed {
			want = kvbreaker.Hold
		}
		if !errors.Is(err, ErrBudgetExhausted) || v.Decision != want {
			t.Errorf("FailClosed %v: Allow = %v, %v; want %v and an error matching ErrBudgetExhausted", failClosed, v.Decision, err, want)
		}
	}
}
