package dynamodb_test

import (
	"testing"
	"time"

	"github.com/kvbreaker/kvbreaker"
	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
	"github.com/kvbreaker/kvbreaker/driver"
)

// Round trips to the tests' dynalite over loopback. dynalite is not
// DynamoDB: these compare the adapter's paths with each other, they do not
// predict latency against AWS.

func BenchmarkDynalite(b *testing.B) {
	ctx := b.Context()
	s := newStore(b)
	val := make([]byte, 64)
	ver, err := s.CompareAndSwap(ctx, "bench.example", driver.NoVersion, val, time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("get", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := s.Get(ctx, "bench.example"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cas", func(b *testing.B) {
		for b.Loop() {
			if ver, err = s.CompareAndSwap(ctx, "bench.example", ver, val, time.Hour); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cas-conflict-reread", func(b *testing.B) {
		// dynalite returns no old item, so every conflict costs a Get.
		for b.Loop() {
			if _, err := s.CompareAndSwap(ctx, "bench.example", 1, val, time.Hour); err == nil {
				b.Fatal("no conflict")
			}
		}
	})
	b.Run("breaker-allow-closed", func(b *testing.B) {
		br, err := kvbreaker.New(s, kvbreaker.Settings{})
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, err := br.Allow(ctx, "closed.example", time.Time{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkConflictPath compares a failed condition answered with the old
// item (ALL_OLD, as DynamoDB does) against one without it (a re-read), over
// the local HTTP server with DynamoDB-shaped responses.
func BenchmarkConflictPath(b *testing.B) {
	now := time.Now().Unix()
	item := itemJSON("h.example", []byte("current"), 77, now+3600)
	for _, bc := range []struct {
		name   string
		script map[string][]awsReply
	}{
		{"all-old", map[string][]awsReply{"UpdateItem": {conditionalFailed(item)}}},
		{"reread", map[string][]awsReply{"UpdateItem": {conditionalFailed("")}, "GetItem": {ok(`{"Item":` + item + `}`)}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			_, c := newFakeAWSB(b, bc.script)
			s, err := dynamodb.New(c, table)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := s.CompareAndSwap(b.Context(), "h.example", 5, []byte("x"), time.Minute); err == nil {
					b.Fatal("no conflict")
				}
			}
		})
	}
}
