package kvbreaker_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
)

// An undecodable record read on every call is reported to the Observer
// every time and logged once per host, not once per call.
func TestUndecodableLoggedOncePerHost(t *testing.T) {
	ctx := context.Background()
	store := memory.New()
	for _, h := range []string{"a.example", "b.example"} {
		if _, err := store.CompareAndSwap(ctx, h, driver.NoVersion, []byte("not a record"), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer
	seen := map[string]int{}
	b, err := kvbreaker.New(store, kvbreaker.Settings{
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Observer: &kvbreaker.Observer{RecordAnomaly: func(_ context.Context, e kvbreaker.AnomalyInfo) {
			host, a := e.Host, e.Anomaly
			if a != "undecodable" {
				t.Errorf("anomaly %q for %s; want %q", a, host, "undecodable")
			}
			seen[host]++
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	for range 5 {
		for _, h := range []string{"a.example", "b.example"} {
			if v, err := b.Allow(ctx, h, time.Time{}); err != nil || v.Decision != kvbreaker.Send {
				t.Fatalf("Allow(%s) over an undecodable record = %+v, %v; want Send", h, v, err)
			}
		}
	}
	if seen["a.example"] == 0 || seen["b.example"] == 0 {
		t.Fatalf("Observer saw %v; want every host's undecodable record", seen)
	}
	for _, h := range []string{"a.example", "b.example"} {
		if n := strings.Count(logs.String(), "host="+h); n != 1 {
			t.Fatalf("%s logged %d times; want once:\n%s", h, n, logs.String())
		}
	}
	// The next write replaces it, and the circuit opens.
	for range 5 {
		if err := b.Failure(ctx, "a.example"); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := b.Allow(ctx, "a.example", time.Time{}); err != nil || v.Decision != kvbreaker.Hold {
		t.Fatalf("after 5 failures over an undecodable record Allow = %+v, %v; want Hold", v, err)
	}
}
