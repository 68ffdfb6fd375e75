package dynamodb_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	dyn "github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
)

// ExampleNew shows the production setup: the application loads its own AWS
// configuration (kvbreaker never reads credentials), makes the table once,
// and shares it across the fleet.
func ExampleNew() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx) // region, credentials, retryer
	if err != nil {
		log.Fatal(err)
	}
	client := dyn.NewFromConfig(cfg)
	// Optional; or create the table with infrastructure code: String
	// partition key "pk", TTL on "purgeAt".
	if err := dynamodb.CreateTable(ctx, client, "kvbreaker"); err != nil {
		log.Fatal(err)
	}
	store, err := dynamodb.New(client, "kvbreaker")
	if err != nil {
		log.Fatal(err)
	}
	// Optional: several fleets can share the table, each under its own
	// key prefix.
	webhooks, err := kvbreaker.Prefixed(store, "webhooks/")
	if err != nil {
		log.Fatal(err)
	}
	breaker, err := kvbreaker.New(webhooks, kvbreaker.Settings{})
	if err != nil {
		log.Fatal(err)
	}
	_ = breaker // one per worker process; all share the table
}

// Example_breaker runs a Breaker over a DynamoDB-compatible endpoint (here
// the tests' local dynalite; any endpoint, e.g. DynamoDB Local, works the
// same way).
func Example_breaker() {
	ctx := context.Background()
	client := dyn.NewFromConfig(aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", ""),
	}, func(o *dyn.Options) { o.BaseEndpoint = aws.String(localEndpoint()) })
	if err := dynamodb.CreateTable(ctx, client, "example"); err != nil {
		log.Fatal(err)
	}
	store, err := dynamodb.New(client, "example")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(store.Traits().Expiry.Kind, "expiry, granularity", store.Traits().Expiry.Granularity)

	breaker, err := kvbreaker.New(store, kvbreaker.Settings{FailureThreshold: 3, RecoveryDelay: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	const host = "inbox.example.org"
	for range 3 {
		if err := breaker.Failure(ctx, host); err != nil {
			log.Fatal(err)
		}
	}
	v, err := breaker.Allow(ctx, host, time.Time{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("after 3 failures:", v.Decision)

	if err := breaker.Reset(ctx, host); err != nil {
		log.Fatal(err)
	}
	v, _ = breaker.Allow(ctx, host, time.Time{})
	fmt.Println("after a reset:", v.Decision)
	// Output:
	// reader-filtered expiry, granularity 1s
	// after 3 failures: hold
	// after a reset: send
}
