package queues_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/examples/queues"
	"github.com/kvbreaker/kvbreaker/httpbreaker"
)

// inbox is a real HTTP server that answers 503 while down and records each
// message it accepts, with when.
type inbox struct {
	*httptest.Server
	up atomic.Bool
	mu sync.Mutex
	// got is the instant each message ID was accepted, once per delivery.
	got map[string][]time.Time
}

func newInbox(t *testing.T) *inbox {
	in := &inbox{got: map[string][]time.Time{}}
	in.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !in.up.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		b, _ := io.ReadAll(r.Body)
		var m struct{ ID string }
		if err := json.Unmarshal(b, &m); err != nil || r.Method != http.MethodPost {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		in.mu.Lock()
		in.got[m.ID] = append(in.got[m.ID], time.Now())
		in.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(in.Close)
	return in
}

func (in *inbox) deliveries(id string) []time.Time {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]time.Time(nil), in.got[id]...)
}

// host is the inbox's circuit.
func (in *inbox) host(t *testing.T) string {
	h, err := kvbreaker.HostKey(in.URL)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// message is a Message to the inbox whose body names it.
func (in *inbox) message(id string) queues.Message {
	return queues.Message{ID: id, Inbox: in.URL, Body: []byte(`{"ID":"` + id + `"}`)}
}

// fleet is a Breaker with a short recovery and hold limit (the queues
// schedule in real time), and an HTTP client through it.
func fleet(t *testing.T, holdLimit time.Duration) (*kvbreaker.Breaker, *http.Client) {
	b, err := kvbreaker.New(memory.New(), kvbreaker.Settings{
		FailureThreshold: 1,
		RecoveryDelay:    time.Second,
		HoldLimit:        holdLimit,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b, &http.Client{Transport: &httpbreaker.Transport{Breaker: b}}
}

// open opens the inbox's circuit and returns until when it is restrained.
func open(t *testing.T, b *kvbreaker.Breaker, in *inbox) time.Time {
	if err := b.Failure(t.Context(), in.host(t)); err != nil {
		t.Fatal(err)
	}
	st, err := b.Inspect(t.Context(), in.host(t))
	if err != nil || st.State != kvbreaker.StateOpen {
		t.Fatalf("after a failure: %+v, %v; want open", st, err)
	}
	return st.RestrainedUntil
}

// waitFor polls cond until it holds or within runs out: the queues run in
// real time, so the bound is generous and only a hang fails.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		select {
		case <-tick.C:
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
}

// dropList collects dropped messages.
type dropList struct {
	mu  sync.Mutex
	got []queues.Message
}

func (d *dropList) add(m queues.Message) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, m)
}

func (d *dropList) list() []queues.Message {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]queues.Message(nil), d.got...)
}

// checkDelivered: the message held while the circuit was open reached the
// inbox once, not before the restraint ended.
func checkDelivered(t *testing.T, in *inbox, id string, restrained time.Time) {
	t.Helper()
	waitFor(t, 60*time.Second, "delivery of "+id, func() bool { return len(in.deliveries(id)) > 0 })
	got := in.deliveries(id)
	if len(got) != 1 {
		t.Errorf("%s delivered %d times, want once", id, len(got))
	}
	if got[0].Before(restrained) {
		t.Errorf("%s delivered at %v, before the restraint ended at %v", id, got[0], restrained)
	}
}

// checkDropped: a message for a host that stays down is dropped once
// HoldLimit has passed since its first hold, which only happens when
// HeldSince travels with every requeue.
func checkDropped(t *testing.T, d *dropList, id string, enqueued time.Time, holdLimit time.Duration) {
	t.Helper()
	waitFor(t, 30*time.Second, "drop of "+id, func() bool { return len(d.list()) > 0 })
	m := d.list()[0]
	if m.ID != id {
		t.Fatalf("dropped %q, want %q", m.ID, id)
	}
	if m.HeldSince.Before(enqueued.Add(-time.Second)) || time.Since(m.HeldSince) < holdLimit {
		t.Errorf("dropped with HeldSince %v (enqueued %v, now %v): want the first hold, at least HoldLimit %v ago",
			m.HeldSince, enqueued, time.Now(), holdLimit)
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
