package adapter

import (
	"errors"
	"fmt"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
)

// Gate is what a contract method checks before it contacts the store, in
// the order the adapters in this repository check it: the store closed
// (a closed store answers ErrClosed whatever the limit or heartbeat), then
// the arguments (FollowArgs, ListArgs, a ttl). Every refusal goes through
// Wrap, so that it carries the adapter's *driver.OpError with the method's
// op (OpFollow, OpList, OpSwap) and key. An adapter makes one per call
// from its closed flag, its ErrClosed and its OpError constructor.
type Gate struct {
	// Closed reports whether the store was closed.
	Closed func() bool
	// ErrClosed is the adapter's error for a closed store.
	ErrClosed error
	// Wrap makes the adapter's *driver.OpError of a refusal.
	Wrap func(op, key string, err error) error
}

// errNilWant is FollowDemand's refusal of a nil want, a channel that could
// never ask for a beat.
var errNilWant = errors.New("want is nil: pass the channel that asks for a beat (or call Follow)")

// Follow returns the error a Follow (demand false, want nil) or a
// FollowDemand (demand true) of prefix returns before it contacts the
// store, nil when it may go on: FollowDemand's nil want (a mistake in the
// program, whatever the store's state), then a closed store, then a
// heartbeat that is not positive or a nil fn (FollowArgs). The call's
// context is the adapter's to check: a feed that returns its context's
// error as it is checks it after the Gate.
func (g Gate) Follow(prefix string, heartbeat time.Duration, demand bool, want <-chan struct{}, fn func(driver.Change)) error {
	if demand && want == nil {
		return g.Wrap(OpFollow, prefix, errNilWant)
	}
	if g.Closed() {
		return g.Wrap(OpFollow, prefix, g.ErrClosed)
	}
	if err := FollowArgs(heartbeat, fn); err != nil {
		return g.Wrap(OpFollow, prefix, err)
	}
	return nil
}

// List returns the error a List of prefix with limit returns before it
// contacts the store, nil when it may go on: a closed store, then a limit
// that is not positive (ListArgs).
func (g Gate) List(prefix string, limit int) error {
	if g.Closed() {
		return g.Wrap(OpList, prefix, g.ErrClosed)
	}
	if err := ListArgs(limit); err != nil {
		return g.Wrap(OpList, prefix, err)
	}
	return nil
}

// Swap returns the error a CompareAndSwap of key with ttl returns before it
// contacts the store, nil when it may go on: a closed store, then a ttl
// that is not positive (driver.Store promises a positive one; an adapter
// that stored a key with none would keep it for ever, or not at all).
func (g Gate) Swap(key string, ttl time.Duration) error {
	if g.Closed() {
		return g.Wrap(OpSwap, key, g.ErrClosed)
	}
	if ttl <= 0 {
		return g.Wrap(OpSwap, key, fmt.Errorf("ttl %v is not positive", ttl))
	}
	return nil
}
