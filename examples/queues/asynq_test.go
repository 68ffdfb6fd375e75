package queues_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/kvbreaker/kvbreaker/examples/queues"
	"github.com/kvbreaker/kvbreaker/internal/testservers/redistest"
)

// startAsynq runs an asynq server over redis with the delivery handler,
// polling scheduled tasks often and retrying failures quickly.
func startAsynq(t *testing.T, opt asynq.RedisClientOpt, h asynq.Handler) {
	srv := asynq.NewServer(opt, asynq.Config{
		Concurrency:              2,
		DelayedTaskCheckInterval: 50 * time.Millisecond,
		RetryDelayFunc:           func(int, error, *asynq.Task) time.Duration { return 100 * time.Millisecond },
		LogLevel:                 asynq.FatalLevel,
	})
	if err := srv.Start(h); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
}

func TestAsynqHeldThenDelivered(t *testing.T) {
	t.Parallel()
	rs := redistest.MustStart(t)
	opt := asynq.RedisClientOpt{Addr: rs.Addr()}
	q := asynq.NewClient(opt)
	t.Cleanup(func() { q.Close() })
	in := newInbox(t)
	b, client := fleet(t, time.Hour)
	restrained := open(t, b, in)
	startAsynq(t, opt, queues.AsynqHandler(q, client, nil))

	task, err := queues.NewDeliverTask(in.message("m1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.EnqueueContext(t.Context(), task); err != nil {
		t.Fatal(err)
	}
	// Held: back on the queue as a task scheduled at RetryAt, with the
	// first hold's instant in its payload.
	insp := asynq.NewInspector(opt)
	t.Cleanup(func() { insp.Close() })
	var scheduled []*asynq.TaskInfo
	waitFor(t, 30*time.Second, "the held task's requeue", func() bool {
		scheduled, _ = insp.ListScheduledTasks("default")
		return len(scheduled) > 0
	})
	var m queues.Message
	if err := json.Unmarshal(scheduled[0].Payload, &m); err != nil {
		t.Fatal(err)
	}
	// asynq keeps ProcessAt to the second.
	if at := scheduled[0].NextProcessAt; at.Before(restrained.Truncate(time.Second)) || m.HeldSince.IsZero() || m.ID != "m1" {
		t.Errorf("requeued %+v at %v; want m1 with HeldSince, at the restraint's end %v", m, at, restrained)
	}
	in.up.Store(true)
	checkDelivered(t, in, "m1", restrained)
}

func TestAsynqHoldLimitDrops(t *testing.T) {
	t.Parallel()
	rs := redistest.MustStart(t)
	opt := asynq.RedisClientOpt{Addr: rs.Addr()}
	q := asynq.NewClient(opt)
	t.Cleanup(func() { q.Close() })
	in := newInbox(t) // down throughout
	const holdLimit = 3 * time.Second
	b, client := fleet(t, holdLimit)
	open(t, b, in)
	var dropped dropList
	startAsynq(t, opt, queues.AsynqHandler(q, client, dropped.add))

	task, err := queues.NewDeliverTask(in.message("m2"))
	if err != nil {
		t.Fatal(err)
	}
	enqueued := time.Now()
	if _, err := q.EnqueueContext(t.Context(), task); err != nil {
		t.Fatal(err)
	}
	checkDropped(t, &dropped, "m2", enqueued, holdLimit)
}
