package httpbreaker_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/httpbreaker"
)

// BenchmarkTransportClosed compares a bare transport with a Transport over
// it on a closed circuit (memory store), against one httptest server:
//
//	go test -run '^$' -bench TransportClosed -benchmem -count 6 ./httpbreaker/
func BenchmarkTransportClosed(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	defer srv.Close()
	br, err := kvbreaker.New(memory.New(), kvbreaker.Settings{})
	if err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, rt http.RoundTripper) {
		client := &http.Client{Transport: rt}
		for b.Loop() {
			resp, err := client.Get(srv.URL)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
		}
	}
	b.Run("bare", func(b *testing.B) {
		base := &http.Transport{}
		defer base.CloseIdleConnections()
		run(b, base)
	})
	b.Run("breaker", func(b *testing.B) {
		base := &http.Transport{}
		defer base.CloseIdleConnections()
		run(b, &httpbreaker.Transport{Base: base, Breaker: br})
	})
}
