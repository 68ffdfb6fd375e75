package kvbreaker

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"

	"github.com/kvbreaker/kvbreaker/driver"
)

// ErrNoLister is returned by Breaker.List and Breaker.Circuits when the
// Breaker's store cannot enumerate its keys (it implements no
// driver.Lister; of the bundled stores, MySQL, SQLite and NATS). It
// matches errors.ErrUnsupported.
var ErrNoLister = fmt.Errorf("kvbreaker: the store cannot list its keys (it implements no driver.Lister): %w", errors.ErrUnsupported)

// MaxListLimit bounds List's limit: each key listed is then read, so a page
// is as many store reads as it has keys.
const MaxListLimit = 1000

// circuitsPage is the page size Circuits reads with.
const circuitsPage = 100

// List returns one page of the circuits in the Breaker's store: the Status
// of up to limit hosts with a record (open, half-open, or closed with
// failures in its window), in the store's order, and the cursor of the next
// page ("" after the last one), to pass back as it came. cursor is "" for
// the first page; limit is 1 to MaxListLimit.
//
// The page is listed with the store's driver.Lister and each key read as
// Inspect reads it, so a page costs one list and one read per key. A key
// that expired or was deleted between the two is left out, so a page may
// hold fewer than limit circuits, even none, before the last one. A store
// may list a key again on a later page (Redis's SCAN does while its table
// is rehashed): a caller that counts circuits removes repeats, as Circuits
// does. When the store fails to read a key, List carries on with the other
// keys and returns the page's circuits with an error joining an
// *UnreadableError for each such key; when the listing itself fails, or
// ctx ends, it returns no circuits.
//
// Over a store that is not Prefixed, keys holding '/' are
// left out: they are other fleets' (a Prefixed store under that store
// keeps them there), so a Breaker that shares a store with prefixed fleets
// lists only its own hosts, as Prefixed's listing does. The store's own
// client lists every key.
func (b *Breaker) List(ctx context.Context, cursor string, limit int) (circuits []Status, next string, err error) {
	circuits, unreadable, next, err := b.listPage(ctx, cursor, limit)
	if err != nil {
		return nil, "", err
	}
	return circuits, next, errors.Join(unreadable...)
}

// listPage is List's page, with the keys the store failed to read kept
// apart (each error names its key, as Inspect's do) for Circuits to yield
// one by one.
func (b *Breaker) listPage(ctx context.Context, cursor string, limit int) (circuits []Status, unreadable []error, next string, err error) {
	if limit < 1 || limit > MaxListLimit {
		return nil, nil, "", fmt.Errorf("kvbreaker: list: limit is %d: use 1 to %d", limit, MaxListLimit)
	}
	l, ok := b.store.(driver.Lister)
	if !ok {
		return nil, nil, "", ErrNoLister
	}
	lctx, cancel := b.callContext(ctx)
	keys, next, err := l.List(lctx, "", cursor, limit)
	cancel()
	if errors.Is(err, errors.ErrUnsupported) {
		// A Prefixed store over a store that cannot list says so this way.
		return nil, nil, "", fmt.Errorf("%w: %w", ErrNoLister, err)
	}
	if err != nil {
		return nil, nil, "", fmt.Errorf("kvbreaker: list: %w", err)
	}
	_, _, prefixed := Unprefixed(b.store)
	for _, key := range keys {
		if !prefixed && strings.Contains(key, prefixSeparator) {
			continue
		}
		st, err := b.Inspect(ctx, key)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, nil, "", fmt.Errorf("kvbreaker: list: %w", err)
		case err != nil:
			unreadable = append(unreadable, &UnreadableError{Host: key, Err: err})
		case st.Found:
			circuits = append(circuits, st)
		}
	}
	return circuits, unreadable, next, nil
}

// UnreadableError is a key List or Circuits listed but the store failed to
// read: its circuit's state is unknown.
type UnreadableError struct {
	Host string
	Err  error
}

func (e *UnreadableError) Error() string { return e.Err.Error() }
func (e *UnreadableError) Unwrap() error { return e.Err }

// Circuits iterates over every circuit in the Breaker's store, page by page
// (List), each host once: for an admin page or a report, where List's
// cursor is not needed. A key the store fails to read is yielded as a
// Status holding only its Host, with an *UnreadableError, and the iteration
// goes on unless the loop breaks; a listing that fails (ErrNoLister among
// others) or a ctx that ends is yielded as a zero Status and the error, and
// ends it.
//
// It keeps the hosts already yielded, to leave out a store's repeats, so
// its memory grows with the number of circuits listed.
func (b *Breaker) Circuits(ctx context.Context) iter.Seq2[Status, error] {
	return func(yield func(Status, error) bool) {
		seen := map[string]bool{}
		cursor := ""
		for {
			page, unreadable, next, err := b.listPage(ctx, cursor, circuitsPage)
			if err != nil {
				yield(Status{}, err)
				return
			}
			for _, st := range page {
				if seen[st.Host] {
					continue
				}
				seen[st.Host] = true
				if !yield(st, nil) {
					return
				}
			}
			for _, e := range unreadable {
				if !yield(Status{Host: e.(*UnreadableError).Host}, e) {
					return
				}
			}
			if next == "" {
				return
			}
			cursor = next
		}
	}
}
