package skew

import (
	"math/rand/v2"
	"sync"
	"time"
)

// Manual is a true time that moves only when told to: a base clock for
// simulations that cannot run in a testing/synctest bubble. The zero value
// is not usable; call NewManual. It is safe for concurrent use.
type Manual struct {
	mu  sync.Mutex
	now time.Time
}

// NewManual returns a Manual clock reading start.
func NewManual(start time.Time) *Manual { return &Manual{now: start} }

// Now returns the current simulated true time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// Advance moves the clock forward by d (a negative d is ignored: true time
// does not run backwards).
func (m *Manual) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	m.mu.Lock()
	m.now = m.now.Add(d)
	m.mu.Unlock()
}

// Clock is one worker's clock: true time (Base) plus an offset that starts
// at Offset and drifts by Drift (seconds gained per second of true time),
// never leaving [-Bound, +Bound]. With Base = time.Now inside a
// testing/synctest bubble the bubble's fake time is the true time, so the
// two compose. A Clock's methods are safe for concurrent use.
type Clock struct {
	// Base is true time; nil means time.Now.
	Base func() time.Time
	// Offset is the clock's error at Epoch.
	Offset time.Duration
	// Drift is the rate error: the offset grows by Drift×(t−Epoch).
	Drift float64
	// Bound clamps the offset to [-Bound, +Bound]; zero means no bound.
	Bound time.Duration
	// Epoch is when the offset was Offset; zero means the first reading.
	Epoch time.Time

	once sync.Once
}

func (c *Clock) base() time.Time {
	if c.Base == nil {
		return time.Now()
	}
	return c.Base()
}

// ErrorAt returns the clock's offset from true time at true instant t.
func (c *Clock) ErrorAt(t time.Time) time.Duration {
	c.once.Do(func() {
		if c.Epoch.IsZero() {
			c.Epoch = t
		}
	})
	off := c.Offset + time.Duration(c.Drift*float64(t.Sub(c.Epoch)))
	if c.Bound > 0 {
		off = min(max(off, -c.Bound), c.Bound)
	}
	return off
}

// Now returns the worker's reading of the current true time.
func (c *Clock) Now() time.Time {
	t := c.base()
	return t.Add(c.ErrorAt(t))
}

// Until returns how much true time must pass before the clock reads at
// least local, drift included: what a worker sleeping until its own clock
// reaches local waits.
func (c *Clock) Until(local time.Time) time.Duration {
	now := c.base()
	d := local.Sub(now.Add(c.ErrorAt(now)))
	// The offset changes while we wait: a few fixed-point steps converge,
	// since the drift rate is far below 1.
	for range 8 {
		t := now.Add(d)
		miss := local.Sub(t.Add(c.ErrorAt(t)))
		if miss <= 0 && miss > -time.Microsecond {
			break
		}
		d += miss
	}
	for t := now.Add(d); t.Add(c.ErrorAt(t)).Before(local); t = now.Add(d) {
		d++
	}
	return max(d, 0)
}

// Func returns c.Now as a func, the shape kvbreaker.Settings.Clock takes.
func (c *Clock) Func() func() time.Time { return c.Now }

// Fleet returns n clocks over base whose offsets stay within ±bound: each
// starts at a random offset (with probability 1/2 at one of the extremes
// ±bound, where the worst cases live) and half of them drift by up to
// maxDrift, clamped to the bound. rng makes the draw reproducible.
func Fleet(rng *rand.Rand, base func() time.Time, n int, bound time.Duration, maxDrift float64) []*Clock {
	clocks := make([]*Clock, n)
	for i := range clocks {
		c := &Clock{Base: base, Offset: Offset(rng, bound), Bound: bound}
		if rng.IntN(2) == 0 {
			// Half the clocks drift; the others keep their offset, so
			// the extremes survive long runs.
			c.Drift = (2*rng.Float64() - 1) * maxDrift
		}
		clocks[i] = c
	}
	return clocks
}

// Offset draws an offset in [-bound, +bound]: with probability 1/2 exactly
// one extreme (equally often), otherwise uniform, to the millisecond.
func Offset(rng *rand.Rand, bound time.Duration) time.Duration {
	if bound <= 0 {
		return 0
	}
	switch rng.IntN(4) {
	case 0:
		return bound
	case 1:
		return -bound
	}
	ms := int64(bound / time.Millisecond)
	return time.Duration(rng.Int64N(2*ms+1)-ms) * time.Millisecond
}
