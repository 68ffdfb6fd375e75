package cloudflarekv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cloudflare/cloudflare-go/v6/kv"
	"github.com/cloudflare/cloudflare-go/v6/option"
	"github.com/cloudflare/cloudflare-go/v6/shared"
	"github.com/kvbreaker/kvbreaker/driver"
)

// keyState is the write side of one key: the write being sent, the one
// queued behind it, and when the last request was sent (then answered).
type keyState struct {
	key      string // the host key, for errors
	lastSent time.Time
	pending  *op
	inflight *op
	timer    *time.Timer
	// last is this store's latest write that went out successfully, until
	// a read from KV shows that something else replaced it.
	last *write
	// seq changes whenever a local write is queued or completes, so a read
	// that overlapped one neither overwrites it in the cache nor clears
	// last.
	seq uint64
	// served holds the values this store's Get may have answered with
	// recently, by version, so that a write computed from one is merged
	// as what it changed (write.baseVal). Bounded by maxServed.
	served map[driver.Version]served
}

// served is a value Get may have answered with; local if it was this
// store's own queued write.
type served struct {
	value []byte
	local bool
}

// maxServed bounds keyState.served; a write whose base has been forgotten
// is merged as a union (adapter.MergeRecords).
const maxServed = 256

// remember records that Get may answer with value as version ver. s.mu is
// held.
func (st *keyState) remember(ver driver.Version, value []byte, local bool) {
	if ver == driver.NoVersion {
		return
	}
	if st.served == nil || len(st.served) >= maxServed {
		st.served = make(map[driver.Version]served)
	}
	if _, ok := st.served[ver]; !ok {
		st.served[ver] = served{value, local}
	}
}

// latest returns the newest write of this store that KV holds or is about
// to hold: in flight, or the last one sent. s.mu is held.
func (st *keyState) latest() *write {
	if st.inflight != nil {
		return &st.inflight.w
	}
	return st.last
}

// op is a queued or in-flight write and the callers waiting for it.
type op struct {
	w        write
	done     chan struct{}
	err      error
	attempts int
	waiters  int
	// next is set when this op was folded into a later one (a requeue
	// after 429): its waiters go on waiting for next.
	next *op
}

// state returns key's write state, creating it. s.mu is held.
func (s *Store) state(full, key string) *keyState {
	st, ok := s.keys[full]
	if !ok {
		if len(s.keys) >= s.sweepAt {
			s.sweep()
		}
		st = &keyState{key: key}
		s.keys[full] = st
	}
	return st
}

// sweep forgets idle keys whose write interval has passed. s.mu is held.
func (s *Store) sweep() {
	now := time.Now()
	for k, st := range s.keys {
		if st.pending == nil && st.inflight == nil && now.Sub(st.lastSent) >= s.interval {
			delete(s.keys, k)
		}
	}
	s.sweepAt = max(1024, 2*len(s.keys))
}

// enqueue queues w for full (merging it into a queued write), makes it what
// this store's Get returns, and waits for the request that carries it.
func (s *Store) enqueue(ctx context.Context, opName, key, full string, w write) (driver.Version, error) {
	s.mu.Lock()
	st := s.state(full, key)
	s.bump(st)
	// What the cache holds is what the store's Get answered last (a read
	// from KV before this key's first local write, say).
	if e, ok := s.cache.get(full, time.Now(), time.Duration(math.MaxInt64)); ok && e.present {
		st.remember(e.ver, e.value, false)
	}
	if !w.del {
		if w.base == driver.NoVersion {
			// Computed from an absent record: all of it is new.
			w.baseKnown, w.baseLocal = true, true
		} else if b, ok := st.served[w.base]; ok {
			w.baseVal, w.baseKnown, w.baseLocal = b.value, true, b.local
		}
	}
	p := st.pending
	now := s.clock()
	if p == nil {
		// A write not computed from what this store last sent (another
		// goroutine read before that write) is merged with it, so the
		// new request does not undo it.
		if l := st.latest(); l != nil {
			w = combine(*l, w, now)
		}
		p = &op{w: w, done: make(chan struct{})}
		st.pending = p
	} else {
		p.w = combine(p.w, w, now)
	}
	p.waiters++
	if !p.w.del {
		st.remember(p.w.ver, p.w.value, true)
	}
	s.cache.set(full, entry{present: !p.w.del, value: p.w.value, ver: p.w.ver, exp: p.w.exp, pinned: true})
	sendAt := s.schedule(full, st)
	s.mu.Unlock()

	// A caller that cannot outlast a 429 backoff is answered now; its
	// write stays queued.
	if dl, ok := ctx.Deadline(); ok && sendAt.After(dl) {
		if until, limited := s.backingOff(); limited {
			s.leave(p)
			return 0, opError(opName, key, &RateLimitError{Until: until, Queued: true})
		}
	}
	for {
		select {
		case <-p.done:
			if p.next != nil {
				p = p.next
				continue
			}
			if p.err != nil {
				return 0, opError(opName, key, p.err)
			}
			if p.w.del {
				// Superseded by a delete: this write was made and undone.
				return w.ver, nil
			}
			return p.w.ver, nil
		case <-ctx.Done():
			s.leave(p)
			if s.sending(full, p) {
				return 0, opError(opName, key, fmt.Errorf("%w (the write is still being sent)", s.noAnswer(ctx.Err())))
			}
			return 0, opError(opName, key, fmt.Errorf("%w (the write stays queued and is still sent)", ctx.Err()))
		}
	}
}

// bump marks a local write event on st. s.mu is held.
func (s *Store) bump(st *keyState) {
	s.seq++
	st.seq = s.seq
}

// leave records that a waiter of p gave up.
func (s *Store) leave(p *op) {
	s.mu.Lock()
	for p.next != nil {
		p = p.next
	}
	p.waiters--
	s.mu.Unlock()
}

// schedule arms st's timer to send its queued write once the write interval
// since the last request and any 429 backoff have passed, and returns that
// instant. A write in flight arms it when it completes. s.mu is held.
func (s *Store) schedule(full string, st *keyState) time.Time {
	at := st.lastSent.Add(s.interval)
	if s.backoff.After(at) {
		at = s.backoff
	}
	if st.pending == nil || st.inflight != nil || st.timer != nil {
		return at
	}
	st.timer = time.AfterFunc(time.Until(at), func() { s.flush(full) })
	return at
}

// backOffLocked stops all requests until until. s.mu is held.
func (s *Store) backOffLocked(until time.Time) {
	if until.After(s.backoff) {
		s.backoff = until
	}
}

// backingOff returns until when the store is backing off after a 429.
func (s *Store) backingOff() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.backoff, time.Now().Before(s.backoff)
}

// flush sends full's queued write.
func (s *Store) flush(full string) {
	s.mu.Lock()
	st := s.keys[full]
	if st == nil {
		s.mu.Unlock()
		return
	}
	st.timer = nil
	p := st.pending
	if p == nil {
		s.mu.Unlock()
		return
	}
	if time.Now().Before(s.backoff) {
		// Another key's 429 stopped the store meanwhile.
		s.schedule(full, st)
		s.mu.Unlock()
		return
	}
	if ok, next := s.spend(); !ok {
		// No budget: wait for it, still queued (later writes to the key
		// merge into this one meanwhile).
		st.timer = time.AfterFunc(time.Until(next), func() { s.flush(full) })
		s.mu.Unlock()
		return
	}
	st.pending, st.inflight = nil, p
	st.lastSent = time.Now()
	p.attempts++
	closed := s.closed
	s.mu.Unlock()

	err := ErrClosed // a queued write Close came before: not sent, failed
	if !closed {
		err = s.send(full, p.w)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	// Count the interval from the answer, not the request: Cloudflare
	// judged the write at some instant in between, so the next one, sent
	// an interval after the answer, is an interval after that instant
	// whatever the two requests' latencies.
	st.lastSent = time.Now()
	st.inflight = nil
	s.bump(st)
	var rl *RateLimitError
	limited := errors.As(err, &rl)
	if limited {
		s.backOffLocked(rl.Until)
	}
	switch {
	case (limited || ambiguous(err)) && p.attempts < s.attempts:
		// Queue it again, under any write queued meanwhile. An
		// ambiguous failure (no answer, or a 5xx, after cloudflare-go's
		// own retries) may have been applied: sending the same write
		// again (same envelope, same version) is then a no-op, and a
		// delete of a key already gone is answered 200, so its callers
		// learn it succeeded instead of getting an error for a write
		// that took effect.
		if q := st.pending; q != nil {
			// q was merged onto p when it was queued (p was then in
			// flight, st.latest), so q stands: merging p in again
			// would count p's changes twice.
			q.waiters += p.waiters
			q.attempts = max(q.attempts, p.attempts)
			p.next = q
			close(p.done)
		} else {
			st.pending = p
		}
	case err != nil:
		p.err = err
		st.last = nil // what KV holds is unknown
		close(p.done)
		if st.pending == nil {
			// What KV holds is unknown now.
			s.cache.drop(full, p.w.ver)
		}
		if p.waiters <= 0 {
			s.log.Warn("cloudflarekv: write lost: its request failed after every caller had stopped waiting",
				"key", st.key, "write", p.w.String(), "err", err)
		}
	default:
		w := p.w
		st.last = &w
		close(p.done)
		s.cache.unpin(full, p.w.ver, time.Now())
	}
	s.schedule(full, st)
	if !s.busy() {
		s.idle.Broadcast()
	}
}

// requestOptions are added to every request: few SDK retries, never an SDK
// retry of a 429, which the store handles itself, nor of a refused
// connection (failFast).
func (s *Store) requestOptions() []option.RequestOption {
	return []option.RequestOption{
		option.WithMaxRetries(s.maxRetries),
		option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			res, err := s.failFast(req, next)
			if err == nil && res.StatusCode == http.StatusTooManyRequests {
				res.Header.Set("X-Should-Retry", "false")
			}
			return res, err
		}),
	}
}

// send performs one write request, detached from its callers' contexts
// (several may be waiting for it) but bounded by WithCallTimeout.
func (s *Store) send(full string, w write) error {
	ctx, cancel := context.WithTimeout(s.life, s.timeout)
	defer cancel()
	seg := escapeKey(full)
	var err error
	if w.del {
		var params kv.NamespaceValueDeleteParams
		params.AccountID.Value, params.AccountID.Present = s.account, true
		_, err = s.values.Delete(ctx, s.namespace, seg, params, s.requestOptions()...)
	} else {
		value, meta := encodeEnvelope(w)
		var params kv.NamespaceValueUpdateParams
		params.AccountID.Value, params.AccountID.Present = s.account, true
		params.Value.Value, params.Value.Present = shared.UnionString(value), true
		params.ExpirationTTL.Value, params.ExpirationTTL.Present = float64(s.physicalTTL(w.ttl)), true
		// A JSON string: cloudflare-go would flatten a Go map into form
		// fields, which the API ignores.
		params.Metadata.Value, params.Metadata.Present = meta, true
		_, err = s.values.Update(ctx, s.namespace, seg, params, s.requestOptions()...)
	}
	return apiError(err)
}

// fetch reads full from KV and caches the answer, unless a local write of
// the key started meanwhile.
func (s *Store) fetch(full string) (entry, error) {
	s.mu.Lock()
	seq := s.seqOf(full)
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(s.life, s.timeout)
	defer cancel()
	var params kv.NamespaceValueGetParams
	params.AccountID.Value, params.AccountID.Present = s.account, true
	res, err := s.values.Get(ctx, s.namespace, escapeKey(full), params, s.requestOptions()...)
	var e entry
	var rl *RateLimitError
	switch err = apiError(err); {
	case errors.Is(err, driver.ErrNotFound):
		e = entry{}
	case errors.As(err, &rl):
		s.mu.Lock()
		s.backOffLocked(rl.Until)
		s.mu.Unlock()
		return entry{}, err
	case err != nil:
		return entry{}, err
	default:
		body, rerr := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		_ = res.Body.Close()
		if rerr != nil {
			return entry{}, fmt.Errorf("reading the value: %w", rerr)
		}
		value, ver, exp := decodeEnvelope(body)
		e = entry{present: true, value: value, ver: ver, exp: exp}
	}
	e.at = time.Now()
	s.mu.Lock()
	if st := s.keys[full]; st != nil && e.present {
		st.remember(e.ver, e.value, false)
	}
	if s.seqOf(full) == seq {
		s.cache.set(full, e)
		// KV answered after this store's last write completed: if it
		// shows something else, that write was replaced, and later
		// writes must not be merged with it.
		if st := s.keys[full]; st != nil && st.last != nil && (!e.present || e.ver != st.last.ver) {
			st.last = nil
		}
	}
	s.mu.Unlock()
	return e, nil
}

// seqOf returns full's local write sequence (0 if never written). s.mu is
// held.
func (s *Store) seqOf(full string) uint64 {
	if st, ok := s.keys[full]; ok {
		return st.seq
	}
	return 0
}

// apiError turns cloudflare-go's error into the store's: ErrNotFound for a
// 404, a *RateLimitError for a 429, and otherwise the status and
// Cloudflare's error messages. The SDK's own error is not wrapped: it holds
// the request, whose Authorization header carries the token.
func apiError(err error) error {
	if err == nil {
		return nil
	}
	if ns, ok := errors.AsType[*notSent](err); ok {
		return ns.err
	}
	var ae *kv.Error
	if !errors.As(err, &ae) {
		return err // transport errors and context errors, which carry no token
	}
	switch ae.StatusCode {
	case http.StatusNotFound:
		// Only "key not found" is an absent key; a missing namespace or
		// account must not read as an empty store.
		if !slices.ContainsFunc(ae.Errors, func(e shared.ErrorData) bool { return e.Code != codeKeyNotFound }) {
			return driver.ErrNotFound
		}
	case http.StatusTooManyRequests:
		return &RateLimitError{Until: time.Now().Add(retryAfter(ae.Response))}
	}
	msgs := make([]string, 0, len(ae.Errors))
	for _, e := range ae.Errors {
		msgs = append(msgs, fmt.Sprintf("%d %s", e.Code, e.Message))
	}
	return &statusError{code: ae.StatusCode, msg: fmt.Sprintf("HTTP %d from the Cloudflare API: %s", ae.StatusCode, strings.Join(msgs, "; "))}
}

// statusError is an answer from the Cloudflare API other than 404 and 429.
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return e.msg }

// ambiguous reports whether a failed write may still have been applied: no
// answer (a transport error, the request timeout) or a 5xx. A 4xx answer
// says the write was refused, and a refused connection that nothing was
// sent.
func ambiguous(err error) bool {
	if err == nil || errors.Is(err, driver.ErrNotFound) || errors.Is(err, driver.ErrUnreachable) || errors.Is(err, ErrClosed) {
		return false
	}
	if se, ok := errors.AsType[*statusError](err); ok {
		return se.code >= 500
	}
	return true
}

// codeKeyNotFound is Cloudflare's error code for a missing key.
const codeKeyNotFound = 10009

// retryAfter reads Retry-After (seconds or an HTTP date), defaulting to one
// second and capped at maxRetryAfter.
func retryAfter(res *http.Response) time.Duration {
	d := time.Second
	if res != nil {
		v := res.Header.Get("Retry-After")
		if secs, err := strconv.ParseFloat(v, 64); err == nil && secs > 0 {
			d = time.Duration(secs * float64(time.Second))
		} else if t, err := http.ParseTime(v); err == nil {
			d = time.Until(t)
		}
	}
	return min(max(d, 0), maxRetryAfter)
}
