package adapter_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/adapter"
)

func TestEnded(t *testing.T) {
	if err := adapter.Ended(context.Background()); err != nil {
		t.Errorf("a context without a deadline: %v, want nil", err)
	}
	live, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if err := adapter.Ended(live); err != nil {
		t.Errorf("a deadline an hour away: %v, want nil", err)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := adapter.Ended(canceled); !errors.Is(err, context.Canceled) {
		t.Errorf("a canceled context: %v, want context.Canceled", err)
	}
	// A deadline in the past whose context reports no error yet: what a
	// socket deadline taken from ctx sees before ctx's timer fires.
	passed := deadlineOnly{context.Background(), time.Now().Add(-time.Millisecond)}
	if passed.Err() != nil {
		t.Fatal("the control's context already reports an error")
	}
	if err := adapter.Ended(passed); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a passed deadline: %v, want context.DeadlineExceeded", err)
	}
}

// deadlineOnly has a deadline but reports no error: a context whose
// timer has not fired yet.
type deadlineOnly struct {
	context.Context
	d time.Time
}

func (c deadlineOnly) Deadline() (time.Time, bool) { return c.d, true }
