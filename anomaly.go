package kvbreaker

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// The anomalies Observer.RecordAnomaly reports (AnomalyInfo.Anomaly).
const (
	anomalyUndecodable = "undecodable"
	anomalyFuture      = "future"
)

// anomalyWarnEvery is how often a Breaker logs the same anomaly of one host;
// anomalyHosts bounds the hosts it remembers (beyond it, it starts afresh,
// which at worst logs a host again early). A million hostile records cost at
// most anomalyHosts warnings per anomalyWarnEvery, not one per call.
const (
	anomalyWarnEvery = 10 * time.Minute
	anomalyHosts     = 1024
)

// anomalyLog rate-limits the warnings of records a Breaker cannot use.
type anomalyLog struct {
	mu     sync.Mutex
	warned map[anomalyKey]time.Time // by the monotonic clock
	// suppressed counts warnings not logged since the last one logged.
	suppressed int
}

type anomalyKey struct {
	host string
	a    string
}

// anomaly reports a record of host that the Breaker cannot use as written:
// to the Observer every time, to the Logger once per host per
// anomalyWarnEvery.
func (b *Breaker) anomaly(ctx context.Context, host string, a string, attrs ...any) {
	if b.obs.RecordAnomaly != nil {
		b.obs.RecordAnomaly(ctx, AnomalyInfo{Host: host, Anomaly: a})
	}
	l := &b.anomalies
	now := time.Now()
	l.mu.Lock()
	k := anomalyKey{host, a}
	last, seen := l.warned[k]
	if seen && now.Sub(last) < anomalyWarnEvery {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	if l.warned == nil || len(l.warned) >= anomalyHosts {
		l.warned = make(map[anomalyKey]time.Time)
	}
	l.warned[k] = now
	suppressed := l.suppressed
	l.suppressed = 0
	l.mu.Unlock()

	msg := "kvbreaker: ignoring undecodable record; the next write replaces it"
	if a == anomalyFuture {
		msg = "kvbreaker: record written by a clock ahead of this worker's by more than twice ClockSkew; holding the host no longer than RecoveryDelay and rewriting the record on this clock (check the fleet's NTP)"
	}
	args := append([]any{"host", host}, attrs...)
	args = append(args, slog.Int("suppressed_since_last", suppressed), slog.Duration("repeats_after", anomalyWarnEvery))
	b.log.WarnContext(ctx, msg, args...)
}
