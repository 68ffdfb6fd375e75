package cloudflarekv_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cloudflare/cloudflare-go/v6/kv"
	"github.com/cloudflare/cloudflare-go/v6/option"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/cloudflarekv"
	"github.com/kvbreaker/kvbreaker/internal/testservers/miniflare"
)

// A breaker whose per-host state lives in Workers KV. Against Cloudflare,
// build the client from your own token instead of the local Miniflare:
//
//	cf := cloudflare.NewClient(option.WithAPIToken(os.Getenv("CLOUDFLARE_API_TOKEN")))
//	store, err := cloudflarekv.New(cf.KV, accountID, namespaceID)
func ExampleNew() {
	ctx := context.Background()
	srv, err := miniflare.Start(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Stop()

	client := kv.NewKVService([]option.RequestOption{option.WithBaseURL(srv.BaseURL()), option.WithAPIToken(srv.Token)}...)
	store, err := cloudflarekv.New(client, srv.AccountID, srv.NamespaceID,
		cloudflarekv.WithClock(srv.Now)) // Miniflare's clock; time.Now by default
	if err != nil {
		fmt.Println(err)
		return
	}
	// Optional: keep this application's keys apart from others in the
	// namespace.
	keys, err := kvbreaker.Prefixed(store, "example/")
	if err != nil {
		fmt.Println(err)
		return
	}
	breaker, err := kvbreaker.New(keys, kvbreaker.Settings{
		FailureThreshold: 2,
		Clock:            srv.Now,
		Logger:           slog.New(slog.DiscardHandler), // it warns that KV is last-writer-wins
		OnStateChange: func(host string, from, to kvbreaker.State) {
			fmt.Printf("%s: %v → %v\n", host, from, to)
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 2 {
		if err := breaker.Failure(ctx, "inbox.example"); err != nil {
			fmt.Println(err)
			return
		}
		_ = srv.Advance(ctx, time.Second)
	}
	v, err := breaker.Allow(ctx, "inbox.example", time.Time{})
	fmt.Println(v.Decision, err)
	fmt.Println("record TTL:", breaker.StateTTL(), "(exact; KV keeps the physical copy at least", cloudflarekv.MinTTL, "and padded for", store.Traits().MaxClockSkew, "of clock skew)")
	// Send queued writes before exiting (Close flushes the store).
	if err := breaker.Close(ctx); err != nil {
		fmt.Println(err)
	}
	// Output:
	// inbox.example: closed → open
	// hold <nil>
	// record TTL: 30m5s (exact; KV keeps the physical copy at least 1m0s and padded for 1s of clock skew)
}
