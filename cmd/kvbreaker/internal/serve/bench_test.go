package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
)

// clientCounts are how many callers ask at once in the decision
// benchmarks: the 64, and one, whose latency has no queue in it.
var clientCounts = []int{1, 64}

// benchHosts are the hosts the callers ask about, closed circuits all.
var benchHosts = func() []string {
	var h []string
	for i := range 256 {
		h = append(h, "host-"+string(rune('a'+i%26))+string(rune('a'+i/26))+".example")
	}
	return h
}()

func benchBreaker(b testing.TB) *kvbreaker.Breaker {
	br, err := kvbreaker.New(memory.New(), kvbreaker.Settings{SkipClockCheck: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = br.Close(context.Background()) })
	return br
}

// runClients runs b.N calls of one over clients goroutines and reports
// the 50th and 99th percentile of a call's latency.
func runClients(b *testing.B, clients int, one func(i int) error) {
	var mu sync.Mutex
	var all []time.Duration
	per := b.N/clients + 1
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	var failed error
	for c := range clients {
		wg.Go(func() {
			lat := make([]time.Duration, 0, per)
			for i := range per {
				start := time.Now()
				if err := one(c*per + i); err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
					return
				}
				lat = append(lat, time.Since(start))
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := b.Elapsed()
	b.StopTimer()
	if failed != nil {
		b.Fatal(failed)
	}
	// With every caller always waiting on an answer this is the most
	// the target serves: the saturation point.
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "decisions/s")
	slices.Sort(all)
	b.ReportMetric(float64(all[len(all)*50/100])/1e3, "p50-µs")
	b.ReportMetric(float64(all[len(all)*99/100])/1e3, "p99-µs")
	// Per call rather than per b.N: each goroutine rounds up.
	b.ReportMetric(float64(len(all))/float64(b.N), "calls/op")
}

// BenchmarkDecideLoopback: POST /v1/decide of one delivery over loopback
// HTTP/1.1 keep-alive connections, 1 and 64 callers at once, against a
// Breaker over the memory store; allocations are the whole process's
// (client and server) per call.
func BenchmarkDecideLoopback(b *testing.B) {
	for _, clients := range clientCounts {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) { decideLoopback(b, clients) })
	}
}

func decideLoopback(b *testing.B, clients int) {
	runClients(b, clients, loopbackDecider(b, clients))
}

// loopbackDecider starts serve over a Breaker on the memory store and
// returns a call that asks it, over loopback HTTP/1.1 keep-alive
// connections (at most conns of them), about the i-th of benchHosts.
func loopbackDecider(b *testing.B, conns int) func(i int) error {
	return startLoopback(b, conns).decide
}

// loopback is serve in this process behind a loopback listener, or in a
// child process (child), and a net/http client that asks it.
type loopback struct {
	url    string
	client *http.Client
	bodies []string
	// In this process: the connections the server accepted, and each
	// request's time in the server's handler.
	accepted atomic.Int64
	handler  recorder
	// In a child process: its counts (GET /bench/stats).
	child bool
}

func startLoopback(b testing.TB, conns int) *loopback {
	srv, err := New(Config{Breaker: benchBreaker(b), Tokens: []Token{NewToken("bench", PermDecide, tokWorker)}})
	if err != nil {
		b.Fatal(err)
	}
	lb := &loopback{}
	hs := httptest.NewUnstartedServer(lb.handler.timing(srv.Handler()))
	hs.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			lb.accepted.Add(1)
		}
	}
	hs.Start()
	b.Cleanup(hs.Close)
	lb.url = hs.URL
	lb.dial(b, conns)
	return lb
}

func (lb *loopback) dial(b testing.TB, conns int) {
	lb.client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}}
	b.Cleanup(lb.client.CloseIdleConnections)
	lb.bodies = make([]string, len(benchHosts))
	for i, h := range benchHosts {
		lb.bodies[i] = `{"deliveries":[{"host":"` + h + `"}]}`
	}
}

func (lb *loopback) decide(i int) error {
	req, _ := http.NewRequest("POST", lb.url+"/v1/decide", strings.NewReader(lb.bodies[i%len(lb.bodies)]))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tokWorker)
	resp, err := lb.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST /v1/decide: status %d, want 200", resp.StatusCode)
	}
	return nil
}

// serverStats is what the server counted: connections accepted,
// requests, the quantiles of their time in the handler, and (in a child
// process) its heap allocations.
type serverStats struct {
	Accepted int64  `json:"accepted"`
	Requests int64  `json:"requests"`
	P50      int64  `json:"p50_ns"`
	P99      int64  `json:"p99_ns"`
	P999     int64  `json:"p999_ns"`
	Mallocs  uint64 `json:"mallocs"`
	Bytes    uint64 `json:"bytes"`
	CPU      int64  `json:"cpu_ns"`
}

// stats reads the server's counts; reset starts its handler times anew.
func (lb *loopback) stats(b testing.TB, reset bool) serverStats {
	if !lb.child {
		st := lb.handler.stats(reset)
		st.Accepted = lb.accepted.Load()
		return st
	}
	u := lb.url + "/bench/stats"
	if reset {
		u += "?reset=1"
	}
	resp, err := lb.client.Get(u)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var st serverStats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		b.Fatal(err)
	}
	return st
}

// recorder keeps the durations of the requests a handler served.
type recorder struct {
	mu sync.Mutex
	d  []time.Duration
}

// timing wraps h so that each request's time in it is recorded.
func (r *recorder) timing(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		start := time.Now()
		h.ServeHTTP(w, req)
		d := time.Since(start)
		r.mu.Lock()
		r.d = append(r.d, d)
		r.mu.Unlock()
	})
}

func (r *recorder) stats(reset bool) serverStats {
	r.mu.Lock()
	d := slices.Clone(r.d)
	if reset {
		r.d = r.d[:0]
	}
	r.mu.Unlock()
	slices.Sort(d)
	return serverStats{Requests: int64(len(d)), P50: int64(quantile(d, 0.5)), P99: int64(quantile(d, 0.99)), P999: int64(quantile(d, 0.999))}
}

// childEnv names the variable that makes TestServeChild a server.
const childEnv = "KVBREAKER_SERVE_BENCH_CHILD"

// childProfileEnv names the file the child server writes its CPU
// profile to (go tool pprof reads it), when set.
const childProfileEnv = "KVBREAKER_SERVE_BENCH_CHILD_CPUPROFILE"

// startChild runs serve in a child process (this test binary, as
// TestServeChild), so that the benchmark's clients and the server each
// have the runtime to themselves, as workers and serve do in a fleet;
// the two processes still share the machine's CPUs.
func startChild(b *testing.B, conns int, env ...string) *loopback {
	cmd := exec.Command(os.Args[0], "-test.run=^TestServeChild$")
	cmd.Env = append(append(os.Environ(), childEnv+"=1"), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close() // the child stops at its stdin's end
		if err := cmd.Wait(); err != nil {
			b.Errorf("serve's child process: %v", err)
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("serve's child process printed no address: %v", err)
	}
	lb := &loopback{url: "http://" + strings.TrimSpace(line), child: true}
	lb.dial(b, conns)
	return lb
}

// TestServeChild is serve in startChild's child process: it prints its
// address, serves until its stdin ends, and answers GET /bench/stats
// with its counts (heap allocations from runtime.MemStats). Without
// childEnv it skips.
func TestServeChild(t *testing.T) {
	if os.Getenv(childEnv) != "1" {
		t.Skip("the benchmarks' child process; runs only under " + childEnv + "=1")
	}
	br, err := kvbreaker.New(memory.New(), kvbreaker.Settings{SkipClockCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close(context.Background())
	srv, err := New(Config{Breaker: br, Tokens: []Token{NewToken("bench", PermDecide, tokWorker)}})
	if err != nil {
		t.Fatal(err)
	}
	var rec recorder
	var accepted atomic.Int64
	mux := http.NewServeMux()
	mux.Handle("/", rec.timing(srv.Handler()))
	mux.HandleFunc("GET /bench/stats", func(w http.ResponseWriter, req *http.Request) {
		st := rec.stats(req.URL.Query().Get("reset") == "1")
		st.Accepted = accepted.Load()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		st.Mallocs, st.Bytes = ms.Mallocs, ms.TotalAlloc
		st.CPU = int64(processCPU())
		_ = json.NewEncoder(w).Encode(st)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: mux, ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			accepted.Add(1)
		}
	}}
	done := make(chan error, 1)
	if os.Getenv(childLoopEnv) == "minimal" {
		go minimalServe(ln, mux, &accepted)
		defer ln.Close()
	} else {
		go func() { done <- hs.Serve(ln) }()
		defer func() {
			if err := hs.Shutdown(context.Background()); err != nil {
				t.Error(err)
			}
			if err := <-done; err != http.ErrServerClosed {
				t.Error(err)
			}
		}()
	}
	// A CPU profile of the server alone, apart from its clients'
	// process: where a request's CPU goes.
	if path := os.Getenv(childProfileEnv); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer func() {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				t.Error(err)
			}
		}()
	}
	fmt.Println(ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// childLoopEnv, set to "minimal", makes the child serve its connections
// with minimalServe instead of net/http's Server.
const childLoopEnv = "KVBREAKER_SERVE_BENCH_CHILD_LOOP"

// minimalServe is an experiment, not a server: the least a Go HTTP/1.1
// server does per request on a kept-alive connection (net/http's request
// parser, the handler, the answer written whole in one system call from
// the connection's own goroutine), with none of net/http's Server's
// per-request work around it (the background read that watches for the
// client going away, the deadlines, the response's chunk writer). The
// open loop's target leanmin asks it, so that the CPU a request costs
// in net/http's Server can be told from what any Go server would cost.
// It has no timeouts, no shutdown and no request limits.
func minimalServe(ln net.Listener, h http.Handler, accepted *atomic.Int64) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		accepted.Add(1)
		go minimalConn(c, h)
	}
}

func minimalConn(c net.Conn, h http.Handler) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 4096)
	w := &minimalWriter{h: http.Header{}}
	var out bytes.Buffer
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		clear(w.h)
		w.code, w.body = 0, w.body[:0]
		h.ServeHTTP(w, req)
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return
		}
		if w.code == 0 {
			w.code = http.StatusOK
		}
		out.Reset()
		fmt.Fprintf(&out, "HTTP/1.1 %d %s\r\n", w.code, http.StatusText(w.code))
		w.h.Set("Content-Length", strconv.Itoa(len(w.body)))
		w.h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
		_ = w.h.Write(&out)
		out.WriteString("\r\n")
		out.Write(w.body)
		if _, err := c.Write(out.Bytes()); err != nil {
			return
		}
	}
}

// minimalWriter keeps a handler's answer for minimalConn to write.
type minimalWriter struct {
	h    http.Header
	code int
	body []byte
}

func (m *minimalWriter) Header() http.Header { return m.h }
func (m *minimalWriter) Write(p []byte) (int, error) {
	if m.code == 0 {
		m.code = http.StatusOK
	}
	m.body = append(m.body, p...)
	return len(p), nil
}
func (m *minimalWriter) WriteHeader(code int) {
	if m.code == 0 {
		m.code = code
	}
}

// BenchmarkAllowInProcess: the same decision by Breaker.Allow in the
// caller's process, 1 and 64 callers at once: the cost serve adds is the
// difference.
func BenchmarkAllowInProcess(b *testing.B) {
	for _, clients := range clientCounts {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			br := benchBreaker(b)
			ctx := context.Background()
			runClients(b, clients, func(i int) error {
				_, err := br.Allow(ctx, benchHosts[i%len(benchHosts)], time.Time{})
				return err
			})
		})
	}
}

// discardWriter is a ResponseWriter that keeps only the status, its
// header map reused between requests.
type discardWriter struct {
	h    http.Header
	code int
	n    int
}

func (d *discardWriter) Header() http.Header { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) {
	d.n += len(p)
	return len(p), nil
}
func (d *discardWriter) WriteHeader(code int) { d.code = code }

// rewindBody is a request body the benchmark rewinds between calls.
type rewindBody struct{ bytes.Reader }

func (*rewindBody) Close() error { return nil }

// BenchmarkDecideHandler: POST /v1/decide of one delivery through the
// server's handler alone, one caller, no connection: the server's own
// allocations and work per decision, without net/http's connection
// handling or a client's. The before/ rows are the same requests through
// the handler before the decision route skipped the mux (beforeHandler),
// for a ratio within one run.
func BenchmarkDecideHandler(b *testing.B) {
	b.Run("send", func(b *testing.B) { decideHandler(b, false, false) })
	b.Run("hold", func(b *testing.B) { decideHandler(b, true, false) })
	b.Run("before/send", func(b *testing.B) { decideHandler(b, false, true) })
	b.Run("before/hold", func(b *testing.B) { decideHandler(b, true, true) })
}

// decideHandler asks about closed hosts, or with open about hosts whose
// circuits are open (every answer a hold); before, through
// beforeHandler.
func decideHandler(b *testing.B, open, before bool) {
	br := benchBreaker(b)
	if open {
		for _, h := range benchHosts {
			for range (kvbreaker.Settings{}).WithDefaults().FailureThreshold {
				if err := br.Record(b.Context(), h, kvbreaker.Failure); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	srv, err := New(Config{Breaker: br, Tokens: []Token{NewToken("bench", PermDecide, tokWorker)}})
	if err != nil {
		b.Fatal(err)
	}
	h := srv.Handler()
	if before {
		h = beforeHandler(srv)
	}
	bodies := make([][]byte, len(benchHosts))
	for i, host := range benchHosts {
		bodies[i] = []byte(`{"deliveries":[{"host":"` + host + `"}]}`)
	}
	body := &rewindBody{}
	req := httptest.NewRequest("POST", "/v1/decide", body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tokWorker)
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	i := 0
	// CPU time (getrusage) is what a loaded machine's waits leave out of
	// ns/op: the handler's own cost per request.
	cpu := processCPU()
	for b.Loop() {
		body.Reset(bodies[i%len(bodies)])
		i++
		clear(w.h)
		w.code = 0
		h.ServeHTTP(w, req)
		if w.code != http.StatusOK || open && w.n < 150 {
			b.Fatalf("status %d, %d bytes: want 200 (with a hold's fields when open)", w.code, w.n)
		}
		w.n = 0
	}
	if cpu := processCPU() - cpu; cpu > 0 && i > 0 {
		b.ReportMetric(float64(cpu)/float64(i), "cpu-ns/op")
	}
}
