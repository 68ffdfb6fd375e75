package backendtest_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/kvbreaker/kvbreaker/internal/backendtest"
)

// TestAskAsksEachIntervalUntilCtxEnds: a feed that takes each ask sees one
// per interval; one that takes none has one standing (want holds one, the
// asker never blocks); after ctx ends no ask comes (the control: the
// count would go on growing).
func TestAskAsksEachIntervalUntilCtxEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		want := make(chan struct{}, 1)
		done := make(chan struct{})
		go func() { backendtest.Ask(ctx, want, 5*time.Millisecond); close(done) }()
		start := time.Now()
		for range 10 {
			<-want
		}
		if d := time.Since(start); d != 50*time.Millisecond {
			t.Errorf("10 asks took %v, want one each 5ms (50ms)", d)
		}
		// synctest's clock: a second passes at once, 200 intervals, and
		// the asker must not block on the asks nobody takes.
		time.Sleep(time.Second)
		synctest.Wait()
		if len(want) != 1 {
			t.Errorf("asks standing after a second not taken: %d, want 1", len(want))
		}
		cancel()
		<-done
		<-want
		time.Sleep(time.Second)
		synctest.Wait()
		if len(want) != 0 {
			t.Errorf("an ask after ctx ended")
		}
	})
}
