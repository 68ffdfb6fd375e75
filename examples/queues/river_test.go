package queues_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql's "pgx" driver
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/kvbreaker/kvbreaker/examples/queues"
	"github.com/kvbreaker/kvbreaker/internal/testservers/pgtest"
)

// soon retries a failed job 100 ms later (River's default waits seconds,
// then minutes).
type soon struct{}

func (soon) NextRetry(*rivertype.JobRow) time.Time { return time.Now().Add(100 * time.Millisecond) }

func TestRiverHeldThenDelivered(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pg := pgtest.MustStart(t)
	db, err := sql.Open("pgx", pg.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	driver := riverdatabasesql.New(db)
	m, err := rivermigrate.New(driver, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		t.Fatal(err)
	}

	in := newInbox(t)
	b, client := fleet(t, time.Hour)
	restrained := open(t, b, in)
	workers := river.NewWorkers()
	river.AddWorker(workers, &queues.DeliverWorker{DB: db, Client: client})
	rc, err := river.NewClient(driver, &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 2}},
		Workers:           workers,
		FetchCooldown:     20 * time.Millisecond,
		FetchPollInterval: 50 * time.Millisecond,
		RetryPolicy:       soon{},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// t.Context is done by now; Stop waits for the jobs at work.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := rc.Stop(ctx); err != nil {
			t.Error(err)
		}
	})

	if _, err := rc.Insert(ctx, queues.DeliverArgs{Message: in.message("m1")}, nil); err != nil {
		t.Fatal(err)
	}
	// Held: the job completed and a new one is scheduled at RetryAt, with
	// the first hold's instant in its args.
	var jobs []*rivertype.JobRow
	waitFor(t, 30*time.Second, "the held job's requeue", func() bool {
		res, err := rc.JobList(ctx, river.NewJobListParams().States(rivertype.JobStateScheduled))
		if err != nil {
			t.Fatal(err)
		}
		jobs = res.Jobs
		return len(jobs) > 0
	})
	var args queues.DeliverArgs
	if err := jsonUnmarshal(jobs[0].EncodedArgs, &args); err != nil {
		t.Fatal(err)
	}
	// Not before the restraint's end: under load the requeue seen may be a
	// later one (held again at the release interval while a probe is out).
	if jobs[0].ScheduledAt.Before(restrained) || args.HeldSince.IsZero() || args.ID != "m1" {
		t.Errorf("requeued %+v at %v; want m1 with HeldSince, not before the restraint's end %v", args, jobs[0].ScheduledAt, restrained)
	}
	in.up.Store(true)
	checkDelivered(t, in, "m1", restrained)
}
