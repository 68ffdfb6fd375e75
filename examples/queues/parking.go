package queues

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// ListQueue is a queue that cannot delay: a Redis list that producers
// LPUSH Messages (JSON) onto and workers take from the other end. A held
// message cannot go back on it at RetryAt, so it waits in Parking, a
// sorted set scored by the instant it is due, which a ticker (Release,
// Run) moves back onto the list.
//
// A worker moves each message it takes onto Processing (BLMOVE) and removes
// it from there only once it is delivered, parked or dropped, so a worker
// that crashes leaves it there for an operator or a sweeper to requeue,
// instead of losing it. In Redis Cluster the three keys must share a hash
// tag ("{deliveries}:queue") so the release script can touch them together.
type ListQueue struct {
	Redis      redis.UniversalClient
	Queue      string // the list producers push onto
	Processing string // the list of messages a worker has taken
	Parking    string // the sorted set of held messages, by due instant
	// RetryDelay is how long a failed delivery waits in Parking before
	// its retry.
	RetryDelay time.Duration
}

// Push puts m on the queue.
func (q *ListQueue) Push(ctx context.Context, m Message) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return q.Redis.LPush(ctx, q.Queue, b).Err()
}

// Park keeps m out of the queue until at.
func (q *ListQueue) Park(ctx context.Context, m Message, at time.Time) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return q.Redis.ZAdd(ctx, q.Parking, redis.Z{Score: float64(at.UnixMilli()), Member: b}).Err()
}

// release moves up to ARGV[2] members due by ARGV[1] from the parking set
// to the queue, in one step: any number of workers may run the ticker, and
// each due message is moved once.
var release = redis.NewScript(`
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
for _, m in ipairs(due) do
	redis.call('ZREM', KEYS[1], m)
	redis.call('LPUSH', KEYS[2], m)
end
return #due`)

// Release moves the messages due by now from Parking back onto the queue,
// at most 1000 a call, and returns how many it moved.
func (q *ListQueue) Release(ctx context.Context, now time.Time) (int, error) {
	n, err := release.Run(ctx, q.Redis, []string{q.Parking, q.Queue}, strconv.FormatInt(now.UnixMilli(), 10), 1000).Int()
	if err != nil {
		return 0, fmt.Errorf("release %s: %w", q.Parking, err)
	}
	return n, nil
}

// RunReleaser calls Release every interval until ctx ends; a message is
// back on the queue at most interval after it is due. An error of one
// round is passed to onErr (if not nil), and the next round tries again.
func (q *ListQueue) RunReleaser(ctx context.Context, interval time.Duration, onErr func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for {
				n, err := q.Release(ctx, now)
				if err != nil && onErr != nil && ctx.Err() == nil {
					onErr(err)
				}
				if err != nil || n < 1000 {
					break
				}
			}
		}
	}
}

// Work takes messages from the queue and delivers them through client
// until ctx ends: a held message is parked until RetryAt with its
// HeldSince, a failed one for RetryDelay, a dropped one passed to dropped
// (if not nil).
func (q *ListQueue) Work(ctx context.Context, client *http.Client, dropped func(Message)) error {
	for {
		b, err := q.Redis.BLMove(ctx, q.Queue, q.Processing, "RIGHT", "LEFT", time.Second).Bytes()
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, redis.Nil):
			continue // nothing within the second: wait again
		case err != nil:
			return err
		}
		if err := q.handle(ctx, client, b, dropped); err != nil {
			return err
		}
		// Done with it: delivered, parked or dropped.
		if err := q.Redis.LRem(ctx, q.Processing, 1, b).Err(); err != nil {
			return err
		}
	}
}

func (q *ListQueue) handle(ctx context.Context, client *http.Client, b []byte, dropped func(Message)) error {
	var m Message
	if err := json.Unmarshal(b, &m); err != nil {
		return nil // not a Message: nothing can deliver it
	}
	outcome, retryAt, err := Deliver(ctx, client, &m)
	switch {
	case err != nil:
		return q.Park(ctx, m, time.Now().Add(q.RetryDelay))
	case outcome == Held:
		return q.Park(ctx, m, retryAt)
	case outcome == Dropped && dropped != nil:
		dropped(m)
	}
	return nil
}
