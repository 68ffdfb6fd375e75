package model

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/internal/machine"
)

// TwoFieldRecord is the design note's two-field Circuit: the failure instants
// that still count and the instant deliveries are restrained until (zero
// means nothing: closed).
type TwoFieldRecord struct {
	Failures        []time.Time
	RestrainedUntil time.Time
	// Probing and FailedProbes are kept only with recovery back-off, which
	// the note does not have: a restraint's length depends on how many
	// probes failed in a row, and only a failure reported while a probe is
	// out (a send made once RestrainedUntil had passed) is a probe's. Two
	// fields alone would count a late failure of a send decided before the
	// circuit opened as one.
	Probing      bool
	FailedProbes int
}

// State derives what two fields can tell: closed when not restrained, open
// otherwise. They cannot tell half-open from open, which is the note's
// "Costs" point (a): the labels of a probe and of a strike are lost.
func (r TwoFieldRecord) State() kvbreaker.State {
	if r.RestrainedUntil.IsZero() {
		return kvbreaker.StateClosed
	}
	return kvbreaker.StateOpen
}

// TwoFieldConfig holds the note's configuration (its defaults shown in its
// pseudocode) plus the message-side hold limit every model shares.
type TwoFieldConfig struct {
	FailureThreshold int           // default 5
	FailureWindow    time.Duration // default 10 min
	RecoveryDelay    time.Duration // default 30 min
	TTLMargin        time.Duration // default 5 s
	// HoldLimit is not in the note's pseudocode, which has no held
	// messages: it is the message layer's drop rule (fedify's
	// heldActivityTtl), applied to every model alike. Default 7 days.
	HoldLimit time.Duration
	// MaxRecoveryDelay and RecoveryMultiplier are recovery back-off, with
	// kvbreaker.Settings' meaning, which the note does not have: each
	// probe that fails in a row multiplies the restraint by
	// RecoveryMultiplier (default 2), up to MaxRecoveryDelay; a success
	// resets it. Zero MaxRecoveryDelay turns it off.
	MaxRecoveryDelay   time.Duration
	RecoveryMultiplier float64
}

// StateTTL is the note's derived TTL: max(recoveryDelay, failureWindow) +
// ttlMargin, with maxRecoveryDelay in the max under back-off, so no
// restraint outlives its record.
func (c *TwoFieldConfig) StateTTL() time.Duration {
	return max(c.RecoveryDelay, c.MaxRecoveryDelay, c.FailureWindow) + c.TTLMargin
}

// backoff reports whether recovery back-off is on.
func (c *TwoFieldConfig) backoff() bool { return c.MaxRecoveryDelay > 0 }

// restraint is how long a circuit stays restrained after failed probes in
// a row failed: recoveryDelay × recoveryMultiplier^failed, at most
// maxRecoveryDelay; recoveryDelay without back-off.
func (c *TwoFieldConfig) restraint(failed int) time.Duration {
	if !c.backoff() || failed <= 0 {
		return c.RecoveryDelay
	}
	d := float64(c.RecoveryDelay) * math.Pow(c.RecoveryMultiplier, float64(failed))
	if d >= float64(c.MaxRecoveryDelay) {
		return c.MaxRecoveryDelay
	}
	return time.Duration(d)
}

// normalise fills in the note's defaults and rejects negative values.
func (c TwoFieldConfig) normalise() (TwoFieldConfig, error) {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if c.FailureThreshold < 0 || c.FailureWindow < 0 || c.RecoveryDelay < 0 || c.TTLMargin < 0 || c.HoldLimit < 0 || c.MaxRecoveryDelay < 0 {
		return c, fmt.Errorf("two-field: negative setting in %+v", c)
	}
	if c.FailureThreshold == 0 {
		c.FailureThreshold = 5
	}
	def(&c.FailureWindow, 10*time.Minute)
	def(&c.RecoveryDelay, 30*time.Minute)
	def(&c.TTLMargin, 5*time.Second)
	def(&c.HoldLimit, 7*24*time.Hour)
	switch m := c.RecoveryMultiplier; {
	case !c.backoff() && m != 0:
		return c, fmt.Errorf("two-field: RecoveryMultiplier is %v but MaxRecoveryDelay is zero, which turns recovery back-off off: set MaxRecoveryDelay too, or RecoveryMultiplier to zero", m)
	case !c.backoff():
	case c.MaxRecoveryDelay < c.RecoveryDelay:
		return c, fmt.Errorf("two-field: MaxRecoveryDelay is %v, below RecoveryDelay %v: set it to at least %v", c.MaxRecoveryDelay, c.RecoveryDelay, c.RecoveryDelay)
	case m == 0:
		c.RecoveryMultiplier = 2
	case !(m > 1) || math.IsInf(m, 1):
		return c, fmt.Errorf("two-field: RecoveryMultiplier is %v: set a factor above 1, or zero for the default 2", m)
	}
	return c, nil
}

// prune is the note's prune: drop failures older than the window, keep the
// newest failureThreshold.
func (c *TwoFieldConfig) prune(fs []time.Time, now time.Time) []time.Time {
	earliest := now.Add(-c.FailureWindow)
	out := make([]time.Time, 0, len(fs))
	for _, f := range fs {
		if !f.Before(earliest) {
			out = append(out, f)
		}
	}
	if len(out) > c.FailureThreshold {
		out = out[len(out)-c.FailureThreshold:]
	}
	return out
}

// tripped is the note's tripped: enough failures, and the newest
// failureThreshold fit in one window (measured from maximum(failures)).
func (c *TwoFieldConfig) tripped(fs []time.Time) bool {
	n := c.FailureThreshold
	if len(fs) < n {
		return false
	}
	return slices.MaxFunc(fs, time.Time.Compare).Sub(fs[len(fs)-n]) <= c.FailureWindow
}

// TwoFieldStep is the result of one transition of the two-field model.
type TwoFieldStep struct {
	Verdict    Verdict
	Write      machine.Write
	Record     TwoFieldRecord
	Transition Transition
}

// TwoFieldDeliver is the note's deliver: send when not restrained, hold while
// now < restrainedUntil (retrying at restrainedUntil, the note's "triple
// duty"), otherwise restrain for a fresh recoveryDelay and probe. Under
// back-off the probe is marked and the failed-probe count kept: the claim
// itself lasts recoveryDelay, as the note's, whatever the count.
func TwoFieldDeliver(rec TwoFieldRecord, now, heldSince time.Time, c *TwoFieldConfig) TwoFieldStep {
	switch {
	case holdExpired(now, heldSince, c.HoldLimit):
		return TwoFieldStep{Verdict: Verdict{Decision: kvbreaker.Drop}}
	case rec.RestrainedUntil.IsZero():
		return TwoFieldStep{Verdict: Verdict{Decision: kvbreaker.Send}}
	case now.Before(rec.RestrainedUntil):
		return TwoFieldStep{Verdict: Verdict{Decision: kvbreaker.Hold, RetryAt: holdRetry(now, heldSince, rec.RestrainedUntil, c.HoldLimit)}}
	}
	next := TwoFieldRecord{Failures: rec.Failures, RestrainedUntil: now.Add(c.RecoveryDelay)}
	if c.backoff() {
		next.Probing, next.FailedProbes = true, rec.FailedProbes
	}
	return TwoFieldStep{Verdict: Verdict{Decision: kvbreaker.Probe}, Write: machine.WritePut, Record: next}
}

// TwoFieldFail is the note's fail!: record and prune the failure; a restrained
// circuit is re-armed for recoveryDelay (whether or not a probe was in
// flight: two fields cannot tell), a closed one opens when tripped. Under
// back-off a probe's failure counts one more failed probe and re-arms for
// that count's restraint; any other failure while restrained re-arms for
// the current count's.
func TwoFieldFail(rec TwoFieldRecord, now time.Time, c *TwoFieldConfig) TwoFieldStep {
	next := TwoFieldRecord{Failures: c.prune(append(slices.Clip(rec.Failures), now), now)}
	switch {
	case !rec.RestrainedUntil.IsZero():
		next.FailedProbes = rec.FailedProbes
		if rec.Probing {
			next.FailedProbes++
		}
		next.RestrainedUntil = now.Add(c.restraint(next.FailedProbes))
	case c.tripped(next.Failures):
		next.RestrainedUntil = now.Add(c.RecoveryDelay)
	}
	return TwoFieldStep{Write: machine.WritePut, Record: next, Transition: Transition{From: rec.State(), To: next.State()}}
}

// TwoFieldSuccess is the note's success!: wipe the record.
func TwoFieldSuccess(rec TwoFieldRecord, found bool) TwoFieldStep {
	if !found {
		return TwoFieldStep{}
	}
	return TwoFieldStep{Write: machine.WriteDelete, Transition: Transition{From: rec.State(), To: kvbreaker.StateClosed}}
}

// TwoField is the note's two-field model over its own TTL store, labelled
// "two-field".
//
// Its Cost is one get per call (none for a drop) and one write per step
// that writes, as the note's pseudocode reads and writes.
type TwoField struct {
	cfg   TwoFieldConfig
	store ttlStore[TwoFieldRecord]
	name  string
	cost  Cost
}

// Cost implements Coster.
func (s *TwoField) Cost() Cost { return s.cost }

// NewTwoField returns an empty TwoField.
func NewTwoField(c TwoFieldConfig, opts ...Option) (*TwoField, error) {
	c, err := c.normalise()
	if err != nil {
		return nil, err
	}
	so := applyOptions(opts)
	return &TwoField{cfg: c, store: newTTLStore[TwoFieldRecord](so), name: "two-field" + so.suffix()}, nil
}

// Config returns the normalised configuration.
func (s *TwoField) Config() TwoFieldConfig { return s.cfg }

// Name returns "two-field", with "@ttl" and the cap over a capped store.
func (s *TwoField) Name() string { return s.name }

func (s *TwoField) apply(host string, now time.Time, st TwoFieldStep) {
	s.cost.Reads++
	if st.Write != machine.WriteNone {
		s.cost.Writes++
	}
	switch st.Write {
	case machine.WritePut:
		s.store.put(host, st.Record, now, s.cfg.StateTTL())
	case machine.WriteDelete:
		s.store.del(host)
	}
}

// Allow is deliver.
func (s *TwoField) Allow(host string, now, heldSince time.Time) (Verdict, Transition) {
	if holdExpired(now, heldSince, s.cfg.HoldLimit) {
		return Verdict{Decision: kvbreaker.Drop}, Transition{}
	}
	rec, _ := s.store.get(host, now)
	st := TwoFieldDeliver(rec, now, heldSince, &s.cfg)
	s.apply(host, now, st)
	return st.Verdict, st.Transition
}

// Failure is fail!.
func (s *TwoField) Failure(host string, now time.Time) Transition {
	rec, _ := s.store.get(host, now)
	st := TwoFieldFail(rec, now, &s.cfg)
	s.apply(host, now, st)
	return st.Transition
}

// Success is success!.
func (s *TwoField) Success(host string, now time.Time) Transition {
	rec, ok := s.store.get(host, now)
	st := TwoFieldSuccess(rec, ok)
	s.apply(host, now, st)
	return st.Transition
}

// Live implements Model.
func (s *TwoField) Live(host string, now time.Time) bool {
	_, ok := s.store.get(host, now)
	return ok
}

// Restraint implements Model.
func (s *TwoField) Restraint(host string, now time.Time) (time.Time, bool) {
	rec, ok := s.store.get(host, now)
	return rec.RestrainedUntil, ok && !rec.RestrainedUntil.IsZero()
}

// Record returns host's stored record at now, if any.
func (s *TwoField) Record(host string, now time.Time) (TwoFieldRecord, bool) {
	return s.store.get(host, now)
}
