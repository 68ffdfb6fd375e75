package adapter

import (
	"errors"
	"fmt"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// FollowArgs checks driver.Follower.Follow's arguments the way every
// adapter should, before it contacts the store: a heartbeat that is not
// positive, or a nil fn, is refused with an error that says what to pass
// (the adapter wraps it in its *driver.OpError). The conformance case
// follow-arguments holds a Follow to it.
func FollowArgs(heartbeat time.Duration, fn func(driver.Change)) error {
	var errs []error
	if heartbeat <= 0 {
		errs = append(errs, fmt.Errorf("heartbeat %v is not positive: pass how often Synced must arrive while nothing changes", heartbeat))
	}
	if fn == nil {
		errs = append(errs, errors.New("fn is nil: pass the function that receives the changes"))
	}
	return errors.Join(errs...)
}

// ListArgs checks driver.Lister.List's limit the way every adapter should,
// before it contacts the store: a limit that is not positive is refused
// with an error that says what to pass (the adapter wraps it in its
// *driver.OpError).
func ListArgs(limit int) error {
	if limit <= 0 {
		return fmt.Errorf("limit %d is not positive: pass the most keys a page may hold", limit)
	}
	return nil
}
