package kvbreaker

import "context"

// abandoned reports a probe given up by its caller; released says whether
// the claim was released. The Observer owner's observer.go defines it.
func (b *Breaker) abandoned(ctx context.Context, host string, released bool) {}
