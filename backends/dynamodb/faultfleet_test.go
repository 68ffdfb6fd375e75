package dynamodb_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	dyn "github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/kvbreaker/kvbreaker/backends/dynamodb"
	"github.com/kvbreaker/kvbreaker/driver"
	"github.com/kvbreaker/kvbreaker/internal/faultfleet"
)

// TestFaultFleet runs a Breaker fleet over dynalite through a faultproxy
// that loses and fails answers of applied requests, delays, resets and
// blackholes, and checks with faultfleet that no failure is counted twice,
// every probe winner is told Probe, every opening and transition is reported
// once, and every call returns within CallTimeout. Each worker has its own
// client, as a separate process would. An adapter that took the SDK's
// retried writes, conflicting with themselves, at face value failed it in
// two runs of two: "won the probe election … but was told hold", "opened
// the circuit … but OnStateChange was told \"\"" and "open→half-open
// reported twice in a row".
func TestFaultFleet(t *testing.T) {
	prefix := uniquePrefix(t)
	faultfleet.Proxied(t, srv.Addr(), prefix, newPrefixed(t, client, prefix), func(addr string) (driver.Store, error) {
		c := newClient("http://"+addr, func(o *dyn.Options) {
			// The SDK's standard retryer with a short backoff, so that
			// retries of applied writes happen within CallTimeout (the
			// default waits up to 2 s, longer than the fleet's 1 s), and
			// no retry quota, so a long run keeps retrying.
			o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
				so.MaxAttempts = 3
				so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 20 * time.Millisecond, nil })
				so.RateLimiter = ratelimit.None
			})
		})
		return dynamodb.New(c, table)
	}, func() string {
		// A run where dynalite stopped answering (seen twice in about 25
		// runs, cause not found) reports no power; say whether it died.
		return fmt.Sprintf("dynalite pid %d (0: exited), stderr %q", srv.PID(), srv.Stderr())
	})
}
