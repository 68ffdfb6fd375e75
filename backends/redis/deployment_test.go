package redis_test

import (
	"errors"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/kvbreaker/kvbreaker/backends/redis"
	"github.com/kvbreaker/kvbreaker/internal/backendtest"
)

// TestStoreString: a Store names its deployment by its client's options,
// never with their password.
func TestStoreString(t *testing.T) {
	const secret = "s3cret-not-shown"
	s, err := redis.Dial(t.Context(), "redis://"+srv.Addr()+"/3")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, want := s.String(), "redis at "+srv.Addr()+" db 3"; got != want {
		t.Errorf("Dial's Store is %q, want %q", got, want)
	}
	failover := goredis.NewFailoverClient(&goredis.FailoverOptions{MasterName: "m", SentinelAddrs: []string{"127.0.0.1:1"}, DB: 2, Password: secret, ContextTimeoutEnabled: true})
	defer failover.Close()
	ring := goredis.NewRing(&goredis.RingOptions{Addrs: map[string]string{"b": "127.0.0.1:2", "a": "127.0.0.1:1"}, Password: secret, ContextTimeoutEnabled: true})
	defer ring.Close()
	for c, want := range map[goredis.UniversalClient]string{
		failover: "redis via Sentinel db 2",
		ring:     "redis ring of 127.0.0.1:1, 127.0.0.1:2",
	} {
		s, err := redis.New(c)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.String(); got != want {
			t.Errorf("New(%T)'s Store is %q, want %q", c, got, want)
		}
	}
}

// TestDialRefusalNamesDeployment: a server's refusal of Dial's first
// requests names the deployment, as the Store would have been named, and
// Explain takes that name when given none; an error that names its server
// itself (a refused port) Explain leaves as it is.
func TestDialRefusalNamesDeployment(t *testing.T) {
	_, err := redis.Dial(t.Context(), "redis://"+srv.Addr()+"/99")
	where := "redis at " + srv.Addr() + " db 99"
	if err == nil || !strings.Contains(err.Error(), where+": ERR DB index is out of range") {
		t.Fatalf("Dial to a database the server lacks: %v, want it named %q", err, where)
	}
	got := redis.Explain(err, "", "--redis-url")
	if !strings.HasPrefix(got.Error(), where+": the server has no such database") || !strings.Contains(got.Error(), "--redis-url's path") || !errors.Is(got, err) {
		t.Errorf("Explain without where: %v", got)
	}
	_, err = redis.Dial(t.Context(), "redis://"+backendtest.ClosedPort(t)+"/0")
	if err == nil {
		t.Fatal("Dial on a closed port succeeded")
	}
	if got := redis.Explain(err, "", "--redis-url"); got != err {
		t.Errorf("Explain without where of %v: %v, want it as it is", err, got)
	}
	// Negative control: given a where, Explain puts it in front.
	if got := redis.Explain(err, "redis at elsewhere", ""); got.Error() != "redis at elsewhere: "+err.Error() {
		t.Errorf("Explain with where: %v", got)
	}
}
