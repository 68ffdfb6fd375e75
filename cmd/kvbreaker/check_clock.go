package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/kvbreaker/kvbreaker"

	"github.com/kvbreaker/kvbreaker/internal/output"
)

// Clock results (clockJSON.Result).
const (
	// clockOK: the measured offset lies within --clock-skew.
	clockOK = "ok"
	// clockUnproven: the offset may exceed --clock-skew, but the
	// measurement's uncertainty cannot tell.
	clockUnproven = "unproven"
	// clockExceeds: the offset is proven larger than --clock-skew.
	clockExceeds = "exceeds"
	// clockNotMeasurable: the store shows no clock (no driver.ClockSampler).
	clockNotMeasurable = "not_measurable"
	// clockError: the store has a clock, but sampling it failed.
	clockError = "error"
)

// clockJSON is check's measurement of the store's clock against this
// machine's. Offset is the store's clock minus this machine's: positive
// when this machine's clock is behind; the true offset lies within
// offset_ms ± uncertainty_ms. Both are null when not measured.
type clockJSON struct {
	OffsetMS      *float64 `json:"offset_ms"`
	UncertaintyMS *float64 `json:"uncertainty_ms"`
	ClockSkewMS   float64  `json:"clock_skew_ms"`
	// Result is ok, unproven, exceeds, not_measurable or error.
	Result string `json:"result"`
	// Message says why the offset was not measured, or null.
	Message *string `json:"message"`

	est kvbreaker.ClockOffset
}

// measureClock samples the store's clock through a Breaker (the estimate a
// fleet's Breakers make) and judges the offset against --clock-skew.
func measureClock(ctx context.Context, c *conn, skew time.Duration) *clockJSON {
	cj := &clockJSON{ClockSkewMS: output.Ms(skew)}
	clock := time.Now
	if c.clockShift != 0 {
		clock = func() time.Time { return time.Now().Add(c.clockShift) }
	}
	b, err := kvbreaker.New(c.store, kvbreaker.Settings{
		// The Breaker's own ClockSkew only sets when it warns, and its
		// warnings are discarded: the command judges against --clock-skew,
		// which a store's MaxClockSkew could refuse here.
		SkipClockCheck: true,
		Clock:          clock,
		Logger:         slog.New(slog.DiscardHandler),
	})
	if err != nil {
		cj.Result, cj.Message = clockError, strp(err.Error())
		return cj
	}
	// No b.Close: it would close the store the check goes on using.
	o, err := b.CheckClock(ctx)
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		cj.Result, cj.Message = clockNotMeasurable, strp(fmt.Sprintf("%s shows no clock to read", c.describe))
		return cj
	case err != nil:
		cj.Result, cj.Message = clockError, strp(err.Error())
		return cj
	}
	cj.est = o
	cj.OffsetMS, cj.UncertaintyMS = msp(o.Offset), msp(o.Uncertainty)
	lo, hi := o.Offset-o.Uncertainty, o.Offset+o.Uncertainty
	switch {
	case lo > skew || hi < -skew:
		cj.Result = clockExceeds
	case lo < -skew || hi > skew:
		cj.Result = clockUnproven
	default:
		cj.Result = clockOK
	}
	return cj
}

// words is the clock measurement in a sentence, for the table and stderr.
func (cj *clockJSON) words() string {
	switch cj.Result {
	case clockNotMeasurable:
		return "not measurable: " + *cj.Message
	case clockError:
		return "not measured: " + *cj.Message
	}
	off, unc := cj.est.Offset, cj.est.Uncertainty
	dir := "behind"
	if off < 0 {
		dir, off = "ahead of", -off
	}
	unit := time.Millisecond
	if unc < time.Millisecond {
		unit = time.Microsecond
	}
	return fmt.Sprintf("this machine's clock is %v ± %v %s the store's", off.Round(unit), unc.Round(unit), dir)
}

// line is the table's clock line.
func (cj *clockJSON) line() string {
	skew := fromMS(cj.ClockSkewMS)
	switch cj.Result {
	case clockOK:
		return fmt.Sprintf("clock: %s; within --clock-skew %v", cj.words(), skew)
	case clockUnproven:
		return fmt.Sprintf("clock: %s; may exceed --clock-skew %v, but the measurement cannot tell (run check again)", cj.words(), skew)
	case clockExceeds:
		return fmt.Sprintf("clock: %s, more than --clock-skew %v: fix this machine's clock (NTP) or raise --clock-skew (Settings.ClockSkew)", cj.words(), skew)
	}
	return fmt.Sprintf("clock: %s (--clock-skew %v not checked)", cj.words(), skew)
}
