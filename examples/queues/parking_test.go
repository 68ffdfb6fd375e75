package queues_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker/examples/queues"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
)

func newListQueue(t *testing.T) *queues.ListQueue {
	rs := redistest.MustStart(t)
	c := redis.NewClient(&redis.Options{Addr: rs.Addr()})
	t.Cleanup(func() { c.Close() })
	return &queues.ListQueue{Redis: c, Queue: "{d}:queue", Processing: "{d}:processing", Parking: "{d}:parking", RetryDelay: 100 * time.Millisecond}
}

// run starts the workers and the releaser until the test ends.
func run(t *testing.T, q *queues.ListQueue, work func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := work(ctx); err != nil {
			t.Error(err)
		}
	})
	wg.Go(func() { q.RunReleaser(ctx, 50*time.Millisecond, func(err error) { t.Error(err) }) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// TestParkingRelease: a parked message stays out of the queue until due,
// and Release moves it back once, however many releasers run.
func TestParkingRelease(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	q := newListQueue(t)
	due := time.Now().Add(time.Hour)
	if err := q.Park(ctx, queues.Message{ID: "p1"}, due); err != nil {
		t.Fatal(err)
	}
	if n, err := q.Release(ctx, due.Add(-time.Millisecond)); err != nil || n != 0 {
		t.Fatalf("Release before due: moved %d, %v", n, err)
	}
	var wg sync.WaitGroup
	moved := make(chan int, 4)
	for range 4 {
		wg.Go(func() {
			n, err := q.Release(ctx, due)
			if err != nil {
				t.Error(err)
			}
			moved <- n
		})
	}
	wg.Wait()
	close(moved)
	total := 0
	for n := range moved {
		total += n
	}
	if l := q.Redis.LLen(ctx, q.Queue).Val(); total != 1 || l != 1 {
		t.Errorf("4 releasers moved %d, queue holds %d; want 1 and 1", total, l)
	}
}

func TestParkingHeldThenDelivered(t *testing.T) {
	t.Parallel()
	q := newListQueue(t)
	in := newInbox(t)
	b, client := fleet(t, time.Hour)
	restrained := open(t, b, in)
	run(t, q, func(ctx context.Context) error { return q.Work(ctx, client, nil) })
	if err := q.Push(t.Context(), in.message("m1")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "m1 parked", func() bool { return q.Redis.ZCard(t.Context(), q.Parking).Val() > 0 })
	z := q.Redis.ZRangeWithScores(t.Context(), q.Parking, 0, -1).Val()
	if len(z) != 1 || int64(z[0].Score) < restrained.UnixMilli() {
		t.Errorf("parked %v, want one message due not before the restraint's end %v", z, restrained)
	}
	in.up.Store(true)
	checkDelivered(t, in, "m1", restrained)
	waitFor(t, 10*time.Second, "processing list emptied", func() bool { return q.Redis.LLen(t.Context(), q.Processing).Val() == 0 })
}

func TestParkingHoldLimitDrops(t *testing.T) {
	t.Parallel()
	q := newListQueue(t)
	in := newInbox(t) // down throughout
	const holdLimit = 3 * time.Second
	b, client := fleet(t, holdLimit)
	open(t, b, in)
	var dropped dropList
	run(t, q, func(ctx context.Context) error { return q.Work(ctx, client, dropped.add) })
	enqueued := time.Now()
	if err := q.Push(t.Context(), in.message("m2")); err != nil {
		t.Fatal(err)
	}
	checkDropped(t, &dropped, "m2", enqueued, holdLimit)
}
