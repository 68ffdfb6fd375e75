package faultproxy_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/internal/leakcheck"

	"github.com/kvbreaker/kvbreaker/conformance/faultproxy"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

// counter is an HTTP server that applies (counts) every POST before it
// answers, the way a store applies a write.
type counter struct {
	applied atomic.Int64
	srv     *httptest.Server
}

func newCounter(t *testing.T, h2c bool) *counter {
	c := &counter{}
	c.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.Method == http.MethodPost {
			c.applied.Add(1)
		}
		io.WriteString(w, "ok")
	}))
	if h2c {
		c.srv.Config.Protocols = new(http.Protocols)
		c.srv.Config.Protocols.SetUnencryptedHTTP2(true)
	}
	c.srv.Start()
	t.Cleanup(c.srv.Close)
	return c
}

func startProxy(t *testing.T, upstream string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.Start(upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func httpClient(t *testing.T, h2c bool) *http.Client {
	tr := &http.Transport{}
	if h2c {
		tr.Protocols = new(http.Protocols)
		tr.Protocols.SetUnencryptedHTTP2(true)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

func post(c *http.Client, addr string) (int, string, error) {
	resp, err := c.Post("http://"+addr+"/", "text/plain", strings.NewReader("x"))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestDropNextAnswerHTTP: the request is applied, its answer never reaches
// the client (a connection error, not an answer), and the connection is
// gone; over HTTP/1.1 keep-alive and over h2c (one multiplexed connection).
func TestDropNextAnswerHTTP(t *testing.T) {
	for _, h2c := range []bool{false, true} {
		name := "http1"
		if h2c {
			name = "h2c"
		}
		t.Run(name, func(t *testing.T) {
			srv := newCounter(t, h2c)
			p := startProxy(t, srv.srv.Listener.Addr().String())
			cli := httpClient(t, h2c)
			// Warm the connection: the drop must work on a kept-alive
			// connection, after an answer.
			if code, _, err := post(cli, p.Addr()); err != nil || code != 200 {
				t.Fatalf("warm-up: %d %v", code, err)
			}
			if err := p.DropNextAnswer(t.Context()); err != nil {
				t.Fatal(err)
			}
			_, body, err := post(cli, p.Addr())
			if err == nil {
				t.Fatalf("dropped answer reached the client: %q", body)
			}
			if got := srv.applied.Load(); got != 2 {
				t.Fatalf("server applied %d requests, want 2 (the dropped one was applied)", got)
			}
			st := p.Stats()
			if st.Dropped != 1 || st.AnswerTimeouts != 0 {
				t.Fatalf("stats %+v: want 1 drop fired by the server's answer", st)
			}
			// The fault was one-shot: a new connection works.
			if code, _, err := post(cli, p.Addr()); err != nil || code != 200 {
				t.Fatalf("after the drop: %d %v", code, err)
			}
			if got := srv.applied.Load(); got != 3 {
				t.Fatalf("applied %d, want 3", got)
			}
		})
	}
}

// TestDropNextAnswerRefuses: with an ended context DropNextAnswer arms
// nothing (the next answer arrives) and says so; on a closed proxy it
// returns ErrClosed rather than arming a fault that cannot fire.
func TestDropNextAnswerRefuses(t *testing.T) {
	srv := newCounter(t, false)
	p := startProxy(t, srv.srv.Listener.Addr().String())
	cli := httpClient(t, false)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := p.DropNextAnswer(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("DropNextAnswer with a canceled context = %v, want context.Canceled", err)
	}
	if code, body, err := post(cli, p.Addr()); err != nil || code != 200 {
		t.Errorf("after a refused DropNextAnswer the answer was lost: %d %q %v", code, body, err)
	}
	if st := p.Stats(); st.Dropped != 0 {
		t.Errorf("stats %+v: a refused DropNextAnswer armed a drop", st)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.DropNextAnswer(t.Context()); !errors.Is(err, faultproxy.ErrClosed) {
		t.Errorf("DropNextAnswer after Close = %v, want faultproxy.ErrClosed", err)
	}
}

// TestDropNextAnswerH2Concurrent: on a multiplexed h2c connection with
// other streams open, exactly the next request is armed, and it is applied.
func TestDropNextAnswerH2Concurrent(t *testing.T) {
	srv := newCounter(t, true)
	p := startProxy(t, srv.srv.Listener.Addr().String())
	cli := httpClient(t, true)
	for range 3 {
		if _, _, err := post(cli, p.Addr()); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.DropNextAnswer(t.Context()); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range 4 {
		wg.Go(func() {
			if _, _, err := post(cli, p.Addr()); err != nil {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	if got := srv.applied.Load(); got != 7 {
		// Any request the client retried on a new connection would show
		// here as more than 7; a lost one as less.
		t.Logf("applied %d (the client may retry requests it never sent)", got)
	}
	if failed.Load() == 0 {
		t.Fatal("no request lost its answer")
	}
	if st := p.Stats(); st.Dropped != 1 {
		t.Fatalf("stats %+v: want exactly one drop", st)
	}
}

// TestFailNextAnswer: the client gets the given bytes (an HTTP 500) although
// the server applied the request.
func TestFailNextAnswer(t *testing.T) {
	srv := newCounter(t, false)
	p := startProxy(t, srv.srv.Listener.Addr().String())
	cli := httpClient(t, false)
	p.FailNextAnswer([]byte("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\nConnection: close\r\n\r\nboom"))
	code, body, err := post(cli, p.Addr())
	if err != nil || code != 500 || body != "boom" {
		t.Fatalf("got %d %q %v, want the injected 500", code, body, err)
	}
	if got := srv.applied.Load(); got != 1 {
		t.Fatalf("applied %d, want 1", got)
	}
	if st := p.Stats(); st.Failed != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// echoServer is a raw TCP server that echoes each read back.
func echoServer(t *testing.T) (addr string, got *atomic.Int64) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got = new(atomic.Int64)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						got.Add(int64(n))
						c.Write(buf[:n])
					}
					if err != nil {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return ln.Addr().String(), got
}

func dial(t *testing.T, addr string) net.Conn {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	return c
}

func roundTrip(c net.Conn, msg string) (string, error) {
	if _, err := io.WriteString(c, msg); err != nil {
		return "", err
	}
	buf := make([]byte, len(msg))
	_, err := io.ReadFull(c, buf)
	return string(buf), err
}

// TestRawEcho: on a raw protocol a request is a burst after an answer; a
// dropped answer is a reset after the server received the bytes.
func TestRawEcho(t *testing.T) {
	addr, got := echoServer(t)
	p := startProxy(t, addr)
	c := dial(t, p.Addr())
	if s, err := roundTrip(c, "hello"); err != nil || s != "hello" {
		t.Fatalf("%q %v", s, err)
	}
	if err := p.DropNextAnswer(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, err := roundTrip(c, "world")
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("got %v, want a connection reset", err)
	}
	if got.Load() != 10 {
		t.Fatalf("server received %d bytes, want 10", got.Load())
	}
	if st := p.Stats(); st.Requests != 2 || st.Dropped != 1 {
		t.Fatalf("stats %+v: want 2 requests, 1 dropped", st)
	}
}

// TestDelay: answers arrive no sooner than the delay.
func TestDelay(t *testing.T) {
	addr, _ := echoServer(t)
	p := startProxy(t, addr)
	c := dial(t, p.Addr())
	const d = 150 * time.Millisecond
	p.Delay(d)
	start := time.Now()
	if _, err := roundTrip(c, "a"); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < d {
		t.Fatalf("answer after %v, want at least %v", el, d)
	}
	p.Delay(0)
	start = time.Now()
	if _, err := roundTrip(c, "b"); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el >= d {
		t.Fatalf("answer after %v with no delay", el)
	}
}

// TestBlackhole: requests are read but never forwarded or answered, on new
// and existing connections; afterwards the desynchronised connections are
// reset and new ones work.
func TestBlackhole(t *testing.T) {
	addr, got := echoServer(t)
	p := startProxy(t, addr)
	old := dial(t, p.Addr())
	if _, err := roundTrip(old, "x"); err != nil {
		t.Fatal(err)
	}
	p.Blackhole(true)
	for _, c := range []net.Conn{old, dial(t, p.Addr())} {
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		_, err := roundTrip(c, "y")
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("got %v, want a read timeout", err)
		}
	}
	if got.Load() != 1 {
		t.Fatalf("server received %d bytes during the blackhole, want only the first 1", got.Load())
	}
	p.Heal()
	old.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := old.Read(make([]byte, 1)); err == nil {
		t.Fatal("a connection that lost bytes to the blackhole was not reset")
	}
	if s, err := roundTrip(dial(t, p.Addr()), "z"); err != nil || s != "z" {
		t.Fatalf("after Heal: %q %v", s, err)
	}
}

// TestResetAll resets open connections; new ones work.
func TestResetAll(t *testing.T) {
	addr, _ := echoServer(t)
	p := startProxy(t, addr)
	c := dial(t, p.Addr())
	if _, err := roundTrip(c, "x"); err != nil {
		t.Fatal(err)
	}
	p.ResetAll()
	if _, err := bufio.NewReader(c).ReadByte(); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("got %v, want a reset", err)
	}
	if _, err := roundTrip(dial(t, p.Addr()), "y"); err != nil {
		t.Fatal(err)
	}
}

// TestDropAnswersRate: the random fault hits about the given fraction of
// requests, each hit applied and unanswered.
func TestDropAnswersRate(t *testing.T) {
	srv := newCounter(t, false)
	p := startProxy(t, srv.srv.Listener.Addr().String())
	cli := httpClient(t, false)
	p.DropAnswers(0.3, 1)
	const n = 100
	errs := 0
	for range n {
		if _, _, err := post(cli, p.Addr()); err != nil {
			errs++
		}
	}
	st := p.Stats()
	if st.Dropped != errs || errs < 15 || errs > 45 {
		t.Fatalf("%d errors, stats %+v: want about 30 drops, each one client error", errs, st)
	}
	if got := srv.applied.Load(); got != n {
		t.Fatalf("applied %d of %d", got, n)
	}
}

// TestGraceWithoutAnswer: an armed request to a server that never answers
// fires after the grace.
func TestGraceWithoutAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		c, err := ln.Accept()
		if err == nil {
			io.Copy(io.Discard, c)
			c.Close()
		}
	})
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	p := startProxy(t, ln.Addr().String())
	p.SetGrace(50 * time.Millisecond)
	if err := p.DropNextAnswer(t.Context()); err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	if _, err := roundTrip(c, "x"); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("got %v, want a reset after the grace", err)
	}
	if st := p.Stats(); st.AnswerTimeouts != 1 || st.Dropped != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestCloseEndsEverything: Close with open, armed and blackholed
// connections leaves no goroutine (TestMain's leak check).
func TestCloseEndsEverything(t *testing.T) {
	addr, _ := echoServer(t)
	p, err := faultproxy.Start(addr)
	if err != nil {
		t.Fatal(err)
	}
	a := dial(t, p.Addr())
	roundTrip(a, "x")
	p.Delay(time.Hour)
	io.WriteString(a, "y")
	p.Blackhole(true)
	dial(t, p.Addr())
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.Close() }()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("Close did not return")
	}
}

// TestBreakFeed resets open connections as ResetAll does, so a follower's
// stream breaks; it refuses an ended context and a closed proxy, resetting
// nothing.
func TestBreakFeed(t *testing.T) {
	addr, _ := echoServer(t)
	p := startProxy(t, addr)
	c := dial(t, p.Addr())
	if _, err := roundTrip(c, "x"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := p.BreakFeed(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("BreakFeed with a canceled context = %v, want context.Canceled", err)
	}
	if s, err := roundTrip(c, "y"); err != nil || s != "y" {
		t.Fatalf("a refused BreakFeed broke the connection: %q %v", s, err)
	}
	if err := p.BreakFeed(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(c).ReadByte(); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("got %v, want a reset", err)
	}
	if st := p.Stats(); st.Resets != 1 {
		t.Errorf("stats %+v: want 1 reset", st)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.BreakFeed(t.Context()); !errors.Is(err, faultproxy.ErrClosed) {
		t.Errorf("BreakFeed after Close = %v, want faultproxy.ErrClosed", err)
	}
}
