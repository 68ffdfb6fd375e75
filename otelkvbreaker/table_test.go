package otelkvbreaker

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
)

// docInstruments is the Metrics table of the package documentation
// (doc.go): "name kind unit" per instrument.
func docInstruments(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(strings.TrimPrefix(line, "//"))
		switch {
		case !in && len(f) >= 3 && f[0] == "name" && f[1] == "kind" && f[2] == "unit":
			in = true
		case in && len(f) == 0:
			return rows
		case in && len(f) >= 3:
			rows = append(rows, f[0]+" "+f[1]+" "+f[2])
		}
	}
	t.Fatal("doc.go has no Metrics table (a header line \"name kind unit attributes\")")
	return nil
}

// kindOf is the instrument kind (as the table names it) of an aggregation
// the SDK collected with the default views.
func kindOf(d metricdata.Aggregation) string {
	switch d := d.(type) {
	case metricdata.Sum[int64]:
		if d.IsMonotonic {
			return "Int64Counter"
		}
		return "Int64UpDownCounter"
	case metricdata.Sum[float64]:
		if d.IsMonotonic {
			return "Float64Counter"
		}
		return "Float64UpDownCounter"
	case metricdata.Histogram[int64]:
		return "Int64Histogram"
	case metricdata.Histogram[float64]:
		return "Float64Histogram"
	case metricdata.Gauge[int64]:
		return "Int64Gauge"
	case metricdata.Gauge[float64]:
		return "Float64Gauge"
	}
	return "unknown"
}

// interfering is the memory store with a server clock 2 s ahead of the
// worker's, and, once, another writer: before the first compare-and-swap
// of key conflict it writes that key, so the Breaker's swap finds a newer
// version.
type interfering struct {
	*memory.Store
	conflict string
	once     sync.Once
}

func (s *interfering) CompareAndSwap(ctx context.Context, key string, old driver.Version, value []byte, ttl time.Duration) (driver.Version, error) {
	if key == s.conflict {
		s.once.Do(func() {
			if v, ver, err := s.Store.Get(ctx, key); err == nil {
				s.Store.CompareAndSwap(ctx, key, ver, v, ttl)
			} else {
				s.Store.CompareAndSwap(ctx, key, driver.NoVersion, value, ttl)
			}
		})
	}
	return s.Store.CompareAndSwap(ctx, key, old, value, ttl)
}

func (s *interfering) SampleClock(context.Context) (time.Time, time.Duration, error) {
	return time.Now().Add(2 * time.Second), time.Millisecond, nil
}

// TestMetricsTable: a scripted run of a Breaker with a mirror over the
// memory store emits every instrument of the package documentation's
// Metrics table, with the kind and unit the table gives, and no other.
func TestMetricsTable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		obs, reader, _ := newTestObserver(t)
		store := &interfering{Store: memory.New(), conflict: "conflict.example"}
		settings := kvbreaker.Settings{FailureThreshold: 1, RecoveryDelay: time.Minute, HoldLimit: time.Hour, Mirror: true, SkipClockCheck: true, Observer: obs}
		b, err := kvbreaker.New(store, settings)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close(ctx)
		synctest.Wait() // the mirror has synced

		b.Allow(ctx, "a.example", time.Time{})                  // the mirror answers
		b.Failure(ctx, "a.example")                             // a write: closed → open
		synctest.Wait()                                         // its change on the feed: a lag
		b.Allow(ctx, "a.example", time.Now().Add(-2*time.Hour)) // held past HoldLimit: a drop
		time.Sleep(2 * time.Minute)                             // the recovery delay (synctest's clock)
		v, _ := b.Allow(ctx, "a.example", time.Time{})
		if v.Decision != kvbreaker.Probe {
			t.Fatalf("after the recovery delay: %v, want a probe", v.Decision)
		}
		b.Abandon(ctx, "a.example", v)
		b.Failure(ctx, "conflict.example") // a conflict, then a swap
		if _, err := store.Store.CompareAndSwap(ctx, "bad.example", driver.NoVersion, []byte("not a record"), time.Hour); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		b.Allow(ctx, "bad.example", time.Time{}) // an undecodable record
		if _, err := b.CheckClock(ctx); err != nil {
			t.Fatal(err)
		}

		var rm metricdata.ResourceMetrics
		if err := reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		var emitted []string
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				emitted = append(emitted, m.Name+" "+kindOf(m.Data)+" "+m.Unit)
			}
		}
		documented := docInstruments(t)
		slices.Sort(emitted)
		slices.Sort(documented)
		for _, e := range emitted {
			if !slices.Contains(documented, e) {
				t.Errorf("emitted, not in doc.go's Metrics table: %s", e)
			}
		}
		for _, d := range documented {
			if !slices.Contains(emitted, d) {
				t.Errorf("in doc.go's Metrics table, not emitted by the run: %s", d)
			}
		}
		if len(documented) == 0 {
			t.Error("doc.go's Metrics table lists no instrument")
		}
	})
}
