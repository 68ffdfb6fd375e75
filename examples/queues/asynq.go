package queues

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/hibiken/asynq"
)

// TaskDeliver is the asynq task type of a delivery; its payload is a
// Message in JSON.
const TaskDeliver = "activity:deliver"

// NewDeliverTask returns the task that delivers m.
func NewDeliverTask(m Message) (*asynq.Task, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return asynq.NewTask(TaskDeliver, b), nil
}

// AsynqHandler delivers TaskDeliver tasks through client. A held message
// goes back on the queue as a new task processed at RetryAt, carrying its
// HeldSince, and the held task completes; a failed delivery returns its
// error, so asynq retries the task as it is (its payload already carries
// HeldSince, if it was held before). dropped, if not nil, is told of each
// message dropped for HoldLimit.
//
// The new task is enqueued before the held one completes: a crash between
// the two delivers the message twice rather than never.
func AsynqHandler(queue *asynq.Client, client *http.Client, dropped func(Message)) asynq.HandlerFunc {
	return func(ctx context.Context, t *asynq.Task) error {
		var m Message
		if err := json.Unmarshal(t.Payload(), &m); err != nil {
			return asynq.SkipRetry // not a Message: retrying cannot help
		}
		outcome, retryAt, err := Deliver(ctx, client, &m)
		switch {
		case err != nil:
			return err
		case outcome == Dropped && dropped != nil:
			dropped(m)
		case outcome == Held:
			next, err := NewDeliverTask(m)
			if err != nil {
				return err
			}
			_, err = queue.EnqueueContext(ctx, next, asynq.ProcessAt(retryAt))
			return err
		}
		return nil
	}
}
