package etcd

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Lease pooling, after the Kubernetes apiserver's etcd3 lease manager: a
// lease grant is a raft write and every lease is tracked by the server, so a
// fleet writing thousands of records should attach them to a handful of
// leases. A write reuses the previous lease of the same TTL when that lease
// outlives now+ttl (the key never lives shorter than asked) and expires no
// later than now+ttl+slack (it never lives much longer), and fewer than
// maxKeys keys were attached to it.

// Defaults of the reuse policy (the lease manager's).
const (
	// DefaultReuseFraction is the share of the TTL a key may outlive its
	// TTL by, for lease reuse.
	DefaultReuseFraction = 0.05
	// DefaultMaxReuse caps that slack.
	DefaultMaxReuse = 60 * time.Second
	// DefaultMaxKeysPerLease bounds how many writes one lease serves, so
	// that revoking or expiring one lease never deletes an unbounded number
	// of keys at once.
	DefaultMaxKeysPerLease = 1000
)

// reusePolicy decides when a cached lease may serve a write. All durations
// are whole seconds, as etcd grants them.
type reusePolicy struct {
	fraction float64 // slack as a share of the TTL
	maxSlack int64   // seconds
	maxKeys  int     // writes one lease may serve
}

// slack is how many seconds a key written with a pooled lease may outlive
// its ttl: fraction×ttl rounded down, at most maxSlack. Below 1/fraction
// seconds (20 s by default) it is zero, and each write grants its own lease.
func (p reusePolicy) slack(ttlSec int64) int64 {
	s := int64(p.fraction * float64(ttlSec))
	return max(0, min(s, p.maxSlack))
}

// grantTTL is the TTL to ask for when the cache cannot serve a ttlSec write:
// the TTL plus the slack, so that the new lease serves writes for the next
// slack seconds.
func (p reusePolicy) grantTTL(ttlSec int64) int64 { return ttlSec + p.slack(ttlSec) }

// pooledLease is a granted lease as the pool remembers it.
type pooledLease struct {
	id clientv3.LeaseID
	// expires is a lower bound of when the server expires the lease: the
	// instant read before the Grant call plus the granted TTL. The server
	// starts counting later, and a leader change or restart only extends
	// leases, so any error makes keys live longer, never shorter.
	expires time.Time
	// attached counts the writes the lease has served.
	attached int
}

// reusable reports whether l may carry a key written at now with a TTL of
// ttlSec seconds. It is a pure function of its arguments.
func (p reusePolicy) reusable(l pooledLease, now time.Time, ttlSec int64) bool {
	if l.id == clientv3.NoLease || l.attached >= p.maxKeys {
		return false
	}
	earliest := now.Add(time.Duration(ttlSec) * time.Second)
	latest := earliest.Add(time.Duration(p.slack(ttlSec)) * time.Second)
	return !l.expires.Before(earliest) && !l.expires.After(latest)
}

// maxPoolEntries bounds the number of TTLs the pool remembers a lease for; a
// Breaker writes with one TTL, so this is only reached by unusual callers.
const maxPoolEntries = 64

// leasePool hands out leases, granting one only when the cached lease of
// the TTL cannot be reused. Concurrent writes that miss wait for a single
// grant instead of each granting, but each waits only as long as its own
// context allows.
type leasePool struct {
	policy reusePolicy
	clock  func() time.Time
	grant  func(ctx context.Context, ttlSec int64) (id clientv3.LeaseID, grantedSec int64, err error)

	mu    sync.Mutex
	slots map[int64]*leaseSlot
}

type leaseSlot struct {
	lease    pooledLease
	inflight chan struct{} // closed when the grant in progress ends; nil if none
}

// get returns a lease for a key of ttlSec seconds, and whether it was
// granted for this call.
func (p *leasePool) get(ctx context.Context, ttlSec int64) (clientv3.LeaseID, bool, error) {
	for {
		now := p.clock()
		p.mu.Lock()
		s := p.slot(ttlSec, now)
		if p.policy.reusable(s.lease, now, ttlSec) {
			s.lease.attached++
			id := s.lease.id
			p.mu.Unlock()
			return id, false, nil
		}
		if ch := s.inflight; ch != nil {
			p.mu.Unlock()
			select {
			case <-ch:
				continue // look again: the grant may have failed
			case <-ctx.Done():
				return clientv3.NoLease, false, ctx.Err()
			}
		}
		ch := make(chan struct{})
		s.inflight = ch
		p.mu.Unlock()

		id, granted, err := p.grant(ctx, p.policy.grantTTL(ttlSec))

		p.mu.Lock()
		s.inflight = nil
		if err == nil {
			s.lease = pooledLease{id: id, expires: now.Add(time.Duration(granted) * time.Second), attached: 1}
		}
		close(ch)
		p.mu.Unlock()
		return id, err == nil, err
	}
}

// slot returns the slot of ttlSec, creating it; p.mu is held.
func (p *leasePool) slot(ttlSec int64, now time.Time) *leaseSlot {
	if s, ok := p.slots[ttlSec]; ok {
		return s
	}
	if len(p.slots) >= maxPoolEntries {
		for k, s := range p.slots {
			if s.inflight == nil && s.lease.expires.Before(now) {
				delete(p.slots, k)
			}
		}
	}
	s := &leaseSlot{}
	if len(p.slots) < maxPoolEntries {
		p.slots[ttlSec] = s
	}
	return s
}

// forget drops the cached lease id (the server no longer knows it, e.g.
// after its data was lost), so the next write grants a fresh one.
func (p *leasePool) forget(ttlSec int64, id clientv3.LeaseID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.slots[ttlSec]; ok && s.lease.id == id {
		s.lease = pooledLease{}
	}
}
