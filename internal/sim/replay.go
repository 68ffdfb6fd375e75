package sim

import (
	"errors"
	"fmt"
	"time"
)

// CallKind is what a constructed call asks.
type CallKind int8

const (
	// CallAllow asks for a decision.
	CallAllow CallKind = iota
	// CallFailure reports a failed delivery.
	CallFailure
	// CallSuccess reports that the host answered.
	CallSuccess
)

// Call is one call of a constructed scenario, made to every model.
type Call struct {
	// At is the call's instant, since Epoch; calls must not go back in
	// time.
	At   time.Duration
	Host string
	Kind CallKind
	// HeldSince (CallAllow) is when the message was first held, since
	// Epoch; zero is a fresh message.
	HeldSince time.Duration
}

// Replay makes calls, in order, to every model built from o (and, with
// storeTTL, the capped-store models of Scenario.StoreTTL), and reports
// every model's numbers as Run does, except those that need a workload
// (sends to down hosts, records sampled). The decision-cache and mirror
// models and the cost-only gobreaker column are left out: one process
// answers every call. It checks, on streams built by hand, what Run counts
// on random ones.
func Replay(o Options, storeTTL time.Duration, calls []Call) ([]ModelReport, error) {
	s := Scenario{Options: o, StoreTTL: storeTTL}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	s.defaults()
	r := &runner{s: s, end: 1<<62 - 1, replay: true}
	if err := r.newModels(); err != nil {
		return nil, err
	}
	hosts := map[string]*host{}
	var last time.Duration
	for i, c := range calls {
		if c.At < last {
			return nil, fmt.Errorf("call %d at %v goes back from %v", i, c.At, last)
		}
		if c.Host == "" {
			return nil, errors.New("call without a host")
		}
		last = c.At
		r.now = c.At.Milliseconds()
		h := hosts[c.Host]
		if h == nil {
			h = r.newHost(c.Host)
			hosts[c.Host] = h
		}
		switch c.Kind {
		case CallAllow:
			var since time.Time
			if c.HeldSince != 0 {
				since = Epoch.Add(c.HeldSince)
			}
			r.judge(h, since, false)
		case CallFailure, CallSuccess:
			r.tell(h, c.Kind == CallSuccess)
		default:
			return nil, fmt.Errorf("call %d: unknown kind %d", i, c.Kind)
		}
	}
	return r.report().Models, nil
}
