package etcd_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/etcd"
	"github.com/kvbreaker/kvbreaker/driver"
)

// ExampleNew shares a circuit breaker's state through etcd: every worker
// process makes its own client, Store and Breaker, all under one prefix.
func ExampleNew() {
	// endpoints are your cluster's, e.g. []string{"https://etcd-0:2379"}
	// (here, the tests' etcd server).
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()

	store, err := etcd.New(cli)
	if err != nil {
		log.Fatal(err)
	}
	// The fleet's records live under their own prefix in the cluster.
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

// ExampleStore_List lists the hosts a fleet has records for, a page at a
// time: a range read of the fleet's prefix.
func ExampleStore_List() {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	store, err := etcd.New(cli)
	if err != nil {
		log.Fatal(err)
	}
	fleet, err := kvbreaker.Prefixed(store, "example/list/")
	if err != nil {
		log.Fatal(err)
	}
	b, err := kvbreaker.New(fleet, kvbreaker.Settings{FailureThreshold: 1})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	for _, host := range []string{"c.example", "a.example", "b.example"} {
		if err := b.Failure(ctx, host); err != nil {
			log.Fatal(err)
		}
	}

	lister := fleet.(driver.Lister)
	cursor := ""
	for {
		hosts, next, err := lister.List(ctx, "", cursor, 2)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(hosts)
		if next == "" {
			break
		}
		cursor = next
	}
	for _, host := range []string{"a.example", "b.example", "c.example"} {
		if err := b.Reset(ctx, host); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// [a.example b.example]
	// [c.example]
}

// ExampleDial connects with TLS and confirms that the cluster answers; the
// Breaker's Close closes the client Dial made.
func ExampleDial() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	store, err := etcd.Dial(ctx, []string{"https://etcd-0.internal:2379"}, etcd.WithTLSConfig(&tls.Config{MinVersion: tls.VersionTLS13}))
	if errors.Is(err, driver.ErrUnreachable) {
		// e.g. etcd: dial: cannot reach etcd at https://etcd-0.internal:2379: connection refused
		log.Fatal(err)
	}
	if err != nil {
		log.Fatal(err)
	}
	fleet, err := kvbreaker.Prefixed(store, "kvbreaker/prod/")
	if err != nil {
		log.Fatal(err)
	}
	b, err := kvbreaker.New(fleet, kvbreaker.Settings{})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close(context.Background())
}
