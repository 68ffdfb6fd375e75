package sim

import (
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/internal/model"
)

// expiry follows one model's record at one host, to count what the store's
// expiry of a restrained record changes. A record restrains a host (open or
// half-open) until an instant; if the store expires it while it still
// restrains, the circuit closes with no state change reported, and until
// the host answers or the circuit reopens (the "episode") the model answers
// as if the host had never failed.
type expiry struct {
	// restrained and until: the record after the model's last call at this
	// host restrained it until that instant.
	restrained bool
	until      time.Time
	// episode: a restrained record expired, and since then the host has
	// neither answered nor been restrained again. lostUntil is that
	// record's restraint end; probeOwed: no decision has been made at or
	// after lostUntil yet (the record would have made the first one a
	// probe).
	episode   bool
	lostUntil time.Time
	probeOwed bool
}

// ExpiryEffects counts, for one model, what its store's expiry of
// restrained records changed. Every count is zero for a store that keeps
// each record until its host is asked again after the restraint.
type ExpiryEffects struct {
	// SilentCloses: restrained (open or half-open) records the store
	// expired. Each closed the host's circuit with no state change
	// reported: OnStateChange never hears of it.
	SilentCloses int `json:"silent_closes"`
	// SendsInsteadOfProbe: the first decision at or after the lost
	// record's restraint end answered Send; the record would have made it
	// the single probe (and its failure a one-strike reopen).
	SendsInsteadOfProbe int `json:"sends_instead_of_probe"`
	// SendsInsteadOfHold: decisions before the lost record's restraint end
	// that answered Send; the record would have held them. Only a store TTL
	// below the restraint causes these.
	SendsInsteadOfHold int `json:"sends_instead_of_hold"`
	// LateFailuresCountedClosed: failures reported after the expiry, before
	// the host answered or the circuit reopened, each counted as a
	// closed-circuit failure. With the record an open circuit ignores a
	// failure and a half-open one reopens on it.
	LateFailuresCountedClosed int `json:"late_failures_counted_closed"`
	// ReopensAfterExpiry: closed→open transitions that ended such an
	// episode: the circuit reopened from failures counted afresh.
	ReopensAfterExpiry int `json:"reopens_after_expiry"`
}

func (e ExpiryEffects) total() int {
	return e.SilentCloses + e.SendsInsteadOfProbe + e.SendsInsteadOfHold + e.LateFailuresCountedClosed + e.ReopensAfterExpiry
}

// check looks at the model's record before a call (or at a sample): a
// record that restrained the host after the last call and is gone now has
// expired (every model deletes only on an answer, which clears
// restrained). It reports whether it found such an expiry.
func (x *expiry) check(md model.Model, host string, now time.Time, fx *ExpiryEffects) bool {
	if !x.restrained || md.Live(host, now) {
		return false
	}
	fx.SilentCloses++
	*x = expiry{episode: true, lostUntil: x.until, probeOwed: true}
	return true
}

type op int8

const (
	opAllow op = iota
	opFailure
	opSuccess
)

// after records the model's answer to a call at now and its record after
// the call.
func (x *expiry) after(md model.Model, host string, now time.Time, o op, d kvbreaker.Decision, tr model.Transition, fx *ExpiryEffects) {
	if x.episode {
		switch o {
		case opAllow:
			switch {
			case d == kvbreaker.Drop: // decided without reading the store
			case now.Before(x.lostUntil):
				if d == kvbreaker.Send {
					fx.SendsInsteadOfHold++
				}
			case x.probeOwed:
				x.probeOwed = false
				if d == kvbreaker.Send {
					fx.SendsInsteadOfProbe++
				}
			}
		case opFailure:
			fx.LateFailuresCountedClosed++
			if tr.From == kvbreaker.StateClosed && tr.To == kvbreaker.StateOpen {
				fx.ReopensAfterExpiry++
				x.episode = false
			}
		case opSuccess:
			x.episode = false
		}
	}
	// Only a probe or a failure can write a restraint; a send finds none,
	// a hold or a drop leaves the record as it was, and an answer deletes
	// it. Reading the record only then keeps the simulator fast.
	switch {
	case o == opSuccess, o == opAllow && d == kvbreaker.Send:
		x.restrained = false
	case o == opFailure, o == opAllow && d == kvbreaker.Probe:
		x.until, x.restrained = md.Restraint(host, now)
	}
}
