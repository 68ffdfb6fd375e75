package deliverypool_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/examples/deliverypool"
)

// The scenario, as the port counted it: five hosts each get 1,200
// activities over an hour (20 a minute, the normal rate); "flaky" is down
// from minute 20 to minute 40, "dead" from minute 45 on; a delivery to a
// down host times out after 2 s and is queued again 10 s later.
const (
	perMinute   = 20
	runFor      = time.Hour
	drainFor    = 30 * time.Minute // the pool keeps running after the last activity
	timeout     = 2 * time.Second
	retryAfter  = 10 * time.Second
	latency     = 50 * time.Millisecond
	outageStart = 20 * time.Minute
	outageEnd   = 40 * time.Minute
	deadFrom    = 45 * time.Minute
)

var hosts = []string{"a.example", "b.example", "c.example", "flaky.example", "dead.example"}

// backoff is the configuration under test: restraints of 10 s, 20 s, 40 s,
// 80 s, then 90 s, and the paced release.
var backoff = kvbreaker.Settings{
	RecoveryDelay:    10 * time.Second,
	MaxRecoveryDelay: 90 * time.Second,
	ReleaseRamp:      time.Hour,
}

// run is one scenario's record: every event, and what was still queued.
type run struct {
	start   time.Time
	events  []deliverypool.Event
	pending map[string]int
}

// scenario runs the pool for runFor+drainFor of synctest time through a
// Breaker with s over a memory store.
func scenario(t *testing.T, s kvbreaker.Settings) *run {
	t.Helper()
	r := &run{pending: map[string]int{}}
	synctest.Test(t, func(t *testing.T) {
		r.start = time.Now()
		s.SkipClockCheck = true
		br, err := kvbreaker.New(memory.New(), s)
		if err != nil {
			t.Fatal(err)
		}
		down := func(host string, at time.Time) bool {
			d := at.Sub(r.start)
			switch host {
			case "flaky.example":
				return d >= outageStart && d < outageEnd
			case "dead.example":
				return d >= deadFrom
			}
			return false
		}
		deliver := func(ctx context.Context, host string) error {
			if down(host, time.Now()) {
				time.Sleep(timeout)
				return errors.New("timeout")
			}
			time.Sleep(latency)
			return nil
		}
		var mu sync.Mutex
		pool := deliverypool.New(br, deliver, retryAfter, func(e deliverypool.Event) {
			mu.Lock()
			r.events = append(r.events, e)
			mu.Unlock()
		})
		ctx, cancel := context.WithTimeout(t.Context(), runFor+drainFor)
		defer cancel()
		go func() {
			tick := time.NewTicker(time.Minute / perMinute)
			defer tick.Stop()
			for range runFor / (time.Minute / perMinute) {
				for _, h := range hosts {
					pool.Enqueue(deliverypool.Message{Host: h}, time.Now())
				}
				<-tick.C
			}
		}()
		pool.Run(ctx, 8)
		for _, h := range hosts {
			r.pending[h] = pool.Pending(h)
		}
		if err := br.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
	return r
}

func (r *run) times(kind deliverypool.Kind, host string) []time.Duration {
	var out []time.Duration
	for _, e := range r.events {
		if e.Kind == kind && e.Host == host {
			out = append(out, e.At.Sub(r.start))
		}
	}
	return out
}

// lost checks that every activity to every host was delivered or is still
// queued, none dropped, and every host but the dead one got all of its.
func (r *run) lost() error {
	total := int(runFor / (time.Minute / perMinute))
	for _, h := range hosts {
		if n := len(r.times(deliverypool.Dropped, h)); n > 0 {
			return fmt.Errorf("%s: %d dropped", h, n)
		}
		got := len(r.times(deliverypool.Delivered, h))
		if got+r.pending[h] != total {
			return fmt.Errorf("%s: %d delivered + %d queued, want %d", h, got, r.pending[h], total)
		}
		if h != "dead.example" && got != total {
			return fmt.Errorf("%s: %d of %d delivered", h, got, total)
		}
	}
	return nil
}

// firstDelivery is how long after its outage flaky got its first message.
func (r *run) firstDelivery() (time.Duration, error) {
	for _, d := range r.times(deliverypool.Delivered, "flaky.example") {
		if d >= outageEnd {
			return d - outageEnd, nil
		}
	}
	return 0, errors.New("flaky.example got nothing after its outage")
}

// busiestMinute is the most deliveries flaky got in any minute that starts
// with a delivery after its outage.
func (r *run) busiestMinute() int {
	ds := r.times(deliverypool.Delivered, "flaky.example")
	most := 0
	for i, d := range ds {
		if d < outageEnd {
			continue
		}
		n := 0
		for _, e := range ds[i:] {
			if e >= d+time.Minute {
				break
			}
			n++
		}
		most = max(most, n)
	}
	return most
}

// TestOutageRecovery runs the scenario with recovery back-off and the paced
// release, and asserts the goals; then without them, where the
// recovery and the pacing checks must fail (so they can).
func TestOutageRecovery(t *testing.T) {
	r := scenario(t, backoff)
	if err := r.lost(); err != nil {
		t.Error(err)
	}
	first, err := r.firstDelivery()
	if err != nil || first > 2*time.Minute {
		t.Errorf("first delivery %v after the 20-minute outage (%v), want within 2 min", first, err)
	}
	busiest := r.busiestMinute()
	if busiest > 2*perMinute {
		t.Errorf("%d deliveries to flaky.example in one minute after its recovery, want at most %d (twice the normal rate)", busiest, 2*perMinute)
	}
	t.Logf("with back-off and the paced release: first delivery %v after recovery, busiest minute after it %d deliveries (normal %d)", first, busiest, perMinute)

	// A dead host: once the restraint reaches the cap, one probe per cap
	// (plus the probe's own timeout) and no more.
	probes := r.times(deliverypool.Probed, "dead.example")
	capd := backoff.MaxRecoveryDelay
	atCap := 0
	for i := 1; i < len(probes); i++ {
		gap := probes[i] - probes[i-1]
		if atCap == 0 && gap >= capd {
			atCap = i
		}
		if atCap > 0 && (gap < capd || gap > capd+timeout+time.Second) {
			t.Errorf("probe %d of dead.example %v after the previous one, want %v to %v once at the cap", i, gap, capd, capd+timeout+time.Second)
		}
	}
	span := probes[len(probes)-1] - probes[max(atCap-1, 0)]
	if n := len(probes) - atCap; atCap == 0 || n < 20 || time.Duration(n)*capd > span {
		t.Errorf("dead.example: %d probes at the cap over %v (cap %v); want at least 20, at most one per cap", n, span, capd)
	}
	t.Logf("dead.example: %d probes, the cap reached at probe %d, then one per %v", len(probes), atCap+1, capd+timeout)

	// The control: the defaults (a fixed 30-minute RecoveryDelay, every
	// held message released at once).
	c := scenario(t, kvbreaker.Settings{})
	if err := c.lost(); err != nil {
		t.Error(err)
	}
	cfirst, err := c.firstDelivery()
	if err != nil || cfirst <= 2*time.Minute {
		t.Errorf("control: first delivery %v after the outage (%v); the recovery check cannot fail", cfirst, err)
	}
	if cb := c.busiestMinute(); cb <= 2*perMinute {
		t.Errorf("control: busiest minute %d; the pacing check cannot fail", cb)
	} else {
		t.Logf("without them: first delivery %v after recovery, busiest minute %d deliveries", cfirst, cb)
	}
}
