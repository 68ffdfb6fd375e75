package httpbreaker_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

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
