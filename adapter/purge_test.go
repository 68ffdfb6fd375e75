package adapter_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/adapter"
	"github.com/kvbreaker/kvbreaker/driver"
)

// TestPurgerEveryNWrites: a purge starts at the nth, 2nth, … write, with
// a deadline of the timeout, and never while another runs; Close waits for
// the running one and starts no more.
func TestPurgerEveryNWrites(t *testing.T) {
	started := make(chan time.Duration, 10)
	release := make(chan struct{})
	var calls atomic.Int32
	p := adapter.NewPurger(3, time.Hour, func(ctx context.Context) (int64, error) {
		calls.Add(1)
		d, _ := ctx.Deadline()
		started <- time.Until(d)
		<-release
		return 0, nil
	})
	p.Wrote()
	p.Wrote()
	if n := calls.Load(); n != 0 {
		t.Fatalf("%d purges after 2 writes of 3", n)
	}
	p.Wrote()
	if left := <-started; left <= 0 || left > time.Hour {
		t.Fatalf("the purge's deadline is %v away, want within the hour's timeout", left)
	}
	for range 6 { // two more due while the first runs: none starts
		p.Wrote()
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d purges running at once, want one at a time", n)
	}
	closed := make(chan bool)
	go func() { closed <- p.Close() }()
	select {
	case <-closed:
		t.Fatal("Close returned while a purge ran")
	case <-time.After(50 * time.Millisecond): // a negative: Close is still waiting
	}
	close(release)
	if already := <-closed; already {
		t.Fatal("the first Close says the Purger was already closed")
	}
	for range 9 {
		p.Wrote()
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d purges, the last after Close", n)
	}
	if !p.Close() {
		t.Fatal("a second Close does not say it was already closed")
	}
}

// TestPurgerOff: every 0 and the zero value never purge.
func TestPurgerOff(t *testing.T) {
	var calls atomic.Int32
	p := adapter.NewPurger(0, time.Second, func(context.Context) (int64, error) { calls.Add(1); return 0, nil })
	var zero adapter.Purger
	for range 100 {
		p.Wrote()
		zero.Wrote()
	}
	p.Close()
	zero.Close()
	if n := calls.Load(); n != 0 {
		t.Fatalf("%d purges with every 0", n)
	}
}

// TestPurgeCheck: each invalid field is one *driver.OptionError naming its
// option; a valid schedule (0 writes: purge only on demand) none.
func TestPurgeCheck(t *testing.T) {
	ok := &adapter.Problems{Backend: "x"}
	adapter.Purge{Every: 0, Batch: 1, Delay: time.Second}.Check(ok)
	adapter.DefaultPurge.Check(ok)
	if err := ok.Err(); err != nil {
		t.Fatalf("valid schedules: %v", err)
	}
	bad := &adapter.Problems{Backend: "mysql"}
	adapter.Purge{Every: -1, Batch: 0, Delay: -time.Second}.Check(bad)
	err := bad.Err()
	var oe *driver.OptionError
	if !errors.As(err, &oe) || oe.Backend != "mysql" || oe.Option != "WithPurgeEvery" {
		t.Fatalf("first problem %v, want mysql's WithPurgeEvery", err)
	}
	for _, want := range []string{"WithPurgeEvery: -1", "WithPurgeBatch: 0", "WithPurgeDelay: -1s", "leave it out for 1000", "leave it out for 1m0s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	if n := len(err.(interface{ Unwrap() []error }).Unwrap()); n != 3 {
		t.Errorf("%d errors joined, want 3", n)
	}
}

// TestProblemsClock: a nil clock is a problem that names the Breakers'
// clock; time.Now is not.
func TestProblemsClock(t *testing.T) {
	p := &adapter.Problems{Backend: "x"}
	p.Clock(time.Now)
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	p.Clock(nil)
	if err := p.Err(); err == nil || err.Error() != "x: invalid WithClock: nil: pass the Breakers' Settings.Clock, or leave it out for time.Now" {
		t.Fatalf("Err() = %v", err)
	}
}

// TestProblemsPositive: a zero or negative duration is a problem that
// names the default; a positive one is not.
func TestProblemsPositive(t *testing.T) {
	p := &adapter.Problems{Backend: "x"}
	p.Positive("WithCallTimeout", time.Second, 5*time.Second)
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	p.Positive("WithCallTimeout", 0, 5*time.Second)
	if err := p.Err(); err == nil || err.Error() != "x: invalid WithCallTimeout: 0s: set a positive duration, or leave it out for 5s" {
		t.Fatalf("Err() = %v", err)
	}
}
