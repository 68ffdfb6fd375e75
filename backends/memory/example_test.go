package memory_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
	"github.com/kvbreaker/kvbreaker/driver"
)

// A store on a clock the example moves by hand: create-only, a stale
// compare that conflicts, and expiry.
func ExampleNew() {
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	s := memory.New(memory.WithClock(func() time.Time { return now }))

	v1, _ := s.CompareAndSwap(ctx, "example.com", driver.NoVersion, []byte("open"), time.Minute)
	_, err := s.CompareAndSwap(ctx, "example.com", driver.NoVersion, []byte("again"), time.Minute)
	fmt.Println("create twice:", errors.Is(err, driver.ErrConflict))

	v2, _ := s.CompareAndSwap(ctx, "example.com", v1, []byte("half-open"), time.Minute)
	_, err = s.CompareAndSwap(ctx, "example.com", v1, []byte("stale"), time.Minute)
	fmt.Println("stale version:", errors.Is(err, driver.ErrConflict), v2 != v1)

	now = now.Add(time.Minute)
	_, _, err = s.Get(ctx, "example.com")
	fmt.Println("after the TTL:", errors.Is(err, driver.ErrNotFound))
	// Output:
	// create twice: true
	// stale version: true true
	// after the TTL: true
}

// Listing the hosts a fleet has records for, a page at a time, through
// kvbreaker.Prefixed (which lists only its own keys); the expired record is
// not listed.
func ExampleStore_List() {
	ctx := context.Background()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	mem := memory.New(memory.WithClock(func() time.Time { return now }))
	store, err := kvbreaker.Prefixed(mem, "fleet-a/")
	if err != nil {
		log.Fatal(err)
	}
	for _, host := range []string{"c.example", "a.example", "b.example"} {
		if _, err := store.CompareAndSwap(ctx, host, driver.NoVersion, []byte("record"), time.Hour); err != nil {
			log.Fatal(err)
		}
	}
	if _, err := store.CompareAndSwap(ctx, "old.example", driver.NoVersion, []byte("record"), time.Minute); err != nil {
		log.Fatal(err)
	}
	now = now.Add(time.Minute)

	lister := store.(driver.Lister)
	cursor := ""
	for {
		keys, next, err := lister.List(ctx, "", cursor, 2)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(keys)
		if next == "" {
			break
		}
		cursor = next
	}
	// Output:
	// [a.example b.example]
	// [c.example]
}
