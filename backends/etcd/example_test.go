package etcd_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/etcd"
)

// ExampleNew shares a circuit breaker's state through etcd: every worker
// process makes its own client, Store and Breaker over the same prefix.
func ExampleNew() {
	// endpoints are your cluster's, e.g. []string{"https://etcd-0:2379"}
	// (here, the tests' embedded server).
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()

	store, err := etcd.New(cli, etcd.WithPrefix("example/breaker/"))
	if err != nil {
		log.Fatal(err)
	}
	b, err := kvbreaker.New(store, kvbreaker.Settings{
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
	v, _ := b.Allow(ctx, host, time.Time{})
	fmt.Println(v.Decision)
	for range 2 {
		if err := b.Failure(ctx, host); err != nil {
			log.Fatal(err)
		}
	}
	v, _ = b.Allow(ctx, host, time.Time{})
	fmt.Println(v.Decision)

	if err := b.Reset(ctx, host); err != nil {
		log.Fatal(err)
	}
	// Both writes shared one pooled lease.
	fmt.Println("lease grants:", store.Stats().Grants)
	// Output:
	// send
	// inbox.example: closed → open
	// hold
	// inbox.example: open → closed
	// lease grants: 1
}

// ExampleDial connects with TLS; Close closes the client Dial made.
func ExampleDial() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	store, err := etcd.Dial(ctx, []string{"https://etcd-0.internal:2379"}, &tls.Config{MinVersion: tls.VersionTLS13},
		etcd.WithPrefix("kvbreaker/prod/"))
	if err != nil {
		log.Fatal(err) // e.g. etcd: grant via https://etcd-0.internal:2379: context deadline exceeded
	}
	defer store.Close()
	b, err := kvbreaker.New(store, kvbreaker.Settings{})
	if err != nil {
		log.Fatal(err)
	}
	_ = b
}
