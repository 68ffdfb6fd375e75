package redis

import (
	"context"

	"github.com/kvbreaker/kvbreaker/driver"
)

// CompareAndDeleteRun runs CompareAndDelete's script with the write id id,
// as go-redis reruns it when the first run's answer was lost.
func (s *Store) CompareAndDeleteRun(ctx context.Context, key string, old driver.Version, id string) error {
	return s.compareAndDelete(ctx, key, old, id)
}

// AcceptFutureBeats makes every feed deliver a beat dated after its own
// arrival (the negative control of the check that drops one).
func AcceptFutureBeats(on bool) { acceptFutureBeats.Store(on) }

// BeatCounts returns how many beats on demand this process's feeds sent,
// how many wipe checks rode on them and how many clock samples they took.
func BeatCounts() (sent, checks, samples int) {
	return int(beatCounts.sent.Load()), int(beatCounts.checks.Load()), int(beatCounts.samples.Load())
}

// BeatRejected returns how many beats this process's feeds dropped.
func BeatRejected() int { return int(beatCounts.rejected.Load()) }

// ConnectTimeout is the connection timeout Dial uses, for the tests that
// bound a refused or silent dial by it.
const ConnectTimeout = connectTimeout
