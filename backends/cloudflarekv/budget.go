package cloudflarekv

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/kvbreaker/kvbreaker/adapter"
)

// Workers KV's published account-wide API limit.
const (
	AccountRequests = 1200
	AccountPeriod   = 5 * time.Minute
)

// ErrBudgetExhausted is matched (errors.Is) by the error a call returns when
// this process's share of the account's request budget (WithRequestBudget)
// is used up and the cache cannot answer: the request was not sent. A
// Breaker's Allow then answers per Settings.FailClosed (Send by default,
// Hold with FailClosed) and returns the error; a *BudgetError says when
// the next request may go.
var ErrBudgetExhausted = errors.New("cloudflarekv: request budget exhausted")

// BudgetError is a request not sent for lack of budget.
type BudgetError struct {
	// Next is when the budget allows the next request.
	Next time.Time
}

func (e *BudgetError) Error() string {
	return fmt.Sprintf("request budget exhausted: not sent; next request allowed at %s", e.Next.Format(time.RFC3339Nano))
}

// Is matches ErrBudgetExhausted.
func (e *BudgetError) Is(target error) bool { return target == ErrBudgetExhausted }

// WithRequestBudget caps this process's requests (reads and writes) so that
// processes of them together never exceed Workers KV's published limit of
// 1,200 requests per 5 minutes per account: declare how many processes
// share the account (every one must use the same number). When the budget
// is spent, Get answers from the cache (up to the declared ReadStaleness) or
// with ErrBudgetExhausted, and queued writes wait for budget (coalescing
// with later writes to the key meanwhile); nothing more is sent.
func WithRequestBudget(processes int) Option {
	return WithRequestBudgetLimit(AccountRequests, AccountPeriod, processes)
}

// WithRequestBudgetLimit is WithRequestBudget for another limit: requests
// per period for the whole account.
func WithRequestBudgetLimit(requests int, per time.Duration, processes int) Option {
	return func(o *options) { o.budget = &budget{requests: requests, per: per, processes: processes} }
}

// budget is a token bucket holding this process's share of the account's
// limit: share = requests/processes per period. It holds at most a tenth of
// the share (burst) and refills the rest evenly over the period, so any
// window of one period sees at most burst + refill = share requests from
// this process, and processes of them at most the account's limit.
type budget struct {
	requests, processes int
	per                 time.Duration
	now                 func() time.Time // time.Now; tests replace it

	mu     sync.Mutex
	burst  float64
	rate   float64 // tokens per second
	tokens float64
	at     time.Time
}

// validate records a bad budget in problems, or sets the bucket up.
func (b *budget) validate(problems *adapter.Problems) {
	bad := problems.Add
	if b.processes < 1 {
		bad("WithRequestBudget processes", b.processes, "declare how many processes share the account's request budget (1 or more)")
	}
	if b.per <= 0 {
		bad("WithRequestBudgetLimit period", b.per, "set a positive period")
	}
	if b.processes >= 1 && b.requests < b.processes {
		bad("WithRequestBudgetLimit requests", b.requests, fmt.Sprintf("allow at least one request per period for each of the %d processes", b.processes))
	}
	if b.processes < 1 || b.per <= 0 || b.requests < b.processes {
		return
	}
	share := float64(b.requests) / float64(b.processes)
	b.burst = max(1, share/10)
	b.rate = (share - b.burst) / b.per.Seconds()
	b.tokens = b.burst
	if b.now == nil {
		b.now = time.Now
	}
	b.at = b.now()
}

// take spends one token if there is one; otherwise it returns when the
// next token will be there.
func (b *budget) take() (ok bool, next time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if now.After(b.at) {
		b.tokens = min(b.burst, b.tokens+b.rate*now.Sub(b.at).Seconds())
		b.at = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, time.Time{}
	}
	if b.rate <= 0 {
		return false, now.Add(b.per)
	}
	// Round the wait up (and to at least 1 ns): a wait rounded down finds
	// the same shortfall when it ends, and on a clock that does not move
	// between readings (synctest's, a coarse one) a queued write would
	// retry at that instant forever.
	wait := time.Duration(math.Ceil((1 - b.tokens) / b.rate * float64(time.Second)))
	return false, now.Add(max(wait, time.Nanosecond))
}

// spend takes one request from the budget, if there is one.
func (s *Store) spend() (bool, time.Time) {
	if s.budget == nil {
		return true, time.Time{}
	}
	return s.budget.take()
}
