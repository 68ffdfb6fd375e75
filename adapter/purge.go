package adapter

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Purge is how a store whose rows do not expire by themselves deletes the
// expired ones: one batch of at most Batch rows that expired more than
// Delay ago, in the background after every Every successful writes.
type Purge struct {
	// Every is the number of successful writes between background
	// purges; 0 purges only when the store's Purge is called.
	Every int
	// Batch bounds the rows one purge deletes.
	Batch int
	// Delay is how long after its expiry a row may be deleted: longer
	// than a call takes, so a compare-and-swap that read the row before
	// it expired finds it still there.
	Delay time.Duration
}

// DefaultPurge is the purge schedule of MySQL, PostgreSQL and SQLite unless
// told otherwise: a batch of up to 1000 rows every 1000 writes, a row a
// minute past its expiry.
var DefaultPurge = Purge{Every: 1000, Batch: 1000, Delay: time.Minute}

// Check records the invalid fields of p, named by the options that set
// them (WithPurgeEvery, WithPurgeBatch, WithPurgeDelay).
func (p Purge) Check(problems *Problems) {
	if p.Every < 0 {
		problems.Add("WithPurgeEvery", p.Every, "set a number of writes, or 0 to purge only by calling Purge")
	}
	if p.Batch <= 0 {
		problems.Add("WithPurgeBatch", p.Batch, fmt.Sprintf("set a positive number of rows, or leave it out for %d", DefaultPurge.Batch))
	}
	if p.Delay <= 0 {
		problems.Add("WithPurgeDelay", p.Delay, fmt.Sprintf("set a positive duration longer than a call takes, or leave it out for %v", DefaultPurge.Delay))
	}
}

// Purger runs a store's purge in the background, one at a time, after
// every n successful writes (so each write pays for 1/n of a purge and no
// timer runs while the store is idle). Its zero value never purges.
type Purger struct {
	every   int64
	timeout time.Duration
	purge   func(context.Context) (int64, error)

	writes  atomic.Int64
	running atomic.Bool
	mu      sync.Mutex // guards closed and wg.Add
	closed  bool
	wg      sync.WaitGroup
}

// NewPurger returns a Purger that calls purge, bounded by timeout, after
// every every successful writes; every 0 (or less) never calls it.
func NewPurger(every int, timeout time.Duration, purge func(context.Context) (int64, error)) *Purger {
	return &Purger{every: int64(every), timeout: timeout, purge: purge}
}

// Wrote counts a successful write and starts a purge when one is due and
// none is running. A purge's error is dropped: the next one tries again,
// and a store's own Purge reports it to a caller who asks.
func (p *Purger) Wrote() {
	if p.every <= 0 || p.writes.Add(1)%p.every != 0 {
		return
	}
	if !p.running.CompareAndSwap(false, true) {
		return // one at a time
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.running.Store(false)
		return
	}
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		defer p.running.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
		defer cancel()
		_, _ = p.purge(ctx)
	}()
}

// Close starts no more purges and waits for a running one to end. It
// reports whether the Purger was already closed.
func (p *Purger) Close() (already bool) {
	p.mu.Lock()
	already, p.closed = p.closed, true
	p.mu.Unlock()
	p.wg.Wait()
	return already
}
