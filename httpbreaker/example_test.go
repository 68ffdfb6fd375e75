package httpbreaker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/httpbreaker"
)

func ExampleTransport() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
	}))
	defer srv.Close()

	b, err := kvbreaker.New(memory.New(), kvbreaker.Settings{FailureThreshold: 2})
	if err != nil {
		fmt.Println(err)
		return
	}
	client := &http.Client{Transport: &httpbreaker.Transport{Breaker: b}}

	ctx := context.Background()
	for range 3 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := client.Do(req)
		if held, ok := errors.AsType[*kvbreaker.HeldError](err); ok {
			fmt.Println("held: no request sent; ask again at RetryAt:", !held.RetryAt.IsZero())
			// On retry, carry the first-hold instant so HoldLimit applies.
			ctx = kvbreaker.WithHeldSince(ctx, held.HeldSince)
			continue
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(resp.Status)
	}
	// Output:
	// 502 Bad Gateway
	// 502 Bad Gateway
	// held: no request sent; ask again at RetryAt: true
}

// A POST held by the breaker is sent again later as RetryRequest makes it:
// its body replayed, its first hold's instant carried for HoldLimit. The
// held error comes wrapped in the client's *url.Error; errors.AsType finds
// it.
func ExampleRetryRequest() {
	var down atomic.Bool
	down.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		b, _ := io.ReadAll(r.Body)
		fmt.Printf("inbox took %s\n", b)
	}))
	defer srv.Close()

	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	b, err := kvbreaker.New(memory.New(), kvbreaker.Settings{FailureThreshold: 1, Clock: func() time.Time { return now }})
	if err != nil {
		fmt.Println(err)
		return
	}
	client := &http.Client{Transport: &httpbreaker.Transport{Breaker: b}}

	// http.NewRequest sets GetBody for a *strings.Reader body.
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"type":"Create"}`))
	for {
		resp, err := client.Do(req)
		if held, ok := errors.AsType[*kvbreaker.HeldError](err); ok {
			fmt.Println("held until RetryAt; requeue the message")
			// Later, at held.RetryAt (here: the clock moves there).
			now = held.RetryAt
			down.Store(false)
			if req, err = httpbreaker.RetryRequest(req, held); err != nil {
				fmt.Println(err)
				return
			}
			continue
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
		fmt.Println(resp.Status)
		if resp.StatusCode < 300 {
			return
		}
	}
	// Output:
	// 503 Service Unavailable
	// held until RetryAt; requeue the message
	// inbox took {"type":"Create"}
	// 200 OK
}
