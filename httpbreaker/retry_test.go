package httpbreaker_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/httpbreaker"
)

// inbox is a real HTTP server that answers 503 while down and records the
// bodies it accepts.
type inbox struct {
	*httptest.Server
	up    atomic.Bool
	hits  atomic.Int64
	mu    sync.Mutex
	taken []string
}

func newInbox(t *testing.T) *inbox {
	in := &inbox{}
	in.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in.hits.Add(1)
		b, _ := io.ReadAll(r.Body)
		if !in.up.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		in.mu.Lock()
		in.taken = append(in.taken, string(b))
		in.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
	}))
	t.Cleanup(in.Close)
	return in
}

func (in *inbox) bodies() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]string(nil), in.taken...)
}

// body is a request body that cannot be read once closed, as a file's or a
// pipe's (strings.NewReader's body ignores Close).
type body struct {
	*strings.Reader
	closed atomic.Bool
}

func newBody(s string) *body { return &body{Reader: strings.NewReader(s)} }

func (b *body) Read(p []byte) (int, error) {
	if b.closed.Load() {
		return 0, errors.New("read of a closed body")
	}
	return b.Reader.Read(p)
}

func (b *body) Close() error { b.closed.Store(true); return nil }

// TestPOSTSurvivesHold: a POST whose body a failed attempt consumed, then
// held, is delivered whole by RetryRequest once the circuit lets it
// through, and the held error is found through the client's *url.Error.
func TestPOSTSurvivesHold(t *testing.T) {
	in := newInbox(t)
	c := newClock()
	b := newBreaker(t, memory.New(), c)
	client := &http.Client{Transport: &httpbreaker.Transport{Breaker: b}}
	const activity = `{"type":"Create","object":{"content":"hello"}}`
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, in.URL, newBody(activity))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(activity))
	req.GetBody = func() (io.ReadCloser, error) { return newBody(activity), nil }
	for range threshold {
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		// The failed attempt read the body: the next one replays it.
		if req, err = httpbreaker.RetryRequest(req, nil); err != nil {
			t.Fatal(err)
		}
	}
	hits := in.hits.Load()
	_, err = client.Do(req)
	if ue, ok := errors.AsType[*url.Error](err); !ok || ue.Op != "Post" {
		t.Fatalf("held POST: %v (%T), want a *url.Error from the client", err, err)
	}
	held, ok := errors.AsType[*kvbreaker.HeldError](err)
	if !ok || !errors.Is(err, kvbreaker.ErrHeld) || held.HeldSince.IsZero() {
		t.Fatalf("held POST: %v, want a *kvbreaker.HeldError matching ErrHeld", err)
	}
	if in.hits.Load() != hits {
		t.Error("a held request reached the host")
	}

	c.Advance(recovery)
	in.up.Store(true)
	retry, err := httpbreaker.RetryRequest(req, held)
	if err != nil {
		t.Fatal(err)
	}
	if got := kvbreaker.HeldSince(retry.Context()); !got.Equal(held.HeldSince) {
		t.Errorf("retry carries HeldSince %v, want %v", got, held.HeldSince)
	}
	resp, err := client.Do(retry)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := in.bodies(); resp.StatusCode != http.StatusAccepted || len(got) != 1 || got[0] != activity {
		t.Errorf("after recovery: %s, inbox took %q; want 202 and the activity whole", resp.Status, got)
	}
}

func TestRetryRequestNoBody(t *testing.T) {
	// A body of a reader http.NewRequest cannot rewind has no GetBody.
	req, err := http.NewRequest(http.MethodPost, "http://inbox.example/", io.MultiReader(strings.NewReader("x")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := httpbreaker.RetryRequest(req, nil); !errors.Is(err, httpbreaker.ErrNoBody) {
		t.Errorf("RetryRequest without GetBody: %v, want ErrNoBody", err)
	}
	get, err := http.NewRequest(http.MethodGet, "http://inbox.example/", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := httpbreaker.RetryRequest(get, nil); err != nil || r.Body != nil {
		t.Errorf("RetryRequest of a GET: %v, body %v", err, r.Body)
	}
	empty, err := http.NewRequest(http.MethodPost, "http://inbox.example/", bytes.NewReader(nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := httpbreaker.RetryRequest(empty, nil); err != nil {
		t.Errorf("RetryRequest of an empty body: %v", err)
	}
}

// retrier is a retrying RoundTripper: up to n attempts while the answer is
// an error or a 5xx, stopping at once on a hold or a drop.
type retrier struct {
	next http.RoundTripper
	n    int
}

func (r retrier) RoundTrip(req *http.Request) (*http.Response, error) {
	for i := 1; ; i++ {
		resp, err := r.next.RoundTrip(req)
		if errors.Is(err, kvbreaker.ErrHeld) || errors.Is(err, kvbreaker.ErrDropped) {
			return nil, err
		}
		if i == r.n || err == nil && resp.StatusCode < 500 {
			return resp, err
		}
		if resp != nil {
			resp.Body.Close()
		}
		if req, err = httpbreaker.RetryRequest(req, nil); err != nil {
			return nil, err
		}
	}
}

func post(t *testing.T, client *http.Client, url string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if resp != nil {
		resp.Body.Close()
	}
	return resp, err
}

// TestRetryOverTransport: a retrying client over the Transport stops
// calling a host once the circuit opens; each attempt is counted.
func TestRetryOverTransport(t *testing.T) {
	in := newInbox(t) // down
	b := newBreaker(t, memory.New(), newClock())
	client := &http.Client{Transport: retrier{next: &httpbreaker.Transport{Breaker: b}, n: 10}}
	_, err := post(t, client, in.URL)
	if !errors.Is(err, kvbreaker.ErrHeld) {
		t.Fatalf("POST to a down host: %v, want held once the circuit opened", err)
	}
	host, _ := kvbreaker.HostKey(in.URL)
	st, err := b.Inspect(t.Context(), host)
	if err != nil {
		t.Fatal(err)
	}
	if n := in.hits.Load(); n != threshold || st.State != kvbreaker.StateOpen {
		t.Errorf("host called %d times, circuit %v; want %d calls (the threshold) and open", n, st.State, threshold)
	}
}

// TestRetryUnderTransport: a retrying client as the Transport's Base hides
// its attempts from the Breaker: it keeps calling a down host, and records
// one outcome per request.
func TestRetryUnderTransport(t *testing.T) {
	in := newInbox(t) // down
	b := newBreaker(t, memory.New(), newClock())
	client := &http.Client{Transport: &httpbreaker.Transport{Breaker: b, Base: retrier{next: http.DefaultTransport, n: 10}}}
	resp, err := post(t, client, in.URL)
	if err != nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("POST to a down host: %v, %v; want the last 503", resp, err)
	}
	host, _ := kvbreaker.HostKey(in.URL)
	st, err := b.Inspect(t.Context(), host)
	if err != nil {
		t.Fatal(err)
	}
	if n := in.hits.Load(); n != 10 || st.State != kvbreaker.StateClosed || len(st.Failures) != 1 {
		t.Errorf("host called %d times, circuit %v with %d failures; want 10 calls and one failure recorded", n, st.State, len(st.Failures))
	}
}
