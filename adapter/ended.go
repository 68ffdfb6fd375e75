package adapter

import (
	"context"
	"time"
)

// Ended is ctx's error once it has ended or its deadline has passed, else
// nil. A client that took its socket deadline from ctx may report that
// deadline's timeout before ctx's own timer has fired: an adapter (or a
// command) that asks whether ctx bounded a failure asks this, not ctx.Err.
func Ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}
