package kvbreaker_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
)

// A fleet of workers shares one store; here, two Breakers over one memory
// store with a fixed clock, so the output is deterministic.
func ExampleNew() {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	store := memory.New(memory.WithClock(clock))
	settings := kvbreaker.Settings{
		Clock: clock,
		OnStateChange: func(host string, from, to kvbreaker.State) {
			fmt.Printf("%s: %s -> %s\n", host, from, to)
		},
	}
	worker1, _ := kvbreaker.New(store, settings)
	worker2, _ := kvbreaker.New(store, settings)
	ctx := context.Background()

	host, _ := kvbreaker.HostKey("https://Inbox.Example/users/alice/inbox")
	for range 5 {
		worker1.Failure(ctx, host) // five timeouts open the circuit
	}
	v, _ := worker2.Allow(ctx, host, time.Time{})
	fmt.Println(v.Decision, "until", v.RetryAt.Format(time.Kitchen))

	now = v.RetryAt
	v, _ = worker2.Allow(ctx, host, v.HeldSince)
	fmt.Println(v.Decision)
	worker2.Success(ctx, host)
	fmt.Println("record TTL:", worker1.StateTTL())
	// Output:
	// inbox.example: closed -> open
	// hold until 12:30PM
	// inbox.example: open -> half-open
	// probe
	// inbox.example: half-open -> closed
	// record TTL: 30m5s
}

func ExampleHostKey() {
	for _, u := range []string{"https://Bücher.example/inbox", "http://mail.example:8025/", "https://example.com:443/"} {
		k, _ := kvbreaker.HostKey(u)
		fmt.Println(k)
	}
	// Output:
	// xn--bcher-kva.example
	// mail.example:8025
	// example.com
}

// A held message carries its first-hold instant into each retry's context;
// Do drops it, without running fn, once it has been held for HoldLimit.
func ExampleWithHeldSince() {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	b, _ := kvbreaker.New(memory.New(memory.WithClock(clock)), kvbreaker.Settings{
		Clock: clock, FailureThreshold: 1, RecoveryDelay: 30 * 24 * time.Hour, HoldLimit: 7 * 24 * time.Hour,
	})
	ctx := context.Background()
	deliver := func(context.Context) error { return errors.New("connection refused") }

	fmt.Println(b.Do(ctx, "inbox.example", deliver))
	err := b.Do(ctx, "inbox.example", deliver)
	held, _ := errors.AsType[*kvbreaker.HeldError](err)
	fmt.Println("held:", errors.Is(err, kvbreaker.ErrHeld))

	now = now.Add(7 * 24 * time.Hour)
	err = b.Do(kvbreaker.WithHeldSince(ctx, held.HeldSince), "inbox.example", deliver)
	fmt.Println("dropped:", errors.Is(err, kvbreaker.ErrDropped), "held:", errors.Is(err, kvbreaker.ErrHeld))
	// Output:
	// connection refused
	// held: true
	// dropped: true held: false
}
