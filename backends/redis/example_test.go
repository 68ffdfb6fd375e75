package redis_test

import (
	"context"
	"fmt"
	"log"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/redis"
)

// ExampleNew shares a circuit breaker's state through Redis: every worker
// process makes its own client, Store and Breaker, all under one prefix.
func ExampleNew() {
	// addr is your server's, e.g. "redis-0:6379" (here, the tests' server).
	// A *redis.ClusterClient or a failover (Sentinel) client works the same.
	cli := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer cli.Close()

	store, err := redis.New(cli)
	if err != nil {
		log.Fatal(err)
	}
	fleet, err := kvbreaker.Prefixed(store, "example/breaker/")
	if err != nil {
		log.Fatal(err)
	}
	b, err := kvbreaker.New(fleet, kvbreaker.Settings{
		FailureThreshold: 2,
		RecoveryDelay:    time.Minute,
		OnStateChange: func(host string, from, to kvbreaker.State) {
			fmt.Printf("%s: %s → %s\n", host, from, to)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	const host = "inbox.example"
	_ = b.Reset(ctx, host) // the example runs more than once against one server
	for range 2 {
		if err := b.Failure(ctx, host); err != nil {
			log.Fatal(err)
		}
	}
	v, _ := b.Allow(ctx, host, time.Time{})
	fmt.Println(v.Decision)
	// Output:
	// inbox.example: closed → open
	// hold
}

// ExampleDial connects with a URL, as the command's --redis-url does; the
// Store owns the client, and Breaker.Close closes it.
func ExampleDial() {
	store, err := redis.Dial(context.Background(), srv.URL())
	if err != nil {
		log.Fatal(err) // "redis: dial: cannot reach redis at …: connection refused"
	}
	b, err := kvbreaker.New(store, kvbreaker.Settings{})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close(context.Background())
	fmt.Println(store.Traits().Expiry.Granularity)
	// Output: 1ms
}
