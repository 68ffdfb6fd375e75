package cloudflarekv

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
	"github.com/kvbreaker/kvbreaker/internal/leakcheck"
)

// TestCloseEndsSharedRead: a Get whose caller gave up leaves its read
// running for other callers to share, up to WithCallTimeout; Close cancels
// it and returns once it has ended, so a program (kvbreaker inspect) that
// closes the store leaves no request behind (the command's leak check
// would find it).
func TestCloseEndsSharedRead(t *testing.T) {
	addr, _ := backendtest.SilentListener(t)
	s, _ := countingStore(t, "http://"+addr, WithCallTimeout(time.Minute), WithMaxRetries(0), WithLogger(quiet))
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if _, _, err := s.Get(ctx, "a.example"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get on a silent endpoint = %v, want the deadline", err)
	}
	// Negative control: the read is still running after its caller left.
	if err := leakcheck.Find(50 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "fetch") {
		t.Fatalf("before Close: want the shared read found running, got %v", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return within 10 s: the shared read was not cancelled")
	}
	if err := leakcheck.Find(time.Second); err != nil && strings.Contains(err.Error(), "fetch") {
		t.Errorf("after Close the read still runs: %v", err)
	}
	if _, _, err := s.Get(t.Context(), "a.example"); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close = %v, want ErrClosed", err)
	}
	if _, err := s.CompareAndSwap(t.Context(), "a.example", driver.NoVersion, []byte("v"), time.Hour); !errors.Is(err, ErrClosed) {
		t.Errorf("CompareAndSwap after Close = %v, want ErrClosed", err)
	}
	if _, _, err := s.List(t.Context(), "", "", 10); !errors.Is(err, ErrClosed) {
		t.Errorf("List after Close = %v, want ErrClosed", err)
	}
}

// TestCloseFailsQueuedWrite: a write still queued when Close comes is not
// sent; its caller learns it failed instead of waiting for ever.
func TestCloseFailsQueuedWrite(t *testing.T) {
	s := newStore(t)
	ctx := t.Context()
	// The first write occupies the key's write slot for the write
	// interval, so the second one queues behind it.
	if _, err := s.CompareAndSwap(ctx, "q.example", driver.NoVersion, []byte("1"), time.Hour); err != nil {
		t.Fatal(err)
	}
	res := make(chan error, 1)
	go func() {
		_, err := s.CompareAndSwap(ctx, "q.example", driver.NoVersion, []byte("2"), time.Hour)
		res <- err
	}()
	// Wait until the second write is queued.
	for deadline := time.Now().Add(5 * time.Second); ; {
		s.mu.Lock()
		st := s.keys[s.prefix+"q.example"]
		queued := st != nil && st.pending != nil
		s.mu.Unlock()
		if queued {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second write never queued")
		}
		time.Sleep(time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-res:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("queued write after Close = %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the queued write's caller still waits 10 s after Close")
	}
}
