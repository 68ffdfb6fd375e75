package nats_test

import (
	"errors"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	kvnats "github.com/kvbreaker/kvbreaker/backends/nats"
	"github.com/kvbreaker/kvbreaker/driver"
)

// TestNoRespondersSentAgain: a write made while no server answers for the
// bucket's subjects (as a cluster member that has not yet heard of a new
// stream, or the moment between an operator's delete and create of the
// bucket) is sent again and succeeds once the stream answers; the
// control, a bucket that stays gone, fails with nats.ErrNoResponders after
// NoRespondersWait, not at once and not for ever.
func TestNoRespondersSentAgain(t *testing.T) {
	ctx := t.Context()
	st, err := kvnats.New(ctx, connect(t, server.URL()), "noresponders")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	js, err := jetstream.New(connect(t, server.URL()))
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(ctx, "KV_noresponders")
	if err != nil {
		t.Fatal(err)
	}
	cfg := stream.CachedInfo().Config

	// The control: the bucket stays gone.
	if err := js.DeleteKeyValue(ctx, "noresponders"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = st.CompareAndSwap(ctx, "gone.example", driver.NoVersion, []byte("x"), time.Minute)
	took := time.Since(start)
	if !errors.Is(err, natsgo.ErrNoResponders) {
		t.Fatalf("a write to a deleted bucket = %v, want nats.ErrNoResponders", err)
	}
	if took < kvnats.NoRespondersWait {
		t.Fatalf("a write to a deleted bucket failed after %v, before NoRespondersWait (%v): it was not sent again", took, kvnats.NoRespondersWait)
	}

	// The bucket comes back while a write waits.
	created := make(chan time.Time, 1)
	go func() {
		time.Sleep(200 * time.Millisecond) // the write below meets no responders first
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			t.Error(err)
		}
		created <- time.Now()
	}()
	start = time.Now()
	v, err := st.CompareAndSwap(ctx, "back.example", driver.NoVersion, []byte("x"), time.Minute)
	at := <-created
	if at.Sub(start) >= kvnats.NoRespondersWait {
		t.Skipf("undecided: the stream took %v to come back, longer than NoRespondersWait (%v); the write = %v, %v", at.Sub(start), kvnats.NoRespondersWait, v, err)
	}
	if err != nil {
		t.Fatalf("a write while the stream came back (%v after the write began) = %v, want it sent again and applied", at.Sub(start), err)
	}
	if _, got, err := st.Get(ctx, "back.example"); err != nil || got != v {
		t.Fatalf("Get after the write = version %v, %v; want %v", got, err, v)
	}
}
