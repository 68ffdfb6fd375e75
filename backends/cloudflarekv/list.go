package cloudflarekv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cloudflare/cloudflare-go/v6/kv"
	"github.com/cloudflare/cloudflare-go/v6/packages/pagination"
	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// MaxListLimit is the most keys one List call asks Workers KV for (the
// list-keys API's own maximum).
const MaxListLimit = 1000

// minListRequest is the list-keys API's smallest limit.
const minListRequest = 10

// cursorSep separates, in a cursor, the last key listed from Workers KV's
// own cursor. driver.ValidateKey refuses control characters, so no key the
// Breaker writes contains it, and Cloudflare's cursors are base64.
const cursorSep = "\x1f"

var _ driver.Lister = (*Store)(nil)

// List implements driver.Lister with one list-keys request per call: the
// keys that begin with prefix, in Workers KV's (lexicographic) order,
// without those Get finds absent; deleted keys are gone from KV.
//
// Get judges a key by the logical expiry in its value's envelope, which is
// what a Breaker decides by; the copy in the key's metadata, which the
// listing carries, agrees with it for every write of this package (one PUT
// writes both), but not for a value another process put with other
// metadata. So the metadata decides only what it can: a key whose metadata
// is not this package's, or says live, is listed without a read; a key
// whose metadata says its logical expiry has passed is confirmed by a Get
// (the read cache's, counted against WithRequestBudget: one GET per such
// key, which KV keeps up to Traits().Expiry.Late after its logical expiry)
// and listed if Get still returns it. A listed key may therefore read as
// absent only when its metadata says live and its value says expired
// (written so by another process), or when it expired since. It lists what KV holds,
// which may be up to Propagation behind the latest writes, and not this
// store's queued writes. A page holds up to limit keys (at most
// MaxListLimit), and may hold fewer, or none, before the end.
//
// The cursor is the last key examined, a 0x1f byte, and the list-keys
// cursor of the page to continue in: a call that stops within Workers KV's
// page (limit below its minimum of 10, or expired keys left out) asks for
// that page again and skips to after the key. Every cursor begins with
// prefix, so that one from another listing is refused.
// The request counts against WithRequestBudget and waits for no 429
// backoff: it fails with the backoff's error instead.
func (s *Store) List(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	if err := adapter.ListArgs(limit); err != nil {
		return nil, "", opError(adapter.OpList, prefix, err)
	}
	if s.isClosed() {
		return nil, "", opError(adapter.OpList, prefix, ErrClosed)
	}
	after, kvCursor := cursor, ""
	if i := strings.LastIndex(cursor, cursorSep); i >= 0 {
		after, kvCursor = cursor[:i], cursor[i+len(cursorSep):]
	}
	if cursor != "" && !strings.HasPrefix(after, prefix) {
		return nil, "", opError(adapter.OpList, prefix, fmt.Errorf("cursor %q does not belong to a listing of prefix %q", cursor, prefix))
	}
	var params kv.NamespaceKeyListParams
	params.Limit.Value, params.Limit.Present = float64(min(max(limit, minListRequest), MaxListLimit)), true
	if prefix != "" {
		params.Prefix.Value, params.Prefix.Present = prefix, true
	}
	if kvCursor != "" {
		params.Cursor.Value, params.Cursor.Present = kvCursor, true
	}
	page, err := s.listKeys(ctx, params)
	if err != nil {
		return nil, "", opError(adapter.OpList, prefix, err)
	}
	now := s.clock()
	keys := make([]string, 0, min(limit, len(page.Result)))
	last := after // the last key examined
	for _, k := range page.Result {
		if after != "" && k.Name <= after {
			continue // listed by an earlier call
		}
		if len(keys) == limit {
			// Stop within KV's page: the next call asks for it again.
			return keys, last + cursorSep + kvCursor, nil
		}
		last = k.Name
		if exp, ok := metadataExpiry(k.Metadata); ok && !now.Before(exp) {
			live, err := s.live(ctx, k.Name)
			if err != nil {
				return nil, "", opError(adapter.OpList, prefix, err)
			}
			if !live {
				continue
			}
		}
		keys = append(keys, k.Name)
	}
	if page.ResultInfo.Cursor == "" {
		return keys, "", nil
	}
	if last == "" {
		// The first page, empty; every later key is after prefix.
		last = prefix
	}
	return keys, last + cursorSep + page.ResultInfo.Cursor, nil
}

// metadataExpiry reads the logical expiry from a key's metadata as the
// list-keys API returns it (a JSON object, or the JSON string it was
// written as); ok is false for a key this package did not write.
func metadataExpiry(m any) (exp time.Time, ok bool) {
	b, err := json.Marshal(m)
	if err != nil {
		return time.Time{}, false
	}
	var str string
	if json.Unmarshal(b, &str) == nil {
		b = []byte(str)
	}
	var md metadata
	if json.Unmarshal(b, &md) != nil || md.Ver == 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(md.Exp), true
}

// live reports whether Get returns a value for the key full, which the
// listing's metadata says has expired.
func (s *Store) live(ctx context.Context, full string) (bool, error) {
	_, _, err := s.Get(ctx, full)
	switch {
	case errors.Is(err, driver.ErrNotFound):
		return false, nil
	case err != nil:
		if oe, ok := err.(*driver.OpError); ok {
			err = oe.Err // the listing's error, not the read's
		}
		return false, fmt.Errorf("reading %q, whose metadata says it expired: %w", full, err)
	}
	return true, nil
}

var _ driver.ExpiryReader = (*Store)(nil)

// Expiry implements driver.ExpiryReader: the time from the store's clock
// until Get stops returning key. That is the earlier of the logical expiry
// in its value's envelope (from the read Get makes, or the cache) and the
// key's expiration as the list-keys API gives it (one list request,
// counted against WithRequestBudget), when KV deletes it;
// driver.NoExpiry for a value this package did not write that was put
// without an expiration, which only a write replaces. An absent or expired
// key is driver.ErrNotFound. A write still queued by this store, which KV
// does not list yet, counts by its logical expiry.
func (s *Store) Expiry(ctx context.Context, key string) (time.Duration, error) {
	e, err := s.lookup(ctx, adapter.OpExpiry, key)
	if err != nil {
		return 0, err
	}
	now := s.clock()
	if !e.present || !now.Before(e.exp) {
		return 0, driver.ErrNotFound
	}
	at := e.exp
	phys, err := s.expiration(ctx, key)
	if err != nil {
		return 0, opError(adapter.OpExpiry, key, err)
	}
	if !phys.IsZero() && phys.Before(at) {
		at = phys
	}
	if at.Equal(noLogicalExpiry) {
		return driver.NoExpiry, nil
	}
	return max(at.Sub(now), 0), nil
}

// expiration returns the key full's expiration as the list-keys API gives
// it: zero when it has none or is not listed.
func (s *Store) expiration(ctx context.Context, full string) (time.Time, error) {
	var params kv.NamespaceKeyListParams
	params.Limit.Value, params.Limit.Present = minListRequest, true
	params.Prefix.Value, params.Prefix.Present = full, true
	page, err := s.listKeys(ctx, params)
	if err != nil {
		return time.Time{}, err
	}
	// Keys come in lexicographic order: full, if listed, is first.
	for _, k := range page.Result {
		if k.Name == full && k.Expiration > 0 {
			return time.Unix(int64(k.Expiration), 0), nil
		}
	}
	return time.Time{}, nil
}

// listKeys sends one list-keys request of this store's account, within the
// rate limit and the request budget; a rate-limited answer backs the store
// off, and an ended context is reported as no answer.
func (s *Store) listKeys(ctx context.Context, params kv.NamespaceKeyListParams) (*pagination.CursorLimitPagination[kv.Key], error) {
	if until, limited := s.backingOff(); limited {
		return nil, &RateLimitError{Until: until}
	}
	if ok, next := s.spend(); !ok {
		return nil, &BudgetError{Next: next}
	}
	params.AccountID.Value, params.AccountID.Present = s.account, true
	page, err := s.keyList.List(ctx, s.namespace, params, s.requestOptions()...)
	if err = apiError(err); err != nil {
		if rl, ok := errors.AsType[*RateLimitError](err); ok {
			s.mu.Lock()
			s.backOffLocked(rl.Until)
			s.mu.Unlock()
		}
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			err = s.noAnswer(ctxErr)
		}
		return nil, err
	}
	return page, nil
}
