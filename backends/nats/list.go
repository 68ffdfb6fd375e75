package nats

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// listConsumerIdle is how long a List page's consumer outlives a client
// that died before deleting it.
const listConsumerIdle = 30 * time.Second

// List implements driver.Lister. One page is one short-lived consumer
// (created, fetched from without waiting, deleted): the bucket keeps one
// message per key, so delivering from a stream sequence on delivers each
// key's current message once, in sequence order, headers only. The cursor
// is the last sequence of the page; a key rewritten between pages moves
// past it and is listed later. Markers (deletes, expiries) are not keys. A
// subject no Store wrote is not listed. Keys are filtered on the server
// by prefix's complete "/"-segments and here by the rest.
func (s *Store) List(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	const op = adapter.OpList
	if err := s.gate().List(prefix, limit); err != nil {
		return nil, "", err
	}
	start := uint64(1)
	if cursor != "" {
		n, err := strconv.ParseUint(cursor, 10, 64)
		if err != nil {
			return nil, "", opError(op, prefix, fmt.Errorf("cursor %q is none this Store made", cursor))
		}
		start = n + 1
	}
	if err := ctx.Err(); err != nil {
		return nil, "", s.callError(op, prefix, err)
	}
	cfg := jetstream.ConsumerConfig{
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       start,
		AckPolicy:         jetstream.AckNonePolicy,
		FilterSubject:     s.subjPre + filterFor(prefix),
		HeadersOnly:       true,
		MemoryStorage:     true,
		Replicas:          1,
		InactiveThreshold: listConsumerIdle,
	}
	// On a replicated bucket the consumer may run on a follower, which
	// answers from what it has applied: a key written just before may be
	// missing from the page, as the contract allows for keys written
	// during a listing.
	cons, err := s.js.CreateConsumer(ctx, s.stream, cfg)
	if err != nil {
		return nil, "", s.callError(op, prefix, err)
	}
	name := cons.CachedInfo().Name
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		_ = s.js.DeleteConsumer(dctx, s.stream, name) // else it lapses after listConsumerIdle
		cancel()
	}()
	pendingNow := cons.CachedInfo().NumPending
	if pendingNow == 0 {
		return nil, "", nil
	}
	msgs, err := fetch(ctx, cons, int(min(uint64(limit), pendingNow)))
	if err != nil {
		return nil, "", s.callError(op, prefix, err)
	}
	var keys []string
	var last, pending uint64
	n := 0
	for _, m := range msgs {
		n++
		meta, err := m.Metadata()
		if err != nil {
			return nil, "", s.callError(op, prefix, err)
		}
		last, pending = meta.Sequence.Stream, meta.NumPending
		if isMarker(m.Headers()) {
			continue
		}
		key, ok := decodeKey(strings.TrimPrefix(m.Subject(), s.subjPre))
		if ok && strings.HasPrefix(key, prefix) {
			keys = append(keys, key)
		}
	}
	if n == 0 || pending == 0 {
		return keys, "", nil
	}
	return keys, strconv.FormatUint(last, 10), nil
}

// fetchWait bounds a page's wait for the messages its consumer counted
// as pending (fewer arrive when some expired meanwhile).
const fetchWait = time.Second

// fetch asks cons for n messages, which it says it has, and returns them
// as they come (Fetch, not FetchNoWait: on a cluster a new consumer
// answers "no messages" for a moment after the create's answer), asking
// again while no server answers for the consumer (the server's interest
// reaches this one a moment after the consumer exists).
func fetch(ctx context.Context, cons jetstream.Consumer, n int) ([]jetstream.Msg, error) {
	wait := 5 * time.Millisecond
	for {
		maxWait := fetchWait
		if d, ok := ctx.Deadline(); ok {
			maxWait = min(maxWait, time.Until(d))
		}
		if maxWait < time.Millisecond {
			return nil, context.DeadlineExceeded
		}
		batch, err := cons.Fetch(n, jetstream.FetchMaxWait(maxWait))
		if err != nil && !errors.Is(err, natsgo.ErrNoResponders) {
			return nil, err
		}
		var msgs []jetstream.Msg
		if err == nil {
			for m := range batch.Messages() {
				msgs = append(msgs, m)
			}
			err = batch.Error()
		}
		if len(msgs) > 0 || err == nil || errors.Is(err, jetstream.ErrNoMessages) || errors.Is(err, natsgo.ErrTimeout) {
			return msgs, nil
		}
		if !errors.Is(err, natsgo.ErrNoResponders) {
			return nil, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
}

// Expiry implements driver.ExpiryReader: the message's TTL (Nats-TTL)
// less its age by the server's timestamp and this machine's clock, at
// least 0; driver.NoExpiry for a message without a TTL (another program's
// put). An absent key, or one whose last message is a marker, is
// driver.ErrNotFound.
func (s *Store) Expiry(ctx context.Context, key string) (time.Duration, error) {
	const op = adapter.OpExpiry
	if s.closed.Load() {
		return 0, opError(op, key, ErrClosed)
	}
	m, err := s.last(ctx, key)
	if err != nil {
		return 0, s.callError(op, key, err)
	}
	if m == nil || m.marker() {
		return 0, driver.ErrNotFound
	}
	return remaining(m, time.Now()), nil
}

// remaining is how long m has left at now.
func remaining(m *storedMsg, now time.Time) time.Duration {
	v := m.header.Get(hdrTTL)
	if v == "" || strings.EqualFold(v, "never") {
		return driver.NoExpiry
	}
	var ttl time.Duration
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		ttl = time.Duration(n) * time.Second
	} else if d, err := time.ParseDuration(v); err == nil {
		ttl = d.Truncate(time.Second) // the server counts whole seconds
	} else {
		return driver.NoExpiry
	}
	return max(0, m.Time.Add(ttl).Sub(now))
}

var (
	_ driver.Lister       = (*Store)(nil)
	_ driver.ExpiryReader = (*Store)(nil)
)
