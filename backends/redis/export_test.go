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
