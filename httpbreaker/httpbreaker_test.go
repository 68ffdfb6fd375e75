package httpbreaker_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/httpbreaker"
)

// clock is a Breaker clock the test moves by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

const (
	threshold = 3
	recovery  = time.Minute
	holdLimit = time.Hour
)

func newBreaker(t testing.TB, store driver.Store, c *clock) *kvbreaker.Breaker {
	t.Helper()
	b, err := kvbreaker.New(store, kvbreaker.Settings{
		FailureThreshold: threshold,
		RecoveryDelay:    recovery,
		FailureWindow:    10 * time.Minute,
		HoldLimit:        holdLimit,
		Clock:            c.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type fixture struct {
	clock   *clock
	store   *memory.Store
	breaker *kvbreaker.Breaker
	client  *http.Client
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	c := newClock()
	store := memory.New(memory.WithClock(c.Now))
	b := newBreaker(t, store, c)
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	return &fixture{clock: c, store: store, breaker: b,
		client: &http.Client{Transport: &httpbreaker.Transport{Base: base, Breaker: b}}}
}

// countingServer answers with status and counts the requests it sees.
func countingServer(t testing.TB, status *atomic.Int32) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if s := int(status.Load()); s == http.StatusTooManyRequests || s == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "7")
		}
		w.WriteHeader(int(status.Load()))
		_, _ = io.WriteString(w, "body")
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func status(code int) *atomic.Int32 {
	var s atomic.Int32
	s.Store(int32(code))
	return &s
}

// refusedURL returns a URL on 127.0.0.1 whose port refuses connections: it
// was listened on, then closed.
func refusedURL(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr + "/inbox"
}

func (f *fixture) get(t testing.TB, ctx context.Context, url string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := f.client.Do(req)
	if err == nil {
		t.Cleanup(func() { _ = resp.Body.Close() })
	}
	return resp, err
}

func (f *fixture) state(t testing.TB, url string) kvbreaker.Status {
	t.Helper()
	host, err := kvbreaker.HostKey(url)
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.breaker.Inspect(context.Background(), host)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestDeadHostOpensThenHolds(t *testing.T) {
	f := newFixture(t)
	url := refusedURL(t)
	for i := range threshold {
		_, err := f.get(t, t.Context(), url)
		if err == nil || errors.Is(err, kvbreaker.ErrHeld) {
			t.Fatalf("request %d to a refused port: err = %v, want a connection error", i, err)
		}
	}
	if st := f.state(t, url); st.State != kvbreaker.StateOpen {
		t.Fatalf("after %d refused connections: state %v, want open", threshold, st.State)
	}
	_, err := f.get(t, t.Context(), url)
	var held *kvbreaker.HeldError
	if !errors.As(err, &held) || !errors.Is(err, kvbreaker.ErrHeld) {
		t.Fatalf("err = %v, want a *HeldError matching kvbreaker.ErrHeld", err)
	}
	if want := f.clock.Now().Add(recovery); !held.RetryAt.Equal(want) {
		t.Errorf("RetryAt = %v, want %v", held.RetryAt, want)
	}
	if !held.HeldSince.Equal(f.clock.Now()) {
		t.Errorf("HeldSince = %v, want now %v", held.HeldSince, f.clock.Now())
	}
}

func TestHoldMakesNoNetworkIO(t *testing.T) {
	f := newFixture(t)
	srv, n := countingServer(t, status(http.StatusInternalServerError))
	for range threshold {
		resp, err := f.get(t, t.Context(), srv.URL)
		if err != nil || resp.StatusCode != http.StatusInternalServerError {
			t.Fatalf("resp, err = %v, %v; want the 500 passed on", resp, err)
		}
	}
	if got := n.Load(); got != threshold {
		t.Fatalf("server saw %d requests, want %d", got, threshold)
	}
	body := &closeRecorder{Reader: io.NopCloser(nil)}
	for range 10 {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, body)
		_, err := f.client.Do(req)
		if !errors.Is(err, kvbreaker.ErrHeld) {
			t.Fatalf("err = %v, want ErrHeld", err)
		}
	}
	// The control is the first loop: the same server counted each request.
	if got := n.Load(); got != threshold {
		t.Errorf("server saw %d requests while held, want 0 more than %d", got, threshold)
	}
	if !body.closed.Load() {
		t.Error("a held request's body was not closed (RoundTrip must close it)")
	}
}

type closeRecorder struct {
	io.Reader
	closed atomic.Bool
}

func (c *closeRecorder) Read([]byte) (int, error) { return 0, io.EOF }
func (c *closeRecorder) Close() error             { c.closed.Store(true); return nil }

// It also checks the timeout stays a net.Error with Timeout() true: it failed
// 18 of 30 runs when RoundTrip wrapped every error in errors.Join (a joined
// error hides Timeout() from url.Error) before join kept the error as is.
func TestSlowHostTimeoutIsFailure(t *testing.T) {
	f := newFixture(t)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	f.client.Timeout = 50 * time.Millisecond
	for range threshold {
		_, err := f.get(t, t.Context(), srv.URL)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("err = %v, want a timeout", err)
		}
	}
	if st := f.state(t, srv.URL); st.State != kvbreaker.StateOpen {
		t.Fatalf("after %d timeouts: state %v, want open", threshold, st.State)
	}
}

func TestStatusClassification(t *testing.T) {
	for _, tc := range []struct {
		code     int
		wantOpen bool
	}{
		{http.StatusInternalServerError, true},
		{http.StatusBadGateway, true},
		{http.StatusServiceUnavailable, true}, // with Retry-After: still down
		{http.StatusNotFound, false},
		{http.StatusGone, false},
		{http.StatusTooManyRequests, false}, // rate-limited, alive
		{http.StatusOK, false},
		{http.StatusFound, false},
	} {
		t.Run(http.StatusText(tc.code), func(t *testing.T) {
			f := newFixture(t)
			f.client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			srv, n := countingServer(t, status(tc.code))
			for range threshold + 2 {
				resp, err := f.get(t, t.Context(), srv.URL)
				if tc.wantOpen && errors.Is(err, kvbreaker.ErrHeld) {
					continue
				}
				if err != nil {
					t.Fatalf("err = %v, want the %d response", err, tc.code)
				}
				if resp.StatusCode != tc.code {
					t.Fatalf("status %d, want %d", resp.StatusCode, tc.code)
				}
				if b, _ := io.ReadAll(resp.Body); string(b) != "body" {
					t.Fatalf("body %q, want it untouched", b)
				}
				if at, ok := httpbreaker.RetryAfter(resp, f.clock.Now()); (tc.code == 429 || tc.code == 503) != ok ||
					ok && !at.Equal(f.clock.Now().Add(7*time.Second)) {
					t.Fatalf("RetryAfter = %v, %v", at, ok)
				}
			}
			st := f.state(t, srv.URL)
			if got := st.State == kvbreaker.StateOpen; got != tc.wantOpen {
				t.Fatalf("state %v after %d answers %d, want open=%v", st.State, threshold+2, tc.code, tc.wantOpen)
			}
			wantN := int64(threshold + 2)
			if tc.wantOpen {
				wantN = threshold
			}
			if n.Load() != wantN {
				t.Errorf("server saw %d requests, want %d", n.Load(), wantN)
			}
		})
	}
}

func TestFlappingHostStaysClosedUntilFailuresRun(t *testing.T) {
	f := newFixture(t)
	code := status(http.StatusInternalServerError)
	srv, _ := countingServer(t, code)
	for i := range 4 * threshold {
		// fail, succeed, fail, succeed: each answer closes the circuit again.
		if i%2 == 0 {
			code.Store(500)
		} else {
			code.Store(200)
		}
		if _, err := f.get(t, t.Context(), srv.URL); err != nil {
			t.Fatalf("request %d: %v (a flapping host must not open)", i, err)
		}
	}
	code.Store(500)
	for range threshold {
		if _, err := f.get(t, t.Context(), srv.URL); err != nil {
			t.Fatal(err)
		}
	}
	if st := f.state(t, srv.URL); st.State != kvbreaker.StateOpen {
		t.Fatalf("after %d failures in a row: state %v, want open (negative control)", threshold, st.State)
	}
}

func TestCancelledRequestRecordsNothing(t *testing.T) {
	f := newFixture(t)
	started := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-r.Context().Done()
	}))
	defer srv.Close()
	for range threshold + 1 {
		ctx, cancel := context.WithCancel(t.Context())
		go func() { <-started; cancel() }()
		_, err := f.get(t, ctx, srv.URL)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	}
	if st := f.state(t, srv.URL); st.Found {
		t.Fatalf("cancelled requests were recorded: %+v", st)
	}
	// Negative control: an expired deadline is the host being slow.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
	defer cancel()
	go func() { <-started }()
	if _, err := f.get(t, ctx, srv.URL); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	if st := f.state(t, srv.URL); len(st.Failures) != 1 {
		t.Fatalf("a timed-out request: %d failures recorded, want 1", len(st.Failures))
	}
}

func TestHeldSinceInContextDrops(t *testing.T) {
	f := newFixture(t)
	url := refusedURL(t)
	for range threshold {
		_, _ = f.get(t, t.Context(), url)
	}
	_, err := f.get(t, t.Context(), url)
	held, ok := errors.AsType[*kvbreaker.HeldError](err)
	if !ok {
		t.Fatalf("err = %v, want *HeldError", err)
	}
	f.clock.Advance(holdLimit + time.Second)
	// The first-hold instant, carried by the context, makes Allow drop it.
	_, err = f.get(t, kvbreaker.WithHeldSince(t.Context(), held.HeldSince), url)
	if !errors.Is(err, kvbreaker.ErrDropped) || errors.Is(err, kvbreaker.ErrHeld) {
		t.Fatalf("err = %v, want ErrDropped (and not ErrHeld)", err)
	}
	// Control: without WithHeldSince the message counts as fresh (past the
	// recovery delay it is elected probe and goes out).
	_, err = f.get(t, t.Context(), url)
	if errors.Is(err, kvbreaker.ErrDropped) {
		t.Fatalf("a fresh message was dropped: %v", err)
	}
}

func TestManyTransportsElectOneProbe(t *testing.T) {
	const workers = 8
	c := newClock()
	store := memory.New(memory.WithClock(c.Now))
	release := make(chan struct{})
	var seen atomic.Int64
	var failing atomic.Bool
	failing.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		seen.Add(1)
		<-release // keep the probe in flight until every worker has asked
	}))
	defer srv.Close()
	clients := make([]*http.Client, workers)
	for i := range clients {
		base := &http.Transport{}
		defer base.CloseIdleConnections()
		clients[i] = &http.Client{Transport: &httpbreaker.Transport{Base: base, Breaker: newBreaker(t, store, c)}}
	}
	for i := range threshold {
		resp, err := clients[i].Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	if _, err := clients[0].Get(srv.URL); !errors.Is(err, kvbreaker.ErrHeld) {
		t.Fatalf("err = %v, want held", err)
	}
	failing.Store(false)
	c.Advance(recovery) // the restraint ends: one probe may go
	var held atomic.Int64
	var wg sync.WaitGroup
	done := make(chan struct{})
	for _, cl := range clients {
		wg.Go(func() {
			resp, err := cl.Get(srv.URL)
			if errors.Is(err, kvbreaker.ErrHeld) {
				if held.Add(1) == workers-1 {
					close(done)
				}
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
			_ = resp.Body.Close()
		})
	}
	select {
	case <-done:
	case <-t.Context().Done():
	}
	close(release)
	wg.Wait()
	if got := seen.Load(); got != 1 {
		t.Fatalf("server saw %d probes, want exactly 1", got)
	}
	if got := held.Load(); got != workers-1 {
		t.Fatalf("%d workers held, want %d", got, workers-1)
	}
}

func TestStreamingBodyAndOutcomeAtHeaders(t *testing.T) {
	f := newFixture(t)
	more := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, "first ")
		w.(http.Flusher).Flush()
		<-more
		_, _ = io.WriteString(w, "second")
	}))
	defer srv.Close()
	resp, err := f.get(t, t.Context(), srv.URL)
	if err != nil {
		close(more)
		t.Fatal(err)
	}
	// Headers are in, the body is not: the outcome is already recorded.
	st := f.state(t, srv.URL)
	close(more)
	if len(st.Failures) != 1 {
		t.Fatalf("%d failures recorded when headers arrived, want 1", len(st.Failures))
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil || string(b) != "first second" {
		t.Fatalf("body %q, %v; want it streamed untouched", b, err)
	}
	if st := f.state(t, srv.URL); len(st.Failures) != 1 {
		t.Fatalf("%d failures after the body, want still 1 (recorded once)", len(st.Failures))
	}
}

// failingStore is a real store whose Gets fail while fail is set.
type failingStore struct {
	*memory.Store
	fail atomic.Bool
}

var errStoreDown = errors.New("store down")

func (s *failingStore) Get(ctx context.Context, key string) ([]byte, driver.Version, error) {
	if s.fail.Load() {
		return nil, driver.NoVersion, errStoreDown
	}
	return s.Store.Get(ctx, key)
}

func TestStoreErrorFailsOpenAndKeepsRequestError(t *testing.T) {
	c := newClock()
	store := &failingStore{Store: memory.New(memory.WithClock(c.Now))}
	store.fail.Store(true)
	var reported atomic.Int64
	tr := &httpbreaker.Transport{Breaker: newBreaker(t, store, c),
		OnStoreError: func(string, error) { reported.Add(1) }, Base: &http.Transport{}}
	client := &http.Client{Transport: tr}
	srv, n := countingServer(t, status(http.StatusOK))
	resp, err := client.Get(srv.URL)
	if err != nil {
		t.Fatalf("store down: err = %v, want the request sent (fail open)", err)
	}
	_ = resp.Body.Close()
	if n.Load() != 1 || reported.Load() == 0 {
		t.Fatalf("server saw %d, store errors reported %d; want 1 and >0", n.Load(), reported.Load())
	}
	_, err = client.Get(refusedURL(t))
	var opErr *net.OpError
	if !errors.As(err, &opErr) || !errors.Is(err, errStoreDown) {
		t.Fatalf("err = %v, want the dial error with the store error joined", err)
	}
}

func TestNilBreaker(t *testing.T) {
	_, err := (&http.Client{Transport: &httpbreaker.Transport{}}).Get("http://127.0.0.1:1/")
	if !errors.Is(err, httpbreaker.ErrNoBreaker) {
		t.Fatalf("err = %v, want ErrNoBreaker", err)
	}
}

// ReachableFailure and Success both close the circuit, so the state cannot
// tell them apart: check the default table itself.
func TestDefaultClassify(t *testing.T) {
	for _, tc := range []struct {
		code int
		err  error
		want kvbreaker.Outcome
	}{
		{0, errors.New("connection refused"), kvbreaker.Failure},
		{0, context.DeadlineExceeded, kvbreaker.Failure},
		{500, nil, kvbreaker.Failure},
		{503, nil, kvbreaker.Failure},
		{599, nil, kvbreaker.Failure},
		{400, nil, kvbreaker.ReachableFailure},
		{404, nil, kvbreaker.ReachableFailure},
		{428, nil, kvbreaker.ReachableFailure},
		{429, nil, kvbreaker.ReachableFailure},
		{499, nil, kvbreaker.ReachableFailure},
		{200, nil, kvbreaker.Success},
		{204, nil, kvbreaker.Success},
		{301, nil, kvbreaker.Success},
		{399, nil, kvbreaker.Success},
	} {
		var resp *http.Response
		if tc.err == nil {
			resp = &http.Response{StatusCode: tc.code}
		}
		if got := httpbreaker.DefaultClassify(resp, tc.err); got != tc.want {
			t.Errorf("DefaultClassify(%d, %v) = %v, want %v", tc.code, tc.err, got, tc.want)
		}
	}
}

func TestCustomClassify(t *testing.T) {
	f := newFixture(t)
	tr := f.client.Transport.(*httpbreaker.Transport)
	// A user for whom 404 means the host lost its data: count it as down.
	tr.Classify = func(resp *http.Response, err error) kvbreaker.Outcome {
		if resp != nil && resp.StatusCode == http.StatusNotFound {
			return kvbreaker.Failure
		}
		return httpbreaker.DefaultClassify(resp, err)
	}
	srv, _ := countingServer(t, status(http.StatusNotFound))
	for range threshold {
		if _, err := f.get(t, t.Context(), srv.URL); err != nil {
			t.Fatal(err)
		}
	}
	if st := f.state(t, srv.URL); st.State != kvbreaker.StateOpen {
		t.Fatalf("state %v, want open: Classify was not used (the default keeps 404 closed)", st.State)
	}
}
