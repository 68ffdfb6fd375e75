package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
)

// Behaviour is how a simulated host answers deliveries.
type Behaviour int8

const (
	// Healthy hosts answer every delivery quickly.
	Healthy Behaviour = iota
	// Dead hosts never answer: every delivery fails, refused quickly or
	// after the delivery timeout.
	Dead
	// Flapping hosts alternate between up (20 min – 2 h) and down
	// (5 min – 1 h) periods.
	Flapping
	// Slow hosts are up but answer after seconds; a delivery slower than
	// the timeout fails.
	Slow
)

var behaviourNames = [...]string{"healthy", "dead", "flapping", "slow"}

// String returns "healthy", "dead", "flapping" or "slow".
func (b Behaviour) String() string {
	if b >= 0 && int(b) < len(behaviourNames) {
		return behaviourNames[b]
	}
	return fmt.Sprintf("unknown behaviour: %d", int(b))
}

// Mix gives the relative weight of each behaviour among the hosts.
type Mix [len(behaviourNames)]int

// DefaultMix is 80% healthy, 5% dead, 10% flapping, 5% slow.
var DefaultMix = Mix{Healthy: 80, Dead: 5, Flapping: 10, Slow: 5}

// ParseMix reads "healthy=80,dead=5,flapping=10,slow=5". Behaviours left
// out weigh 0; weights must be non-negative integers with a positive sum.
func ParseMix(s string) (Mix, error) {
	var m Mix
	seen := map[string]bool{}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, val, ok := strings.Cut(part, "=")
		if !ok {
			return Mix{}, fmt.Errorf("mix entry %q: want behaviour=weight, e.g. dead=5", part)
		}
		name = strings.TrimSpace(name)
		i := -1
		for j, n := range behaviourNames {
			if n == name {
				i = j
			}
		}
		if i < 0 {
			return Mix{}, fmt.Errorf("mix entry %q: unknown behaviour %q (want one of %s)", part, name, strings.Join(behaviourNames[:], ", "))
		}
		if seen[name] {
			return Mix{}, fmt.Errorf("mix: %s given twice", name)
		}
		seen[name] = true
		w, err := strconv.Atoi(strings.TrimSpace(val))
		if err != nil || w < 0 {
			return Mix{}, fmt.Errorf("mix entry %q: weight must be a non-negative integer", part)
		}
		m[i] = w
	}
	if m.total() == 0 {
		return Mix{}, fmt.Errorf("mix %q: weights must add up to more than 0", s)
	}
	return m, nil
}

func (m Mix) total() int {
	t := 0
	for _, w := range m {
		t += w
	}
	return t
}

// String formats m as ParseMix reads it.
func (m Mix) String() string {
	var parts []string
	for i, w := range m {
		parts = append(parts, fmt.Sprintf("%s=%d", behaviourNames[i], w))
	}
	return strings.Join(parts, ",")
}

// counts splits n hosts by weight (largest remainder), summing to n.
func (m Mix) counts(n int) [len(behaviourNames)]int {
	var c [len(behaviourNames)]int
	total := m.total()
	type rem struct {
		i int
		r float64
	}
	var rems []rem
	left := n
	for i, w := range m {
		exact := float64(n) * float64(w) / float64(total)
		c[i] = int(math.Floor(exact))
		left -= c[i]
		rems = append(rems, rem{i, exact - math.Floor(exact)})
	}
	sort.SliceStable(rems, func(a, b int) bool { return rems[a].r > rems[b].r })
	for k := 0; k < left; k++ {
		c[rems[k%len(rems)].i]++
	}
	return c
}

// host is one simulated remote host.
type host struct {
	name      string
	behaviour Behaviour
	// toggles are the instants (ms) a flapping host changes between up
	// and down; it starts up unless startDown.
	toggles   []int64
	startDown bool

	// Sequential mode: a send is in flight, and the messages waiting
	// for it to finish.
	sending bool
	blocked []*message
	// owed[i]: the reference probed at a decision model i held, and no
	// outcome has arrived since.
	owed []bool
	// lost[i]: model i (or the reference) had a restrained record expire
	// at this host, and the host has not answered since: model i's
	// divergences are counted apart (AfterRecordLoss).
	lost []bool
	// exp[i] is model i's expiry bookkeeping at this host.
	exp []expiry
	// mean is the mean time between arrivals (ms).
	mean float64
	// lockUntil (ms) is when gobreaker's distributed lock for the host is
	// released: Execute holds it while the delivery runs.
	lockUntil int64
}

// down reports whether a delivery sent at t (ms) fails because the host is
// unreachable.
func (h *host) down(t int64) bool {
	switch h.behaviour {
	case Dead:
		return true
	case Flapping:
		n := sort.Search(len(h.toggles), func(i int) bool { return h.toggles[i] > t })
		return h.startDown != (n%2 == 1)
	}
	return false
}

// deliver draws a delivery's latency (ms) and outcome.
func (h *host) deliver(t int64, rng *rand.Rand, timeout int64) (latency int64, ok bool) {
	if h.down(t) {
		if rng.IntN(2) == 0 {
			return 20 + rng.Int64N(280), false // connection refused
		}
		return timeout, false
	}
	if h.behaviour == Slow {
		l := int64(3000 * math.Exp(0.8*rng.NormFloat64()))
		if l >= timeout {
			return timeout, false
		}
		return max(l, 1), true
	}
	return min(30+int64(rng.ExpFloat64()*120), timeout), true
}

const (
	minute = int64(60_000)
	hour   = 60 * minute
)

// flapTimeline draws a flapping host's up/down changes until end.
func flapTimeline(rng *rand.Rand, end int64) (toggles []int64, startDown bool) {
	startDown = rng.IntN(3) == 0
	down := startDown
	for t := int64(0); ; {
		if down {
			t += 5*minute + rng.Int64N(55*minute)
		} else {
			t += 20*minute + rng.Int64N(100*minute)
		}
		if t >= end {
			return toggles, startDown
		}
		toggles = append(toggles, t)
		down = !down
	}
}
