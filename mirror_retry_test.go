package kvbreaker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
)

// endingFeed is a memory store whose Follow ends at once with an error,
// each call noted; the calls numbered in synced first deliver a snapshot.
type endingFeed struct {
	*memory.Store
	synced map[int]bool
	mu     sync.Mutex
	calls  []time.Time
}

func (s *endingFeed) Follow(ctx context.Context, _ string, _ time.Duration, fn func(driver.Change)) error {
	s.mu.Lock()
	s.calls = append(s.calls, time.Now())
	n := len(s.calls)
	s.mu.Unlock()
	if s.synced[n] {
		fn(driver.Change{Kind: driver.ChangeReset})
		fn(driver.Change{Kind: driver.ChangeSynced, At: time.Now()})
	}
	return errors.New("the server went away")
}

// TestMirrorRetryBackoff: a feed that keeps ending with an error is
// followed again after a pause doubling from 100 ms, and a feed that
// delivered a snapshot before it ended starts the doubling over, so a
// mirror that was healthy comes back fast after a blip.
func TestMirrorRetryBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &endingFeed{Store: memory.New(), synced: map[int]bool{5: true}}
		b, err := kvbreaker.New(st, kvbreaker.Settings{Mirror: true, SkipClockCheck: true})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(3400 * time.Millisecond)
		if err := b.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		st.mu.Lock()
		defer st.mu.Unlock()
		var gaps []time.Duration
		for i := 1; i < len(st.calls); i++ {
			gaps = append(gaps, st.calls[i].Sub(st.calls[i-1]))
		}
		// The pause after the fifth call is the one already doubled to;
		// the doubling starts over after it.
		if got, want := fmt.Sprint(gaps), "[100ms 200ms 400ms 800ms 1.6s 200ms]"; got != want {
			t.Fatalf("pauses between follows %s, want %s", got, want)
		}
	})
}
