package queues

import (
	"context"
	"database/sql"
	"net/http"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
)

// DeliverArgs is River's job of a delivery.
type DeliverArgs struct {
	Message
}

// Kind implements river.JobArgs.
func (DeliverArgs) Kind() string { return "activity_deliver" }

// DeliverWorker delivers DeliverArgs jobs through Client. A held message
// becomes a new job scheduled at RetryAt, carrying its HeldSince, inserted
// in the transaction that completes the held job, so the message is either
// still the held job or already the scheduled one, whatever crashes. A
// failed delivery returns its error, so River retries the job as it is.
// Dropped, if not nil, is told of each message dropped for HoldLimit.
type DeliverWorker struct {
	river.WorkerDefaults[DeliverArgs]
	DB      *sql.DB
	Client  *http.Client
	Dropped func(Message)
}

// Work implements river.Worker.
func (w *DeliverWorker) Work(ctx context.Context, job *river.Job[DeliverArgs]) error {
	m := job.Args.Message
	outcome, retryAt, err := Deliver(ctx, w.Client, &m)
	switch {
	case err != nil:
		return err
	case outcome == Dropped && w.Dropped != nil:
		w.Dropped(m)
	case outcome == Held:
		tx, err := w.DB.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		client := river.ClientFromContext[*sql.Tx](ctx)
		if _, err := client.InsertTx(ctx, tx, DeliverArgs{m}, &river.InsertOpts{ScheduledAt: retryAt}); err != nil {
			return err
		}
		if _, err := river.JobCompleteTx[*riverdatabasesql.Driver](ctx, tx, job); err != nil {
			return err
		}
		return tx.Commit()
	}
	return nil
}
