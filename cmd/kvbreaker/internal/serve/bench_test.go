package serve

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
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

func benchBreaker(b *testing.B) *kvbreaker.Breaker {
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
	srv, err := New(Config{Breaker: benchBreaker(b), Tokens: []Token{NewToken("bench", PermDecide, tokWorker)}})
	if err != nil {
		b.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	b.Cleanup(hs.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}}
	b.Cleanup(client.CloseIdleConnections)
	bodies := make([]string, len(benchHosts))
	for i, h := range benchHosts {
		bodies[i] = `{"deliveries":[{"host":"` + h + `"}]}`
	}
	return func(i int) error {
		req, _ := http.NewRequest("POST", hs.URL+"/v1/decide", strings.NewReader(bodies[i%len(bodies)]))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+tokWorker)
		resp, err := client.Do(req)
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
// handling or a client's.
func BenchmarkDecideHandler(b *testing.B) {
	b.Run("send", func(b *testing.B) { decideHandler(b, false) })
	b.Run("hold", func(b *testing.B) { decideHandler(b, true) })
}

// decideHandler asks about closed hosts, or with open about hosts whose
// circuits are open (every answer a hold).
func decideHandler(b *testing.B, open bool) {
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
}
