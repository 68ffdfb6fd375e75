package cloudflarekv

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/cloudflare/cloudflare-go/v6/kv"
	"github.com/cloudflare/cloudflare-go/v6/option"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

var _ driver.ClockSampler = (*Store)(nil)

// clockKey is the key SampleClock reads. Its control character fails
// driver.ValidateKey, so no Breaker ever writes it and the read is a miss:
// KV's cheapest answer, with no value to transfer.
const clockKey = "\x7fkvbreaker-clock-sample"

// SampleClock implements driver.ClockSampler from the HTTP Date header of
// one GET of a key that cannot exist (answered 404, "key not found"),
// truncated to the second (resolution 1 s).
//
// Every REST API request counts against the account's 1,200 per 5 minutes,
// so the sample is one read, the cheapest request: it spends from the
// WithRequestBudget budget like any read, is not sent while the store backs
// off after a 429 (a *RateLimitError, as for Get), and is sent once, without
// cloudflare-go's retry: a retry 1.5 to 2 s later brings nothing the next
// sample would not. Neither the cache nor a concurrent read answers it.
//
// An answer without a Date header, or with one that does not parse as an
// HTTP date, is an error, never a zero time.
func (s *Store) SampleClock(ctx context.Context) (time.Time, time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, 0, opError(adapter.OpClock, "", err)
	}
	if s.isClosed() {
		return time.Time{}, 0, opError(adapter.OpClock, "", ErrClosed)
	}
	if until, limited := s.backingOff(); limited {
		return time.Time{}, 0, opError(adapter.OpClock, "", &RateLimitError{Until: until})
	}
	if ok, next := s.spend(); !ok {
		return time.Time{}, 0, opError(adapter.OpClock, "", &BudgetError{Next: next})
	}
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var headers atomic.Pointer[http.Header] // the last answer's, set by the middleware
	opts := append(s.requestOptions(),
		option.WithMaxRetries(0),
		option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			res, err := next(req)
			if err == nil && res != nil {
				h := res.Header.Clone()
				headers.Store(&h)
			}
			return res, err
		}))
	var params kv.NamespaceValueGetParams
	params.AccountID.Value, params.AccountID.Present = s.account, true
	res, err := s.values.Get(rctx, s.namespace, escapeKey(clockKey), params, opts...)
	if res != nil {
		_ = res.Body.Close() // the value, if someone wrote one anyway, is not wanted
	}
	err = apiError(err)
	var rl *RateLimitError
	switch {
	case errors.Is(err, driver.ErrNotFound):
		// The expected answer.
	case errors.As(err, &rl):
		s.mu.Lock()
		s.backOffLocked(rl.Until)
		s.mu.Unlock()
		return time.Time{}, 0, opError(adapter.OpClock, "", err)
	case err != nil && rctx.Err() != nil:
		return time.Time{}, 0, opError(adapter.OpClock, "", s.noAnswer(rctx.Err()))
	case err != nil:
		return time.Time{}, 0, opError(adapter.OpClock, "", err)
	}
	h := headers.Load()
	if h == nil {
		return time.Time{}, 0, opError(adapter.OpClock, "", fmt.Errorf("no HTTP answer seen from %s", s.endpointName()))
	}
	v := h.Values("Date")
	if len(v) == 0 || v[0] == "" {
		return time.Time{}, 0, opError(adapter.OpClock, "", fmt.Errorf("no Date header in the answer from %s", s.endpointName()))
	}
	t, perr := http.ParseTime(v[0]) // any of the formats HTTP allows (RFC 9110 §5.6.7)
	if perr != nil {
		return time.Time{}, 0, opError(adapter.OpClock, "", fmt.Errorf("unparsable Date header %q in the answer from %s", v[0], s.endpointName()))
	}
	return t, time.Second, nil
}
