package kvbreaker_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/memory"
)

// message is a queued delivery, as a delivery worker keeps it.
type message struct {
	URL       string
	HeldSince time.Time // zero until the breaker first holds it
}

// post stands for the HTTP request a worker makes; here every host is down.
func post(ctx context.Context, m message) error {
	return fmt.Errorf("post %s: connection refused", m.URL)
}

// Example is the README's "Use it" block, verbatim between the markers
// (TestREADMEExamples checks): ask before each send, report the outcome,
// requeue a held message for when the breaker says.
func Example() {
	ctx := context.Background()
	queue := []message{{URL: "https://inbox.example/a"}, {URL: "https://inbox.example/b"}, {URL: "https://inbox.example/c"}}
	// README: use it
	store := memory.New() // or etcd, DynamoDB, Workers KV, Redis, PostgreSQL: see Backends
	breaker, err := kvbreaker.New(store, kvbreaker.Settings{
		FailureThreshold: 2, // default 5
		OnStateChange: func(host string, from, to kvbreaker.State) {
			fmt.Printf("%s: %s -> %s\n", host, from, to)
		},
	})
	if err != nil {
		log.Fatal(err) // every invalid setting, and what to change
	}
	defer breaker.Close(ctx) // flushes a store that queues writes

	for _, m := range queue {
		host, err := kvbreaker.HostKey(m.URL) // "https://Bücher.example/inbox" -> "xn--bcher-kva.example"
		if err != nil {
			log.Printf("not deliverable: %v", err)
			continue
		}
		v, err := breaker.Allow(ctx, host, m.HeldSince)
		if err != nil {
			log.Printf("breaker store: %v", err) // v still says what to do: Send (fail open) by default
		}
		switch v.Decision {
		case kvbreaker.Send, kvbreaker.Probe:
			if err := post(ctx, m); err != nil {
				err = breaker.Failure(ctx, host) // kvbreaker.Reachable / ReachableFailure for a 4xx: the host answered
				if err != nil {
					log.Printf("breaker store: %v", err)
				}
			} else if err := breaker.Success(ctx, host); err != nil {
				log.Printf("breaker store: %v", err)
			}
		case kvbreaker.Hold:
			// Requeue m for v.RetryAt, with v.HeldSince: passed back to
			// Allow, it lets HoldLimit drop a message held too long.
			m.HeldSince = v.HeldSince
			fmt.Println("hold", m.URL, "for", time.Until(v.RetryAt).Round(time.Minute))
		case kvbreaker.Drop:
			fmt.Println("drop", m.URL, "held since", m.HeldSince) // held for HoldLimit (7 days by default)
		}
	}
	// README: end

	// Output:
	// inbox.example: closed -> open
	// hold https://inbox.example/c for 30m0s
}

// ExampleBreaker_Do lets Do keep the books: nil is a success, an error marked
// with kvbreaker.Reachable a reachable failure (the host answered), any other
// error a failure; a held delivery is not run.
func ExampleBreaker_Do() {
	ctx := context.Background()
	breaker, err := kvbreaker.New(memory.New(), kvbreaker.Settings{FailureThreshold: 1})
	if err != nil {
		log.Fatal(err)
	}
	m := message{URL: "https://relay.example/inbox"}
	// README: do
	host, err := kvbreaker.HostKey(m.URL)
	if err != nil {
		log.Fatal(err)
	}
	for range 2 {
		err = breaker.Do(ctx, host, func(ctx context.Context) error { return post(ctx, m) })
		if held, ok := errors.AsType[*kvbreaker.HeldError](err); ok && held.Decision == kvbreaker.Hold {
			// Requeue for held.RetryAt, retrying under kvbreaker.WithHeldSince(ctx, held.HeldSince).
			fmt.Println("held for", time.Until(held.RetryAt).Round(time.Minute))
		} else if err != nil {
			fmt.Println(err) // failed (counted), or dropped at HoldLimit (kvbreaker.ErrDropped)
		}
	}
	// README: end

	// Output:
	// post https://relay.example/inbox: connection refused
	// held for 30m0s
}
