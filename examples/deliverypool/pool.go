// Package deliverypool is a small ActivityPub-style delivery pool on a
// kvbreaker.Breaker: a delay queue of messages, a few workers that ask
// Allow before each delivery and report the outcome, and held messages put
// back on the queue at Verdict.RetryAt with their HeldSince. Its test runs
// the scenario of a real pool's port (a fleet posting to five hosts for an
// hour while one host is down for 20 minutes and another never answers) on
// a compressed clock (testing/synctest), with and without recovery
// back-off and the paced release.
//
// The pool is its own code, written for this example; only its shape
// (workers, a per-host breaker, retries) follows the pools such a port
// starts from.
package deliverypool

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"github.com/kvbreaker/kvbreaker"
)

// Message is one delivery of one activity to one host.
type Message struct {
	Host string
	// HeldSince is what Allow last returned for it (zero until held).
	HeldSince time.Time
	at        time.Time // when the queue hands it to a worker
}

// Deliver sends a message to its host; an error means the host did not
// answer (a timeout, a refused connection, a 5xx).
type Deliver func(ctx context.Context, host string) error

// Event is something the pool did, for the caller to count.
type Event struct {
	Kind Kind
	Host string
	At   time.Time
}

// Kind is an Event's kind.
type Kind int

const (
	// Delivered: the host took the message (after a Send or a Probe).
	Delivered Kind = iota
	// Probed: the breaker elected this delivery as the host's probe.
	Probed
	// Failed: the delivery got no answer; the message is queued again.
	Failed
	// Dropped: the breaker dropped a message held for HoldLimit.
	Dropped
)

// Pool delivers messages through a Breaker with a fixed number of workers.
// Held and failed messages go back on its delay queue, so none is lost
// while the pool runs; Pending tells what is still queued when it stops.
type Pool struct {
	br         *kvbreaker.Breaker
	deliver    Deliver
	retryAfter time.Duration
	events     func(Event)

	mu    sync.Mutex
	queue delayQueue
	wake  chan struct{}
}

// New returns a pool that delivers with deliver through br, queues a
// failed message again retryAfter later, and reports what it does to
// events (called from the workers, so it must be safe for concurrent
// use).
func New(br *kvbreaker.Breaker, deliver Deliver, retryAfter time.Duration, events func(Event)) *Pool {
	return &Pool{br: br, deliver: deliver, retryAfter: retryAfter, events: events, wake: make(chan struct{}, 1)}
}

// Enqueue queues m for delivery at at.
func (p *Pool) Enqueue(m Message, at time.Time) {
	p.mu.Lock()
	m.at = at
	heap.Push(&p.queue, &m)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Pending returns how many messages are queued for host.
func (p *Pool) Pending(host string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, m := range p.queue {
		if m.Host == host {
			n++
		}
	}
	return n
}

// Run hands due messages to workers goroutines until ctx ends, then waits
// for the workers to finish the deliveries in hand.
func (p *Pool) Run(ctx context.Context, workers int) {
	work := make(chan *Message)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for m := range work {
				p.handle(ctx, m)
			}
		})
	}
	defer func() {
		close(work)
		wg.Wait()
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		p.mu.Lock()
		var next *Message
		wait := time.Hour
		if len(p.queue) > 0 {
			if d := time.Until(p.queue[0].at); d <= 0 {
				next = heap.Pop(&p.queue).(*Message)
			} else {
				wait = d
			}
		}
		p.mu.Unlock()
		if next != nil {
			select {
			case work <- next:
				continue
			case <-ctx.Done():
				p.Enqueue(*next, next.at)
				return
			}
		}
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-p.wake:
		case <-ctx.Done():
			return
		}
	}
}

// handle is one worker's turn with m: ask the breaker, deliver, report.
func (p *Pool) handle(ctx context.Context, m *Message) {
	// On a store error Allow still answers (Send by default), which is
	// what a pool should do with it; a real one would log the error.
	v, _ := p.br.Allow(ctx, m.Host, m.HeldSince)
	now := time.Now()
	switch v.Decision {
	case kvbreaker.Hold:
		m.HeldSince = v.HeldSince
		p.Enqueue(*m, v.RetryAt)
		return
	case kvbreaker.Drop:
		p.events(Event{Kind: Dropped, Host: m.Host, At: now})
		return
	case kvbreaker.Probe:
		p.events(Event{Kind: Probed, Host: m.Host, At: now})
	}
	if err := p.deliver(ctx, m.Host); err != nil {
		_ = p.br.Failure(ctx, m.Host)
		p.events(Event{Kind: Failed, Host: m.Host, At: time.Now()})
		p.Enqueue(*m, time.Now().Add(p.retryAfter))
		return
	}
	_ = p.br.Success(ctx, m.Host)
	p.events(Event{Kind: Delivered, Host: m.Host, At: time.Now()})
}

// delayQueue is a min-heap of messages by due instant.
type delayQueue []*Message

func (q delayQueue) Len() int           { return len(q) }
func (q delayQueue) Less(i, j int) bool { return q[i].at.Before(q[j].at) }
func (q delayQueue) Swap(i, j int)      { q[i], q[j] = q[j], q[i] }
func (q *delayQueue) Push(x any)        { *q = append(*q, x.(*Message)) }
func (q *delayQueue) Pop() any {
	old := *q
	m := old[len(old)-1]
	*q = old[:len(old)-1]
	return m
}
