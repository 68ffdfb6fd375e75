package otelkvbreaker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/kvbreaker/kvbreaker"
)

// TestMirrorInstruments: the mirror's health is a gauge and a counter of
// transitions by state and reason; each lag is recorded in seconds in
// kvbreaker.mirror.lag with LagBuckets.
func TestMirrorInstruments(t *testing.T) {
	obs, reader, _ := newTestObserver(t)
	ctx := context.Background()
	obs.Mirror(ctx, kvbreaker.MirrorInfo{Healthy: true, Reason: "synced"})
	obs.MirrorLag(ctx, kvbreaker.MirrorLagInfo{Lag: 3 * time.Millisecond})
	obs.MirrorLag(ctx, kvbreaker.MirrorLagInfo{Lag: 200 * time.Microsecond})
	obs.Mirror(ctx, kvbreaker.MirrorInfo{Healthy: false, Reason: "lost", Err: errors.New("dropped")})

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch m.Name {
			case "kvbreaker.mirror.healthy":
				d := m.Data.(metricdata.Gauge[int64])
				if len(d.DataPoints) != 1 || d.DataPoints[0].Value != 0 {
					t.Errorf("healthy gauge: %+v, want 0 after the loss", d.DataPoints)
				}
			case "kvbreaker.mirror.transitions":
				d := m.Data.(metricdata.Sum[int64])
				var got []string
				for _, p := range d.DataPoints {
					h, _ := p.Attributes.Value(MirrorHealthyKey)
					r, _ := p.Attributes.Value(MirrorReasonKey)
					got = append(got, fmt.Sprintf("%v:%s", h.AsBool(), r.AsString()))
				}
				slices.Sort(got)
				if !slices.Equal(got, []string{"false:lost", "true:synced"}) {
					t.Errorf("transitions: %v", got)
				}
			case "kvbreaker.mirror.lag":
				d := m.Data.(metricdata.Histogram[float64])
				p := d.DataPoints[0]
				if p.Count != 2 || p.Sum < 0.0031 || p.Sum > 0.0033 || !slices.Equal(p.Bounds, LagBuckets) {
					t.Errorf("lag: count %d sum %g bounds %v", p.Count, p.Sum, p.Bounds)
				}
			default:
				continue
			}
			found[m.Name] = true
		}
	}
	if len(found) != 3 {
		t.Errorf("instruments found: %v", found)
	}
}
