package adapter

import (
	"errors"
	"fmt"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// Problems collects a constructor's invalid arguments and options for one
// backend. The zero value is not usable: set Backend.
type Problems struct {
	// Backend names the store in each error ("mysql").
	Backend string
	errs    []error
}

// Add records that option (an option's function name such as
// "WithCallTimeout", or an argument such as "table name") has value, and
// fix says what to change.
func (p *Problems) Add(option string, value any, fix string) {
	p.errs = append(p.errs, &driver.OptionError{Backend: p.Backend, Option: option, Value: value, Fix: fix})
}

// Positive records option's value d unless it is positive, with the fix
// "set a positive duration, or leave it out for <def>".
func (p *Problems) Positive(option string, d, def time.Duration) {
	if d <= 0 {
		p.Add(option, d, fmt.Sprintf("set a positive duration, or leave it out for %v", def))
	}
}

// Clock records a nil clock given to WithClock, with the fix "pass the
// Breakers' Settings.Clock, or leave it out for time.Now".
func (p *Problems) Clock(clock func() time.Time) {
	if clock == nil {
		p.Add("WithClock", "nil", "pass the Breakers' Settings.Clock, or leave it out for time.Now")
	}
}

// Err returns nil when nothing was recorded, the one *driver.OptionError,
// or all of them joined (errors.As finds the first; errors.Join's Unwrap
// lists each).
func (p *Problems) Err() error {
	switch len(p.errs) {
	case 0:
		return nil
	case 1:
		return p.errs[0]
	}
	return errors.Join(p.errs...)
}
