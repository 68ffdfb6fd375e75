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

// onlyStore hides every optional interface of the store it holds.
type onlyStore struct{ driver.Store }

// TestPrefixedFollow: a Prefixed store follows its own keys only, delivered
// as they were written through it (prefix removed, unescaped); another
// fleet's keys under a longer prefix, keys outside the prefix and keys no
// Breaker wrote through it never arrive. The key prefix asked for is
// escaped as keys are.
func TestPrefixedFollow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		inner := memory.New()
		defer inner.Close()
		prod, _ := kvbreaker.Prefixed(inner, "prod/")
		eu, _ := kvbreaker.Prefixed(inner, "prod/eu/")
		other, _ := kvbreaker.Prefixed(inner, "prod2/")
		put := func(s driver.Store, k string) {
			t.Helper()
			if _, err := s.CompareAndSwap(ctx, k, driver.NoVersion, []byte(k), time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		put(prod, "a/b%c")
		put(eu, "x")
		put(other, "y")
		put(inner, "prod/bad%zz")

		follow := func(prefix string) (func() []string, func()) {
			var mu sync.Mutex
			var got []string
			c, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				done <- prod.(driver.Follower).Follow(c, prefix, time.Second, func(ch driver.Change) {
					mu.Lock()
					defer mu.Unlock()
					switch ch.Kind {
					case driver.ChangePut:
						got = append(got, fmt.Sprintf("put %s=%s", ch.Key, ch.Value))
					case driver.ChangeDelete:
						got = append(got, "delete "+ch.Key)
					default:
						got = append(got, ch.Kind.String())
					}
				})
			}()
			return func() []string {
					synctest.Wait()
					mu.Lock()
					defer mu.Unlock()
					g := got
					got = nil
					return g
				}, func() {
					cancel()
					if err := <-done; !errors.Is(err, context.Canceled) {
						t.Errorf("Follow ended with %v", err)
					}
				}
		}
		all, stopAll := follow("")
		if got, want := fmt.Sprint(all()), fmt.Sprint([]string{"reset", "put a/b%c=a/b%c", "synced"}); got != want {
			t.Fatalf("snapshot %s, want %s", got, want)
		}
		sub, stopSub := follow("a/")
		if got, want := fmt.Sprint(sub()), fmt.Sprint([]string{"reset", "put a/b%c=a/b%c", "synced"}); got != want {
			t.Fatalf("snapshot of key prefix a/: %s, want %s", got, want)
		}
		put(eu, "z")
		put(inner, "prod/bad/")
		put(prod, "h")
		if got, want := fmt.Sprint(all()), fmt.Sprint([]string{"put h=h"}); got != want {
			t.Fatalf("changes %s, want %s", got, want)
		}
		if got := sub(); len(got) != 0 {
			t.Fatalf("key prefix a/ received %q", got)
		}
		stopAll()
		stopSub()

		bare, _ := kvbreaker.Prefixed(onlyStore{inner}, "prod/")
		err := bare.(driver.Follower).Follow(ctx, "", time.Second, func(driver.Change) {})
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("Prefixed over a store that cannot follow: %v", err)
		}
	})
}
